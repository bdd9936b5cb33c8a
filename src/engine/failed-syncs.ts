import type { Redis } from 'ioredis';
import { evalScript } from '../util/redis-script.js';
import { redisKeys } from '../util/redis-keys.js';

/** How long the records of a cluster nobody reaches again are kept (they are drained on recovery). */
const TTL_SECONDS = 7 * 86_400;

/**
 * Records one failure: KEYS failed set, down flag, index of clusters; ARGV service sync key,
 * cluster id, `1` when it raises the down flag, TTL (s).
 */
const NOTE = `
redis.call('SADD', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[4])
redis.call('SADD', KEYS[3], ARGV[2])
if ARGV[3] == '1' then redis.call('SET', KEYS[2], '1', 'EX', ARGV[4]) end
return 1
`;

/**
 * Takes the failed service syncs of a cluster whose down flag is set, clearing both: KEYS failed
 * set, down flag, index; ARGV cluster id. Answers the keys, none when the flag was not set (another
 * process drained it first, or only recoveries failed since).
 */
const DRAIN = `
if redis.call('DEL', KEYS[2]) == 0 then return {} end
local keys = redis.call('SMEMBERS', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[3], ARGV[1])
return keys
`;

/**
 * One probe period of a cluster: KEYS failed set, down flag, probe lock, index; ARGV cluster id,
 * period (ms). Answers `{}` when the cluster is not down (forgetting it in the index when nothing
 * waits), `{'down'}` when it is and another process probes it this period, `{'down', key}` when
 * this process probes it now with that failed service sync.
 */
const PROBE = `
if redis.call('EXISTS', KEYS[2]) == 0 then
  if redis.call('SCARD', KEYS[1]) == 0 then redis.call('SREM', KEYS[4], ARGV[1]) end
  return {}
end
if not redis.call('SET', KEYS[3], '1', 'NX', 'PX', ARGV[2]) then return {'down'} end
local pick = redis.call('SRANDMEMBER', KEYS[1])
if not pick then return {'down'} end
return {'down', pick}
`;

/** What one probe period found of a cluster (see {@link FailedSyncs.probe}). */
export interface ProbeResult {
  down: boolean;
  /** The failed service sync to reconcile now, when this process probes the cluster this period. */
  probe?: string | undefined;
}

/**
 * The service syncs whose reconcile could not reach a cluster, in Redis, so that any process may
 * run them again once the cluster answers, whichever process failed them (see `ClusterRecovery`):
 *
 * - `<p>:failed-syncs:<cluster>` (set): service sync keys whose reconcile could not reach the cluster
 *   and that were not run again since;
 * - `<p>:cluster-down:<cluster>` (string): set by a failure of a reconcile that was not itself a
 *   recovery, cleared by the drain: only then does reaching the cluster count as its recovery, so a
 *   service sync that fails whatever happens is run again once per failure of its own, never in a loop;
 * - `<p>:failed-clusters` (set): the clusters with such records, which every worker probes;
 * - `<p>:recovery-probe:<cluster>` (string, one period): the process that probes the cluster now.
 *
 * Records live a week unless drained (a cluster nobody uses any more).
 */
export class FailedSyncs {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  /** Records that `key` could not reach `cluster`; `down` raises the cluster's down flag. */
  async note(cluster: string, key: string, down: boolean): Promise<void> {
    const p = this.prefix;
    await evalScript(this.redis, NOTE, 3, redisKeys.failedSyncs(p, cluster), redisKeys.clusterDown(p, cluster), redisKeys.failedClusters(p), key, cluster, down ? '1' : '0', TTL_SECONDS);
  }

  /** Takes every failed service sync of `cluster` when its down flag is set (see {@link DRAIN}); none otherwise. */
  async drain(cluster: string): Promise<string[]> {
    const p = this.prefix;
    const keys = await evalScript(this.redis, DRAIN, 3, redisKeys.failedSyncs(p, cluster), redisKeys.clusterDown(p, cluster), redisKeys.failedClusters(p), cluster);
    return Array.isArray(keys) ? keys.map(String) : [];
  }

  /** The clusters with failed service syncs. */
  async clusters(): Promise<string[]> {
    return this.redis.smembers(redisKeys.failedClusters(this.prefix));
  }

  /** One probe period of `cluster` (see {@link PROBE}): whether it is down, and what to probe it with here. */
  async probe(cluster: string, periodMs: number): Promise<ProbeResult> {
    const p = this.prefix;
    const reply = await evalScript(
      this.redis,
      PROBE,
      4,
      redisKeys.failedSyncs(p, cluster),
      redisKeys.clusterDown(p, cluster),
      redisKeys.recoveryProbe(p, cluster),
      redisKeys.failedClusters(p),
      cluster,
      Math.max(1, Math.round(periodMs)),
    );
    const parts = Array.isArray(reply) ? reply.map(String) : [];
    return { down: parts[0] === 'down', probe: parts[1] };
  }

  /** Forgets `key` in every cluster's records (its task no longer runs: there is nothing to run again). */
  async forget(key: string): Promise<void> {
    const clusters = await this.clusters();
    if (clusters.length === 0) return;
    const multi = this.redis.multi();
    for (const cluster of clusters) multi.srem(redisKeys.failedSyncs(this.prefix, cluster), key);
    await multi.exec();
  }
}
