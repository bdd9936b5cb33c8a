import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNode, type RegsyncNode } from '../../src/node.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import {
  addRegistry,
  copiesIn,
  defineClusters,
  defineTask,
  registerNative,
  startFixture,
  stopFixture,
  testLogger,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * Redis gone for longer than the lease TTL and its grace: the worker beats what it owns while its
 * leases are valid by their local deadline and for the grace after it (three lease TTLs), then stops
 * (no one else can know it still beats); when Redis is back it leads again, beats again, and nothing
 * is duplicated.
 */
describe('Redis lost and back', () => {
  let redis: RedisServer;
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let node: RegsyncNode;
  let native: NativeInstance | undefined;

  beforeAll(async () => {
    redis = await startRedis({ appendonly: true });
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b', { beatIntervalMs: 500 });
    node = await startNode({ redisUrl: redis.url, listen: { host: '127.0.0.1', port: 0 }, logger: testLogger(), shards: 2, replicas: 1, leaseTtlMs: 1_500 });
  });
  afterAll(async () => {
    native?.stop();
    await node?.close();
    if (fx) await stopFixture(fx);
    await redis?.cleanup();
  });

  it('stops beating once its leases run out, and leads, beats and syncs again without duplicates when Redis is back', async () => {
    const url = node.url as string;
    await defineClusters(url, fx);
    await defineTask(url, 'ab', 'a', 'b', 'orders');
    native = await registerNative(() => a, 'orders', '10.80.0.1', 8080, {}, 500);
    await waitUntil(() => (copiesIn(b, 'orders')[0]?.beats ?? 0) >= 1, { message: 'a beaten copy in B' });
    expect(node.heartbeats.stats().entries).toBe(1);

    await redis.stop();
    // The leases' local deadlines and their grace pass without a renewal: leadership and beats end.
    await waitUntil(() => node.coordinator?.ledShards().length === 0, { timeoutMs: 10_000, message: 'no shard led while Redis is down' });
    expect(node.heartbeats.stats().entries).toBe(0);

    await redis.restart();
    await waitUntil(() => node.heartbeats.stats().entries === 1, { timeoutMs: 20_000, message: 'beats again after Redis is back' });
    const beats = copiesIn(b, 'orders')[0]?.beats ?? 0;
    await waitUntil(() => (copiesIn(b, 'orders')[0]?.beats ?? 0) > beats, { message: 'a beat after Redis is back' });

    // Still syncing, and one copy per instance.
    const second = await registerNative(() => a, 'orders', '10.80.0.2', 8080, {}, 500);
    try {
      await waitUntil(() => copiesIn(b, 'orders').length === 2, { timeoutMs: 20_000, message: 'the second instance copied' });
      expect(copiesIn(b, 'orders').map((c) => c.ip).sort()).toEqual(['10.80.0.1', '10.80.0.2']);
    } finally {
      second.stop();
    }
  }, 90_000);
});
