import { beforeEach, describe, expect, it } from 'vitest';
import type { TaskSpec } from '../model/index.js';
import type { ServiceStatus } from '../model/service-status.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { RegsyncStore } from './regsync-store.js';
import { HISTORY_SAMPLES, HISTORY_TTL_MS, TaskHistory, sampleOf } from './task-history.js';
import { redisKeys } from '../util/redis-keys.js';

const redisServer = redisPerTest();
const PERIOD = 30_000;
let store: RegsyncStore;

function task(id: string, state: TaskSpec['state'] = 'running'): TaskSpec {
  return { id, source: 'a', destination: 'b', service: '*', group: 'DEFAULT_GROUP', namespace: 'public', options: {}, state, createdAt: new Date(0).toISOString() } as TaskSpec;
}

function status(name: string, copies: number, lagMs: number | null, extra: Partial<ServiceStatus> = {}): ServiceStatus {
  return { service: { namespace: 'public', group: 'DEFAULT_GROUP', name }, sourceInstances: copies, destinationInstances: copies, lastSyncAt: null, lagMs, lastError: null, ...extra };
}

const at = (period: number) => new Date(period * PERIOD + 1_000);

beforeEach(() => {
  store = new RegsyncStore(redisServer.redis, redisServer.prefix);
});

describe('sampleOf', () => {
  it('sums the copies, takes the largest known lag and counts failing and held services', () => {
    const sample = sampleOf(
      [
        status('a', 3, 120),
        status('b', 2, null, { lastError: 'destination refused' }),
        status('c', 4, 900, { held: { removes: 4, copies: 4, since: new Date(0).toISOString(), confirm: 'operator' } }),
      ],
      new Date(5_000),
    );
    expect(sample).toEqual({ at: new Date(5_000).toISOString(), copies: 9, maxLagMs: 900, failing: 1, held: 1 });
    expect(sampleOf([status('a', 1, null)], new Date(0)).maxLagMs).toBeNull();
    expect(sampleOf([], new Date(0))).toMatchObject({ copies: 0, maxLagMs: null, failing: 0, held: 0 });
  });
});

describe('TaskHistory', () => {
  it('samples each running task once per period, oldest first, and skips paused tasks', async () => {
    await store.createTask(task('orders'));
    await store.createTask(task('idle', 'paused'));
    await store.putServiceStatus('orders', status('orders', 2, 50));
    await store.putServiceStatus('idle', status('idle', 7, 1));
    const history = new TaskHistory(redisServer.redis, redisServer.prefix, PERIOD);

    expect(await history.recordPeriod(store, at(1))).toBe(true);
    expect(await history.recordPeriod(store, new Date(at(1).getTime() + 5_000))).toBe(false);
    await store.putServiceStatus('orders', status('orders', 5, 80));
    expect(await history.recordPeriod(store, at(2))).toBe(true);

    expect(await history.read('orders')).toEqual([
      { at: at(1).toISOString(), copies: 2, maxLagMs: 50, failing: 0, held: 0 },
      { at: at(2).toISOString(), copies: 5, maxLagMs: 80, failing: 0, held: 0 },
    ]);
    expect(await history.read('idle')).toEqual([]);
    expect(await history.read('unknown')).toEqual([]);
  });

  it('writes one sample per period when two recorders race for it', async () => {
    await store.createTask(task('orders'));
    await store.putServiceStatus('orders', status('orders', 1, 10));
    const one = new TaskHistory(redisServer.redis, redisServer.prefix, PERIOD);
    const two = new TaskHistory(redisServer.connect(), redisServer.prefix, PERIOD);
    const storeTwo = new RegsyncStore(redisServer.connect(), redisServer.prefix);
    for (let period = 1; period <= 5; period += 1) {
      const won = await Promise.all([one.recordPeriod(store, at(period)), two.recordPeriod(storeTwo, at(period))]);
      expect(won.filter(Boolean)).toHaveLength(1);
    }
    // A recorder whose clock is behind cannot add a sample for a period already recorded.
    expect(await two.recordPeriod(storeTwo, at(3))).toBe(false);
    const samples = await one.read('orders');
    expect(samples.map((s) => s.at)).toEqual([1, 2, 3, 4, 5].map((p) => at(p).toISOString()));
  });

  it('keeps the last hour only, and lets the history expire', async () => {
    await store.createTask(task('orders'));
    const history = new TaskHistory(redisServer.redis, redisServer.prefix, PERIOD);
    for (let period = 1; period <= HISTORY_SAMPLES + 15; period += 1) {
      await store.putServiceStatus('orders', status('orders', period, null));
      await history.recordPeriod(store, at(period));
    }
    const samples = await history.read('orders');
    expect(samples).toHaveLength(HISTORY_SAMPLES);
    expect(samples[0]?.copies).toBe(16);
    expect(samples.at(-1)?.copies).toBe(HISTORY_SAMPLES + 15);
    const ttl = await redisServer.redis.pttl(redisKeys.taskHistory(redisServer.prefix, 'orders'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(HISTORY_TTL_MS);
  });

  it('skips an item that is not a sample', async () => {
    const key = redisKeys.taskHistory(redisServer.prefix, 'orders');
    await redisServer.redis.rpush(key, 'not json', '{"at":"2026-01-01T00:00:00.000Z","copies":3,"maxLagMs":null,"failing":0,"held":0}', '[1]');
    const history = new TaskHistory(redisServer.redis, redisServer.prefix, PERIOD);
    expect(await history.read('orders')).toEqual([{ at: '2026-01-01T00:00:00.000Z', copies: 3, maxLagMs: null, failing: 0, held: 0 }]);
  });
});
