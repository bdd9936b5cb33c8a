import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { redisKeys } from '../util/redis-keys.js';
import { CLUSTER_HISTORY_BUCKETS, CLUSTER_HISTORY_CODES, CLUSTER_HISTORY_TTL_MS, ClusterErrorHistory, OTHER_CODE } from './cluster-history.js';

const redisServer = redisPerTest();
const MINUTE = 60_000;

/** A clock the test moves; it starts at the current minute (the keys' expiry is absolute time). */
function clock(start = Math.floor(Date.now() / MINUTE) * MINUTE + 1_000): { now: () => number; set(ms: number): void } {
  let t = start;
  return { now: () => t, set: (ms) => (t = ms) };
}

describe('ClusterErrorHistory', () => {
  it('adds the counts of two processes to the same minute, per cluster and code', async () => {
    const time = clock();
    const a = new ClusterErrorHistory(redisServer.redis, redisServer.prefix, time.now);
    const b = new ClusterErrorHistory(redisServer.connect(), redisServer.prefix, time.now);
    a.count('shanghai', 'nacos-unreachable');
    a.count('shanghai', 'nacos-unreachable');
    b.count('shanghai', 'nacos-unreachable');
    b.count('shanghai', 'nacos-timeout');
    b.count('beijing', 'ZK_CONNECTION_LOSS');
    expect(await a.flush()).toBe(1);
    expect(await b.flush()).toBe(2);
    // Nothing is pending any more: a second flush writes nothing.
    expect(await a.flush()).toBe(0);

    const shanghai = await a.read('shanghai');
    expect(shanghai).toHaveLength(CLUSTER_HISTORY_BUCKETS);
    expect(shanghai.at(-1)).toEqual({ at: new Date(Math.floor(time.now() / MINUTE) * MINUTE).toISOString(), errors: 4, byCode: { 'nacos-unreachable': 3, 'nacos-timeout': 1 } });
    expect(shanghai.slice(0, -1).every((bucket) => bucket.errors === 0 && Object.keys(bucket.byCode).length === 0)).toBe(true);
    expect((await b.read('beijing')).at(-1)).toMatchObject({ errors: 1, byCode: { ZK_CONNECTION_LOSS: 1 } });
    expect((await b.read('hangzhou')).every((bucket) => bucket.errors === 0)).toBe(true);
  });

  it('puts each minute in its own bucket, oldest first, and reads only the last hour', async () => {
    const time = clock();
    const start = time.now();
    const history = new ClusterErrorHistory(redisServer.redis, redisServer.prefix, time.now);
    history.count('shanghai', 'nacos-unreachable');
    time.set(start + 2 * MINUTE);
    history.count('shanghai', 'nacos-unreachable');
    history.count('shanghai', 'nacos-unreachable');
    await history.flush();

    const buckets = await history.read('shanghai');
    expect(buckets.slice(-3).map((b) => b.errors)).toEqual([1, 0, 2]);
    const times = buckets.map((b) => Date.parse(b.at));
    expect(times.every((t, i) => i === 0 || t - (times[i - 1] as number) === MINUTE)).toBe(true);
    // An hour later the first minute has left the window; the third is still in it.
    const later = await history.read('shanghai', start + CLUSTER_HISTORY_BUCKETS * MINUTE);
    expect(later.reduce((n, b) => n + b.errors, 0)).toBe(2);
  });

  it('keeps at most the capped number of codes per bucket, whatever the number of processes', async () => {
    const time = clock();
    const processes = [0, 1, 2].map(() => new ClusterErrorHistory(redisServer.connect(), redisServer.prefix, time.now));
    // Each process sees more codes than the cap, the three together three times as many.
    processes.forEach((p, i) => {
      for (let c = 0; c < CLUSTER_HISTORY_CODES + 4; c += 1) p.count('shanghai', `code-${i}-${c}`);
    });
    for (const p of processes) await p.flush();
    const key = redisKeys.clusterErrors(redisServer.prefix, 'shanghai', Math.floor(time.now() / MINUTE));
    expect(await redisServer.redis.hlen(key)).toBe(CLUSTER_HISTORY_CODES + 1);
    const bucket = (await processes[0]?.read('shanghai'))?.at(-1);
    // No failure is lost: the ones beyond the cap count under `other`.
    expect(bucket?.errors).toBe(3 * (CLUSTER_HISTORY_CODES + 4));
    expect(bucket?.byCode[OTHER_CODE]).toBe(3 * (CLUSTER_HISTORY_CODES + 4) - CLUSTER_HISTORY_CODES);
  });

  it('lets a bucket expire an hour after its minute', async () => {
    const time = clock();
    const history = new ClusterErrorHistory(redisServer.redis, redisServer.prefix, time.now);
    history.count('shanghai', 'nacos-unreachable');
    await history.flush();
    const key = redisKeys.clusterErrors(redisServer.prefix, 'shanghai', Math.floor(time.now() / MINUTE));
    const ttl = await redisServer.redis.pttl(key);
    expect(ttl).toBeGreaterThan(CLUSTER_HISTORY_BUCKETS * MINUTE);
    expect(ttl).toBeLessThanOrEqual(MINUTE + CLUSTER_HISTORY_TTL_MS);

    // A process whose clock is two hours behind writes a bucket that is already past its expiry.
    const behind = clock(time.now() - 2 * CLUSTER_HISTORY_BUCKETS * MINUTE);
    const old = new ClusterErrorHistory(redisServer.redis, redisServer.prefix, behind.now);
    old.count('shanghai', 'nacos-unreachable');
    expect(await old.flush()).toBe(1);
    expect(await redisServer.redis.exists(redisKeys.clusterErrors(redisServer.prefix, 'shanghai', Math.floor(behind.now() / MINUTE)))).toBe(0);
  });

  it('keeps the counts of a failed flush for the next one, and drops those the hour left behind', async () => {
    const time = clock();
    const start = time.now();
    const broken = redisServer.connect();
    const history = new ClusterErrorHistory(broken, redisServer.prefix, time.now);
    history.count('shanghai', 'nacos-unreachable');
    broken.disconnect();
    expect(await history.flush(silentLogger())).toBe(0);

    // Redis answers again: the counts taken before and after the failure both arrive.
    await broken.connect();
    history.count('shanghai', 'nacos-unreachable');
    expect(await history.flush()).toBe(1);
    expect((await history.read('shanghai')).at(-1)?.errors).toBe(2);

    // Counts whose minute left the hour before they could be written are dropped.
    history.count('beijing', 'nacos-timeout');
    time.set(start + CLUSTER_HISTORY_BUCKETS * MINUTE);
    expect(await history.flush()).toBe(0);
    expect((await history.read('beijing', start)).every((b) => b.errors === 0)).toBe(true);
  });

  it('flushes on its timer, and once more when stopped', async () => {
    const history = new ClusterErrorHistory(redisServer.redis, redisServer.prefix);
    const errorsOf = async () => (await history.read('shanghai')).reduce((n, b) => n + b.errors, 0);
    const stop = history.start(silentLogger(), 20);
    history.count('shanghai', 'nacos-unreachable');
    await waitUntil(async () => (await errorsOf()) === 1, { message: 'the timer flushed' });
    await stop();

    // Stopped long before its first tick: the stop writes what was counted.
    const last = new ClusterErrorHistory(redisServer.redis, redisServer.prefix);
    const stopLast = last.start(silentLogger(), 3_600_000);
    last.count('shanghai', 'nacos-timeout');
    await stopLast();
    expect(await errorsOf()).toBe(2);
  });
});
