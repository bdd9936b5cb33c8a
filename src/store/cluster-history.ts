import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { evalScript } from '../util/redis-script.js';
import { redisKeys } from '../util/redis-keys.js';

/** One minute of a cluster's failed registry requests, across every process of the deployment. */
export interface ClusterErrorBucket {
  /** ISO-8601 start of the minute. */
  at: string;
  /** Failed requests in the minute (the sum of {@link byCode}). */
  errors: number;
  /** The failures by the adapter's error code; codes beyond the cap count under {@link OTHER_CODE}. */
  byCode: Record<string, number>;
}

/** Width of one bucket. */
export const CLUSTER_HISTORY_BUCKET_MS = 60_000;
/** Buckets read back: the last hour. */
export const CLUSTER_HISTORY_BUCKETS = 60;
/** Distinct codes kept per cluster and minute; the others are counted under {@link OTHER_CODE}. */
export const CLUSTER_HISTORY_CODES = 16;
/** Where the codes beyond {@link CLUSTER_HISTORY_CODES} are counted. */
export const OTHER_CODE = 'other';
/** A bucket's key expires this long after the minute ended: the hour it is shown, and a margin for clock skew. */
export const CLUSTER_HISTORY_TTL_MS = (CLUSTER_HISTORY_BUCKETS + 2) * CLUSTER_HISTORY_BUCKET_MS;
/** Default time between two flushes of a process's counts to Redis. */
export const DEFAULT_CLUSTER_HISTORY_FLUSH_MS = 5_000;

/**
 * Adds a process's counts to one bucket hash, keeping at most ARGV[1] codes besides `other`.
 * KEYS: the bucket. ARGV: the cap, the expiry (unix ms), `other`, then code/count pairs.
 */
const ADD_COUNTS = `
local cap = tonumber(ARGV[1])
local other = ARGV[3]
for i = 4, #ARGV, 2 do
  local field = ARGV[i]
  if field ~= other and redis.call('HEXISTS', KEYS[1], field) == 0 then
    local codes = redis.call('HLEN', KEYS[1]) - redis.call('HEXISTS', KEYS[1], other)
    if codes >= cap then field = other end
  end
  redis.call('HINCRBY', KEYS[1], field, ARGV[i + 1])
end
redis.call('PEXPIREAT', KEYS[1], ARGV[2])
return 1
`;

/** Counts of one process not yet in Redis: minute -> cluster -> code -> count. */
type Pending = Map<number, Map<string, Map<string, number>>>;

/**
 * Failed registry requests per cluster and minute, kept in Redis so that the API shows what every
 * process saw and a restart loses at most one flush period: `<p>:cluster-errors:<cluster>:<minute>`,
 * a hash of error code -> count.
 *
 * {@link count} only adds to a map in memory (a request never waits for Redis); {@link start}
 * flushes it on a timer, each bucket with one `HINCRBY` per code in Lua, so any number of processes
 * add to the same minute. Bounded whatever the number of processes or codes: one hash per cluster
 * and minute of at most {@link CLUSTER_HISTORY_CODES} codes plus {@link OTHER_CODE}, expiring
 * {@link CLUSTER_HISTORY_TTL_MS} after its minute. A flush that fails is logged and its counts
 * are kept for the next one; counts whose minute left the hour before Redis took them are dropped
 * (logged with their number). A reply lost after Redis applied a bucket may count it twice: the
 * history illustrates, nothing acts on it.
 *
 * Deliberately left out: successful requests (no adapter counts them) and per-task attribution
 * (the task event log says which task failed).
 */
