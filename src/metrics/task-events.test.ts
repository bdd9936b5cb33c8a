import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import type { TaskEvent } from '../engine/observer.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { compareIds, isStreamId, parseEntry, TaskEventLog } from './task-events.js';

describe('TaskEventLog', () => {
  let server: RedisServer;
  const connections: Redis[] = [];
  const logs: TaskEventLog[] = [];
  const connect = () => {
    const redis = new Redis(server.url, { maxRetriesPerRequest: null });
    redis.on('error', () => undefined);
    connections.push(redis);
    return redis;
  };
  const newLog = (prefix = `ev-${randomUUID().slice(0, 8)}`, extra: Partial<ConstructorParameters<typeof TaskEventLog>[0]> = {}) => {
    const log = new TaskEventLog({ redis: connect(), prefix, logger: silentLogger(), connect, ...extra });
    logs.push(log);
    return log;
  };

  beforeAll(async () => {
    server = await startRedis();
  });
  afterEach(async () => {
    await Promise.all(logs.splice(0).map((l) => l.close()));
    for (const c of connections.splice(0)) c.disconnect();
  });
  afterAll(async () => {
    await server?.cleanup();
  });

  it('lists a task\'s events newest first, with the same ids as the deployment stream', async () => {
    const log = newLog();
    const first = await log.record({ kind: 'task', taskId: 't1', message: 'task saved' });
    await log.record({ kind: 'reconciled', taskId: 't2', service: 'public/DEFAULT_GROUP/x', message: 'other task' });
    const third = await log.record({ kind: 'held', taskId: 't1', service: 'public/DEFAULT_GROUP/orders', message: 'holding' });
    await log.record({ kind: 'cluster', clusterId: 'c1', message: 'cluster c1 saved' });
    const items = await log.forTask('t1', 10);
    expect(items.map((e) => [e.id, e.kind])).toEqual([
      [third, 'held'],
      [first, 'task'],
    ]);
    expect(items[0]).toEqual({ id: third, at: expect.any(String), kind: 'held', taskId: 't1', service: 'public/DEFAULT_GROUP/orders', message: 'holding' });
    expect(Date.parse(items[0]?.at ?? '')).toBeGreaterThan(Date.now() - 60_000);
    expect(await log.forTask('t1', 1)).toHaveLength(1);
    expect(await log.forTask('nobody', 10)).toEqual([]);
    const after = await log.after(first as string, 10);
    expect(after.map((e) => e.kind)).toEqual(['reconciled', 'held', 'cluster']);
    expect(after[2]).toMatchObject({ clusterId: 'c1' });
    expect(after[2]).not.toHaveProperty('taskId');
  });

  it('caps the streams and lets a task\'s stream expire', async () => {
    const prefix = `cap-${randomUUID().slice(0, 8)}`;
    const log = newLog(prefix, { maxLen: 10, taskMaxLen: 5, taskTtlMs: 60_000 });
    for (let i = 0; i < 400; i += 1) await log.record({ kind: 'reconciled', taskId: 'busy', message: `n${i}` });
    const redis = connect();
    // MAXLEN ~ trims whole stream nodes (100 entries by default): far below 400, never below the cap.
    const all = await redis.xlen(`${prefix}:events`);
    const task = await redis.xlen(`${prefix}:events:task:busy`);
    expect(all).toBeGreaterThanOrEqual(10);
    expect(all).toBeLessThan(400);
    expect(task).toBeGreaterThanOrEqual(5);
    expect(task).toBeLessThan(400);
    const ttl = await redis.pttl(`${prefix}:events:task:busy`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    expect((await log.forTask('busy', 1))[0]?.message).toBe('n399');
  });

  it('fans every event recorded by any process out to every subscriber', async () => {
    const prefix = `fan-${randomUUID().slice(0, 8)}`;
    const reader = newLog(prefix, { blockMs: 200 });
    const writer = newLog(prefix);
    const a: TaskEvent[] = [];
    const b: TaskEvent[] = [];
    await writer.record({ kind: 'task', taskId: 'old', message: 'before anyone listened' });
    const subA = reader.subscribe((e) => a.push(e));
    const subB = reader.subscribe((e) => b.push(e));
    await Promise.all([subA.ready, subB.ready]);
    const id = await writer.record({ kind: 'error', taskId: 't', service: 's', message: 'cannot read source' });
    await waitUntil(() => a.length === 1 && b.length === 1, { message: 'both subscribers got the event' });
    expect(a[0]).toMatchObject({ id, kind: 'error', taskId: 't', service: 's', message: 'cannot read source' });
    subB.unsubscribe();
    await writer.record({ kind: 'task', taskId: 't', message: 'second' });
    await waitUntil(() => a.length === 2, { message: 'the remaining subscriber got the second event' });
    expect(b).toHaveLength(1);
    // Idle reads time out and the loop goes on.
    const xreads = async () => Number(/cmdstat_xread:calls=(\d+)/.exec(await connect().info('commandstats'))?.[1] ?? 0);
    const before = await xreads();
    await waitUntil(async () => (await xreads()) >= before + 2, { message: 'two idle XREAD timeouts' });
    await writer.record({ kind: 'task', taskId: 't', message: 'third' });
    await waitUntil(() => a.length === 3, { message: 'events after idle block timeouts' });
  });

  it('closes at once while a read is blocked, and refuses subscriptions afterwards', async () => {
    const log = newLog(undefined, { blockMs: 60_000 });
    const sub = log.subscribe(() => undefined);
    await sub.ready;
    const started = Date.now();
    await log.close();
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(() => log.subscribe(() => undefined)).toThrow(/closed/);
  });

  it('never fails its caller when Redis does not take an event', async () => {
    const redis = connect();
    const log = new TaskEventLog({ redis, prefix: 'x', logger: silentLogger() });
    redis.disconnect();
    expect(await log.record({ kind: 'task', taskId: 't', message: 'm' })).toBeUndefined();
    await log.close();
  });
});

describe('stream ids and entries', () => {
  it('orders ids numerically and recognises them', () => {
    expect(compareIds('9-0', '10-0')).toBe(-1);
    expect(compareIds('10-2', '10-10')).toBe(-1);
    expect(compareIds('10-1', '10-1')).toBe(0);
    expect(compareIds('11-0', '10-99')).toBe(1);
    expect(isStreamId('1719830400123-0')).toBe(true);
    expect(isStreamId('abc')).toBe(false);
    expect(isStreamId('1-2-3')).toBe(false);
  });

  it('ignores entries that are not events', () => {
    expect(parseEntry('1-0', ['foo', 'bar'])).toBeUndefined();
    expect(parseEntry('1-0', ['kind', 'nonsense', 'message', 'm'])).toBeUndefined();
    expect(parseEntry('1000-0', ['kind', 'removed', 'message', 'gone', 'task', 't'])).toEqual({
      id: '1000-0',
      at: '1970-01-01T00:00:01.000Z',
      kind: 'removed',
      message: 'gone',
      taskId: 't',
    });
  });
});
