import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { ShardQueue, ShardWorker, type ReconcileJobData } from './shard-queue.js';

/**
 * Invariants 1 and 2 at the queue, against a real Redis: at most one reconcile of a service sync at
 * a time, and a change seen during a reconcile always leads to another one.
 */
describe('ShardQueue de-duplication', () => {
  let server: RedisServer;
  let connection: Redis;

  beforeAll(async () => {
    server = await startRedis();
    connection = new Redis(server.url, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    connection?.disconnect();
    await server?.cleanup();
  });

  it('runs one reconcile per key at a time and one more after a change seen meanwhile', async () => {
    const prefix = `q${randomUUID().slice(0, 8)}`;
    const queue = new ShardQueue({ connection, prefix, changeDelayMs: 0 });
    const runs: ReconcileJobData[] = [];
    let running = 0;
    let maxRunning = 0;
    let release: () => void = () => {};
    let gate = new Promise<void>((r) => (release = r));
    const worker = new ShardWorker(
      { connection: new Redis(server.url, { maxRetriesPerRequest: null }), prefix, concurrency: 8 },
      async (data) => {
        running += 1;
        maxRunning = Math.max(maxRunning, running);
        runs.push(data);
        await gate;
        running -= 1;
      },
      silentLogger(),
    );
    try {
      await queue.enqueue('k1', 'change');
      await waitUntil(() => runs.length === 1, { message: 'first reconcile running' });
      // Three changes while the first reconcile runs: exactly one more run, after it.
      await queue.enqueue('k1', 'change');
      await queue.enqueue('k1', 'change');
      await queue.enqueue('k1', 'full');
      const held = gate;
      gate = new Promise<void>((r) => {
        const first = release;
        release = r;
        first();
      });
      await held;
      await waitUntil(() => runs.length === 2, { message: 'second reconcile' });
      release();
      await waitUntil(async () => (await queue.depth()) === 0, { message: 'queue drained' });
      expect(runs.map((r) => r.key)).toEqual(['k1', 'k1']);
      expect(runs[1]?.reason).toBe('full');
      expect(maxRunning).toBe(1);
    } finally {
      release();
      await worker.close();
      await queue.close();
    }
  });

  it('runs changes before full syncs, also a change merged into a waiting full-sync job', async () => {
    const prefix = `q${randomUUID().slice(0, 8)}`;
    const queue = new ShardQueue({ connection, prefix, changeDelayMs: 0 });
    // A full sync of many service syncs waits (no worker yet); then changes for two of them come.
    await queue.enqueueMany(['f1', 'f2', 'f3', 'f4', 'f5'], 'full');
    await queue.enqueue('c1', 'change');
    await queue.enqueue('f5', 'change');
    const order: string[] = [];
    const worker = new ShardWorker(
      { connection: new Redis(server.url, { maxRetriesPerRequest: null }), prefix, concurrency: 1 },
      async (data) => {
        order.push(data.key);
      },
      silentLogger(),
    );
    try {
      await waitUntil(() => order.length === 6, { message: 'every job run' });
      // One run per key; the two changed ones first, the full sync after them in its order.
      expect(order.slice(0, 2).sort()).toEqual(['c1', 'f5']);
      expect(order.slice(2)).toEqual(['f1', 'f2', 'f3', 'f4']);
    } finally {
      await worker.close();
      await queue.close();
    }
  });

  it('runs recoveries after changes and before full syncs, once per key, and a change merged into a waiting recovery first', async () => {
    const prefix = `q${randomUUID().slice(0, 8)}`;
    const queue = new ShardQueue({ connection, prefix, changeDelayMs: 0 });
    await queue.enqueueMany(['f1', 'f2'], 'full');
    await queue.enqueueMany(['r1', 'r2', 'r3', 'f2'], 'recovery');
    await queue.enqueue('r1', 'recovery');
    await queue.enqueue('c1', 'change');
    await queue.enqueue('r3', 'change');
    const order: string[] = [];
    const worker = new ShardWorker(
      { connection: new Redis(server.url, { maxRetriesPerRequest: null }), prefix, concurrency: 1 },
      async (data) => {
        order.push(data.key);
      },
      silentLogger(),
    );
    try {
      await waitUntil(() => order.length === 6, { message: 'every job run' });
      // The changes first (r3's merged into its waiting recovery), then the recoveries, then the
      // full syncs (f2's recovery merged into its waiting full-sync job runs with them).
      expect(order.slice(0, 2).sort()).toEqual(['c1', 'r3']);
      expect(order.slice(2)).toEqual(['r1', 'r2', 'f1', 'f2']);
      await waitUntil(async () => (await queue.depth()) === 0, { message: 'queue drained' });
      expect(order).toHaveLength(6);
    } finally {
      await worker.close();
      await queue.close();
    }
  });

  it('coalesces a burst of changes into one reconcile and keeps keys apart', async () => {
    const prefix = `q${randomUUID().slice(0, 8)}`;
    const queue = new ShardQueue({ connection, prefix, changeDelayMs: 200 });
    const runs: string[] = [];
    for (let i = 0; i < 20; i++) await queue.enqueue('burst', 'change');
    await queue.enqueue('other', 'change');
    const worker = new ShardWorker({ connection: new Redis(server.url, { maxRetriesPerRequest: null }), prefix }, async (d) => void runs.push(d.key), silentLogger());
    try {
      await waitUntil(() => runs.length >= 2, { message: 'reconciles' });
      await waitUntil(async () => (await queue.depth()) === 0, { message: 'queue drained' });
      expect(runs.sort()).toEqual(['burst', 'other']);
    } finally {
      await worker.close();
      await queue.close();
    }
  });
});
