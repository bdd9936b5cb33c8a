import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { beforeEach, describe, expect, it } from 'vitest';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { acquireLease, LeaseManager, readLease, releaseLease, renewLease } from './index.js';

const managers: LeaseManager[] = [];
let redis: Redis;
let prefix: string;
const redisServer = redisPerTest({}, () => {
  for (const m of managers.splice(0)) m.halt();
});
const connect = (): Redis => redisServer.connect();

beforeEach(() => {
  redis = redisServer.redis;
  prefix = redisServer.prefix;
});

function redisMs([seconds, micros]: [string, string] | [number, number] | unknown[]): number {
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

function manager(owner: string, ttlMs = 1000, safetyMarginMs?: number, graceMs?: number): LeaseManager {
  const m = new LeaseManager({ redis: connect(), prefix, owner, ttlMs, safetyMarginMs, graceMs });
  managers.push(m);
  return m;
}

describe('lease functions', () => {
  it('acquire takes a free lease with a growing token; renew and release need owner and token', async () => {
    const t1 = (await acquireLease(redis, prefix, 3, 'w1', 10_000))!;
    // The first token of a shard is the Redis time in ms.
    expect(Math.abs(t1 - Date.now())).toBeLessThan(60_000);
    expect(await acquireLease(redis, prefix, 3, 'w2', 10_000)).toBeUndefined();
    expect(await readLease(redis, prefix, 3)).toMatchObject({ owner: 'w1', token: t1 });
    expect(await redis.get(`${prefix}:lease:3`)).toBe(JSON.stringify({ owner: 'w1', token: t1 }));

    expect(await renewLease(redis, prefix, 3, 'w2', t1, 10_000)).toBe(false);
    expect(await renewLease(redis, prefix, 3, 'w1', t1 + 1, 10_000)).toBe(false);
    expect(await renewLease(redis, prefix, 3, 'w1', t1, 20_000)).toBe(true);
    expect((await readLease(redis, prefix, 3))?.ttlLeftMs).toBeGreaterThan(10_000);
    expect(await releaseLease(redis, prefix, 3, 'w2', t1)).toBe(false);
    expect(await releaseLease(redis, prefix, 3, 'w1', t1)).toBe(true);
    expect(await readLease(redis, prefix, 3)).toBeUndefined();

    expect(await acquireLease(redis, prefix, 3, 'w2', 10_000)).toBe(t1 + 1);
    expect((await readLease(redis, prefix, 3))?.token).toBe(t1 + 1);
  });

  it('records when each token was handed out, for the lease age', async () => {
    const before = redisMs(await redis.time());
    const t1 = (await acquireLease(redis, prefix, 4, 'w1', 10_000))!;
    const first = (await readLease(redis, prefix, 4))?.acquiredAtMs;
    expect(first).toBeGreaterThanOrEqual(before);
    expect(first).toBeLessThanOrEqual(redisMs(await redis.time()));
    // Renewals keep it; a new token gets a new one.
    expect(await renewLease(redis, prefix, 4, 'w1', t1, 10_000)).toBe(true);
    expect((await readLease(redis, prefix, 4))?.acquiredAtMs).toBe(first);
    await releaseLease(redis, prefix, 4, 'w1', t1);
    const mark = redisMs(await redis.time());
    await acquireLease(redis, prefix, 4, 'w2', 10_000);
    expect((await readLease(redis, prefix, 4))?.acquiredAtMs).toBeGreaterThanOrEqual(mark);
  });

  it('keeps tokens growing when Redis loses its data', async () => {
    const before = (await acquireLease(redis, prefix, 0, 'w1', 10_000))!;
    for (let i = 0; i < 5; i += 1) {
      await redis.del(`${prefix}:lease:0`);
      await acquireLease(redis, prefix, 0, 'w1', 10_000);
    }
    const last = (await readLease(redis, prefix, 0))!.token;
    expect(last).toBe(before + 5);
    await redis.flushall();
    await waitUntil(async () => redisMs(await redis.time()) > last, { message: 'the Redis clock to pass the last token' });
    expect(await acquireLease(redis, prefix, 0, 'w2', 10_000)).toBeGreaterThan(last);
  });

  it('keeps owner ids with quotes and backslashes intact', async () => {
    const owner = 'we"ird\\id';
    const token = await acquireLease(redis, prefix, 0, owner, 10_000);
    expect(await readLease(redis, prefix, 0)).toMatchObject({ owner, token });
    expect(await releaseLease(redis, prefix, 0, owner, token ?? 0)).toBe(true);
  });
});

describe('LeaseManager', () => {
  it('acquires, reports validity and releases at once', async () => {
    const a = manager('a');
    const b = manager('b');
    const token = (await a.acquire(0))!;
    expect(await a.acquire(0)).toBe(token);
    expect(await b.acquire(0)).toBeUndefined();
    expect(a.isValid(0)).toBe(true);
    expect(b.isValid(0)).toBe(false);
    expect(a.heldShards()).toEqual([0]);
    expect(await a.release(0)).toBe(true);
    expect(a.isValid(0)).toBe(false);
    expect(await a.read(0)).toBeUndefined();
    expect(await b.acquire(0)).toBe(token + 1);
  });

  it('renews a held lease so that it outlives its TTL', async () => {
    const a = manager('a', 300);
    const token = await a.acquire(0);
    const start = performance.now();
    await waitUntil(() => performance.now() - start > 1200, { message: 'four lease TTLs to pass' });
    expect(a.isValid(0)).toBe(true);
    expect(await a.read(0)).toMatchObject({ owner: 'a', token });
    expect(await manager('b', 300).acquire(0)).toBeUndefined();
  });

  it('emits lost at once when the lease turns out to be someone else\'s', async () => {
    const a = manager('a');
    const lost: [number, number][] = [];
    a.on('lost', (shard, token) => lost.push([shard, token]));
    const token = (await a.acquire(5))!;
    await redis.del(`${prefix}:lease:5`);
    expect(await manager('b').acquire(5)).toBe(token + 1);
    expect(await a.renew(5)).toBe(false);
    expect(lost).toEqual([[5, token]]);
    expect(a.isValid(5)).toBe(false);
    expect(a.heldShards()).toEqual([]);
  });

  it('turns invalid and emits lost by its local deadline while Redis does not answer, before the key expires', async () => {
    const a = manager('a', 1500, 900);
    const lost: { shard: number; at: number }[] = [];
    const token = await a.acquire(1);
    // Redis' absolute expiry of the key (Redis runs on this host, so its clock is ours).
    const expiresAt = Number(await redis.call('PEXPIRETIME', `${prefix}:lease:1`));
    a.on('lost', (shard) => lost.push({ shard, at: Date.now() }));
    // Every client's commands wait (the renewals too) while time runs.
    await redis.call('CLIENT', 'PAUSE', '2000', 'ALL');
    await waitUntil(() => lost.length > 0, { message: 'the lease to be lost by its deadline' });
    expect(lost.map((l) => l.shard)).toEqual([1]);
    expect(a.isValid(1)).toBe(false);
    expect(lost[0]?.at).toBeLessThan(expiresAt);
    expect(a.token(1)).toBeUndefined();
    expect(token).toBeDefined();
    await waitUntil(async () => (await readLease(redis, prefix, 1)) === undefined, { message: 'the lease key to go' });
  });

  it('halt stops renewing; the lease stays until the local deadline and the Redis TTL run out', async () => {
    const a = manager('a', 600);
    const b = manager('b', 600);
    const token = (await a.acquire(2))!;
    a.halt();
    expect(a.isValid(2)).toBe(true);
    await waitUntil(() => !a.isValid(2), { message: 'the local deadline' });
    await waitUntil(async () => (await b.acquire(2)) === token + 1, { message: 'b to take the lease' });
  });

  it('takes back its lease when the key is gone and no later token was handed out; not once one was', async () => {
    const a = manager('a');
    const lost: number[] = [];
    a.on('lost', (shard) => lost.push(shard));
    const token = (await a.acquire(6))!;
    // The key ran out while Redis did not answer, or a failover lost it.
    await redis.del(`${prefix}:lease:6`);
    expect(await a.renew(6)).toBe(true);
    expect(await readLease(redis, prefix, 6)).toMatchObject({ owner: 'a', token });
    // The token counter was lost too: taken back, and the counter starts again past the token.
    await redis.del(`${prefix}:lease:6`, `${prefix}:lease-token:6`);
    expect(await a.renew(6)).toBe(true);
    expect(await manager('b').acquire(7)).toBeDefined();
    await a.release(6);
    expect(await manager('b').acquire(6)).toBe(token + 1);
    expect(lost).toEqual([]);
  });

  it('keeps a lease for keep-alive through its grace while Redis does not answer, and goes on when it answers again', async () => {
    const a = manager('a', 300, undefined, 5_000);
    const lost: number[] = [];
    a.on('lost', (shard) => lost.push(shard));
    const token = (await a.acquire(8))!;
    await redis.call('CLIENT', 'PAUSE', '1000', 'ALL');
    await waitUntil(() => !a.isValid(8), { message: 'the local deadline to pass' });
    // Past the deadline: no longer valid for writes, still kept alive.
    expect(a.keepsAlive(8)).toBe(true);
    expect(lost).toEqual([]);
    await waitUntil(() => a.isValid(8), { timeoutMs: 5_000, message: 'a renewal once Redis answers' });
    expect(lost).toEqual([]);
    expect(await a.read(8)).toMatchObject({ owner: 'a', token });
    expect(a.keepsAlive(8)).toBe(true);
  });

  it('loses the lease at the end of the grace when Redis stays silent, and at once when it answers "not yours"', async () => {
    const a = manager('a', 300, undefined, 600);
    const lost: number[] = [];
    a.on('lost', (shard) => lost.push(shard));
    await a.acquire(9);
    await redis.call('CLIENT', 'PAUSE', '3000', 'ALL');
    await waitUntil(() => !a.isValid(9), { message: 'the local deadline to pass' });
    expect(a.keepsAlive(9)).toBe(true);
    expect(lost).toEqual([]);
    await waitUntil(() => lost.length > 0, { timeoutMs: 5_000, message: 'the lease lost by the end of its grace' });
    expect(lost).toEqual([9]);
    expect(a.keepsAlive(9)).toBe(false);
    expect(a.heldShards()).toEqual([]);
    await redis.call('CLIENT', 'UNPAUSE');

    const b = manager('b', 300, undefined, 60_000);
    const bLost: number[] = [];
    b.on('lost', (shard) => bLost.push(shard));
    await b.acquire(10);
    await redis.del(`${prefix}:lease:10`);
    await manager('c').acquire(10);
    expect(await b.renew(10)).toBe(false);
    expect(bLost).toEqual([10]);
    expect(b.keepsAlive(10)).toBe(false);
  });

  it('rejects a TTL or margin that cannot work', () => {
    expect(() => manager('a', 10)).toThrow(RangeError);
    expect(() => manager('a', 900, 600)).toThrow(RangeError);
  });
});