export class ClusterErrorHistory {
  private pending: Pending = new Map();

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly clock: () => number = Date.now,
  ) {}

  /** A request to `clusterId` failed with `code`: counted in memory for the next flush. Never throws, never waits. */
  count(clusterId: string, code: string): void {
    const minute = Math.floor(this.clock() / CLUSTER_HISTORY_BUCKET_MS);
    addTo(this.pending, minute, clusterId, code, 1);
  }

  /**
   * Adds the counts taken so far to Redis. Buckets that failed stay pending (added to what came
   * since); buckets older than the hour are dropped. Answers how many buckets were written.
   */
  async flush(logger?: Logger): Promise<number> {
    const taken = this.pending;
    this.pending = new Map();
    const oldest = Math.floor(this.clock() / CLUSTER_HISTORY_BUCKET_MS) - CLUSTER_HISTORY_BUCKETS + 1;
    let dropped = 0;
    const writes: Array<Promise<boolean>> = [];
    for (const [minute, clusters] of taken) {
      for (const [clusterId, codes] of clusters) {
        if (minute < oldest) {
          for (const n of codes.values()) dropped += n;
          continue;
        }
        writes.push(
          this.write(clusterId, minute, codes).then(
            () => true,
            (err: unknown) => {
              for (const [code, n] of codes) addTo(this.pending, minute, clusterId, code, n);
              logger?.warn({ err, cluster: clusterId }, 'recording the cluster request errors failed; kept for the next flush');
              return false;
            },
          ),
        );
      }
    }
    if (dropped > 0) logger?.warn({ dropped }, 'cluster request errors older than the history were never recorded; dropped');
    return (await Promise.all(writes)).filter(Boolean).length;
  }

  /**
   * The cluster's last hour before `now`, one bucket per minute, oldest first, zeros included (so
   * a chart has its whole axis); a bucket's unreadable counts are left out.
   */
  async read(clusterId: string, now: number = this.clock()): Promise<ClusterErrorBucket[]> {
    const last = Math.floor(now / CLUSTER_HISTORY_BUCKET_MS);
    const minutes = Array.from({ length: CLUSTER_HISTORY_BUCKETS }, (_, i) => last - CLUSTER_HISTORY_BUCKETS + 1 + i);
    const pipeline = this.redis.pipeline();
    for (const minute of minutes) pipeline.hgetall(redisKeys.clusterErrors(this.prefix, clusterId, minute));
    const replies = (await pipeline.exec()) ?? [];
    return minutes.map((minute, i) => {
      const [err, raw] = replies[i] ?? [null, {}];
      if (err) throw err;
      const byCode: Record<string, number> = {};
      let errors = 0;
      for (const [code, value] of Object.entries((raw ?? {}) as Record<string, string>)) {
        const n = Number(value);
        if (!Number.isSafeInteger(n) || n <= 0) continue;
        byCode[code] = n;
        errors += n;
      }
      return { at: new Date(minute * CLUSTER_HISTORY_BUCKET_MS).toISOString(), errors, byCode };
    });
  }

  /**
   * Flushes every `periodMs` until stopped (the returned function, which flushes once more). The
   * timer is unref'd: it never keeps the process alive; a flush still running skips the next tick.
   */
  start(logger: Logger, periodMs = DEFAULT_CLUSTER_HISTORY_FLUSH_MS): () => Promise<void> {
    let running: Promise<unknown> | undefined;
    const tick = (): Promise<unknown> => {
      if (running) return running;
      running = this.flush(logger)
        .catch((err: unknown) => logger.warn({ err }, 'recording the cluster request errors failed'))
        .finally(() => {
          running = undefined;
        });
      return running;
    };
    const timer = setInterval(() => void tick(), periodMs);
    timer.unref();
    return async () => {
      clearInterval(timer);
      await running;
      await tick();
    };
  }

  private async write(clusterId: string, minute: number, codes: Map<string, number>): Promise<void> {
    const expireAt = (minute + 1) * CLUSTER_HISTORY_BUCKET_MS + CLUSTER_HISTORY_TTL_MS;
    const pairs = [...codes].flatMap(([code, n]) => [code, n]);
    await evalScript(this.redis, ADD_COUNTS, 1, redisKeys.clusterErrors(this.prefix, clusterId, minute), CLUSTER_HISTORY_CODES, expireAt, OTHER_CODE, ...pairs);
  }
}

/** Adds `n` to a pending count, folding codes beyond the cap into {@link OTHER_CODE} (the process's memory is bounded too). */
function addTo(pending: Pending, minute: number, clusterId: string, code: string, n: number): void {
  let clusters = pending.get(minute);
  if (!clusters) pending.set(minute, (clusters = new Map()));
  let codes = clusters.get(clusterId);
  if (!codes) clusters.set(clusterId, (codes = new Map()));
  const field = codes.has(code) || code === OTHER_CODE || codes.size - (codes.has(OTHER_CODE) ? 1 : 0) < CLUSTER_HISTORY_CODES ? code : OTHER_CODE;
  codes.set(field, (codes.get(field) ?? 0) + n);
}
