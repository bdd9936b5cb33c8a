import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ServiceStatus } from '../model/service-status.js';
import { evalScript } from '../util/redis-script.js';
import { redisKeys } from '../util/redis-keys.js';
import type { RegsyncStore } from './regsync-store.js';

/** One sample of a task: what its service statuses said at `at`. */
export interface HistorySample {
  /** ISO-8601 time the sample was taken. */
  at: string;
  /** Copies in the destination: the sum of `destinationInstances` over the task's services. */
  copies: number;
  /** The largest `lagMs` of the task's services; null when none knows its lag. */
  maxLagMs: number | null;
  /** Services whose last reconcile reported a problem. */
  failing: number;
  /** Services holding a mass deletion. */
  held: number;
}

/** Default time between two samples. */
export const DEFAULT_HISTORY_PERIOD_MS = 30_000;
/** Samples kept per task: an hour at the default period. */
export const HISTORY_SAMPLES = 120;
/** A task's history expires this long after its last sample (so a deleted task's history goes). */
export const HISTORY_TTL_MS = 2 * 60 * 60 * 1000;

/**
 * Claims period ARGV[1] for the caller when no process recorded it (or a later one) yet.
 * KEYS: the last recorded period. ARGV: the period, its expiry (ms). Returns 1 when claimed.
 */
const CLAIM_PERIOD = `
local last = tonumber(redis.call('GET', KEYS[1]))
if last and last >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`;

/** The sample of one task's service statuses. Pure. */
export function sampleOf(statuses: readonly ServiceStatus[], at: Date): HistorySample {
  let copies = 0;
  let maxLagMs: number | null = null;
  let failing = 0;
  let held = 0;
  for (const s of statuses) {
    copies += s.destinationInstances;
    if (s.lagMs !== null && (maxLagMs === null || s.lagMs > maxLagMs)) maxLagMs = s.lagMs;
    if (s.lastError !== null) failing += 1;
    if (s.held) held += 1;
  }
  return { at: at.toISOString(), copies, maxLagMs, failing, held };
}

/**
 * A bounded history per task in Redis, `<p>:history:<task>`: a list of JSON {@link HistorySample},
 * oldest first, capped at {@link HISTORY_SAMPLES} and expiring {@link HISTORY_TTL_MS} after its
 * last sample, so its size never depends on how long a task runs and a deleted task's history
 * goes by itself.
 *
 * Several processes may record: {@link recordPeriod} claims each period once in Redis
 * (`<p>:history-period`, compare-and-set in Lua), so a period gets one sample per task whoever
 * records it. Deliberately left out: per-service history (the size would follow the service
 * count) and events (the task event log keeps them).
 */
export class TaskHistory {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly periodMs = DEFAULT_HISTORY_PERIOD_MS,
  ) {}

  /**
   * A task's samples, oldest first; empty for a task never sampled (or whose history expired). An
   * item that is not a sample is skipped: the history only illustrates, nothing acts on it.
   */
  async read(taskId: string): Promise<HistorySample[]> {
    const raw = await this.redis.lrange(redisKeys.taskHistory(this.prefix, taskId), 0, -1);
    const samples: HistorySample[] = [];
    for (const item of raw) {
      const sample = parseSample(item);
      if (sample) samples.push(sample);
    }
    return samples;
  }

  /** Appends one sample to a task's history, dropping what is beyond the cap. */
  async append(taskId: string, sample: HistorySample): Promise<void> {
    const key = redisKeys.taskHistory(this.prefix, taskId);
    await this.redis.multi().rpush(key, JSON.stringify(sample)).ltrim(key, -HISTORY_SAMPLES, -1).pexpire(key, HISTORY_TTL_MS).exec();
  }

  /**
   * Records the period `now` falls in, once across processes: claims it, then appends a sample for
   * every running task (paused ones keep statuses as old as the pause). Answers whether this
   * caller recorded it.
   */
  async recordPeriod(store: RegsyncStore, now: Date): Promise<boolean> {
    const period = Math.floor(now.getTime() / this.periodMs);
    const claimed = await evalScript(this.redis, CLAIM_PERIOD, 1, redisKeys.historyPeriod(this.prefix), period, this.periodMs * 2);
    if (claimed !== 1) return false;
    for (const task of await store.listTasks()) {
      if (task.state !== 'running') continue;
      await this.append(task.id, sampleOf(await store.listServiceStatus(task.id), now));
    }
    return true;
  }

  /**
   * Records every period until stopped (the returned function). A failed period is logged and
   * skipped; the next one tries again.
   */
  start(store: RegsyncStore, logger: Logger, clock: () => Date = () => new Date()): () => void {
    let running = false;
    const tick = async (): Promise<void> => {
      if (running) return;
      running = true;
      try {
        await this.recordPeriod(store, clock());
      } catch (err) {
        logger.warn({ err }, 'recording the task history failed');
      } finally {
        running = false;
      }
    };
    void tick();
    const timer = setInterval(() => void tick(), this.periodMs);
    timer.unref();
    return () => clearInterval(timer);
  }
}

function parseSample(raw: string): HistorySample | undefined {
  try {
    const v = JSON.parse(raw) as Partial<HistorySample> | null;
    if (v === null || typeof v !== 'object' || typeof v.at !== 'string' || typeof v.copies !== 'number') return undefined;
    return { at: v.at, copies: v.copies, maxLagMs: typeof v.maxLagMs === 'number' ? v.maxLagMs : null, failing: v.failing ?? 0, held: v.held ?? 0 };
  } catch {
    return undefined;
  }
}
