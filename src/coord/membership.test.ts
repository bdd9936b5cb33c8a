import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import { beforeEach, describe, expect, it } from 'vitest';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { defaultWorkerId, Membership, type MembershipOptions } from './index.js';

const members: Membership[] = [];
let redis: Redis;
let prefix: string;
const redisServer = redisPerTest({}, () => {
  for (const m of members.splice(0)) m.halt();
});
const connect = (): Redis => redisServer.connect();

beforeEach(() => {
  redis = redisServer.redis;
  prefix = redisServer.prefix;
});

function member(id: string, extra: Partial<MembershipOptions> = {}): Membership {
  const m = new Membership({ redis: connect(), subscriber: connect(), prefix, id, ttlMs: 900, ...extra });
  members.push(m);
  return m;
}

/** Every id list a membership emits with `change`, in order. */
function changes(m: Membership): string[][] {
  const seen: string[][] = [];
  m.on('change', (ids) => seen.push(ids));
  return seen;
}

describe('Membership', () => {
  it('registers the worker with its record and a score in the worker set', async () => {
    const a = member('a', { capacity: 4, roles: ['sync', 'api'] });
    const seen = changes(a);
    await a.join();
    expect(a.liveIds()).toEqual(['a']);
    expect(seen).toEqual([['a']]);
    expect(await a.list()).toEqual([
      { id: 'a', host: hostname(), pid: process.pid, startedAt: a.info.startedAt, capacity: 4, roles: ['sync', 'api'] },
    ]);
    expect(await redis.zscore(`${prefix}:workers`, 'a')).not.toBeNull();
    expect(await redis.pttl(`${prefix}:worker:a`)).toBeGreaterThan(0);
  });

  it('tells the others about a join and a leave, and leave removes the worker at once', async () => {
    const a = member('a');
    const seen = changes(a);
    await a.join();
    const b = member('b');
    await b.join();
    expect(b.liveIds()).toEqual(['a', 'b']);
    await waitUntil(() => a.liveIds().length === 2, { message: 'a to see b' });
    await b.leave();
    expect(await redis.zscore(`${prefix}:workers`, 'b')).toBeNull();
    expect(await redis.exists(`${prefix}:worker:b`)).toBe(0);
    expect((await a.list()).map((w) => w.id)).toEqual(['a']);
    await waitUntil(() => a.liveIds().length === 1, { message: 'a to see b leave' });
    expect(seen).toEqual([['a'], ['a', 'b'], ['a']]);
  });

  it('drops a worker that stops its heartbeat once its TTL runs out, and keeps the live one', async () => {
    const a = member('a');
    const b = member('b');
    await a.join();
    await b.join();
    await waitUntil(() => a.liveIds().length === 2, { message: 'a to see b' });
    b.halt();
    expect(await redis.zscore(`${prefix}:workers`, 'b')).not.toBeNull();
    await waitUntil(() => a.liveIds().join() === 'a', { message: 'b to expire' });
    expect(await redis.zscore(`${prefix}:workers`, 'b')).toBeNull();
    expect(await a.refresh()).toEqual(['a']);
  });

  it('registers again after its entry was removed behind its back', async () => {
    const a = member('a');
    await a.join();
    await redis.zrem(`${prefix}:workers`, 'a');
    await waitUntil(async () => (await redis.zscore(`${prefix}:workers`, 'a')) !== null, { message: 'a to come back' });
    await waitUntil(() => a.liveIds().join() === 'a', { message: 'a to see itself' });
  });

  it('owns and closes a subscriber it duplicated itself', async () => {
    const a = new Membership({ redis: connect(), prefix, ttlMs: 900 });
    members.push(a);
    await a.join();
    expect(a.id).toMatch(new RegExp(`^${hostname()}-${process.pid}-[0-9a-f]{6}$`));
    await a.leave();
    expect(await redis.zcard(`${prefix}:workers`)).toBe(0);
    expect(defaultWorkerId()).not.toBe(a.id);
  });
});
