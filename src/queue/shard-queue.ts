import { Queue, Worker, type ConnectionOptions, type Job, type JobsOptions } from 'bullmq';
import type { Logger } from 'pino';
import type { ReconcileReason } from '../model/reconcile-reason.js';
import { within } from '../util/within.js';

/** What a reconcile job carries: only the service sync key, never instance data. */
export interface ReconcileJobData {
  key: string;
  /** When the oldest change this job stands for was seen (ms); lag is measured from it. */
  since: number;
  reason: ReconcileReason;
}

export const RECONCILE_JOB = 'reconcile';

/** Name of the BullMQ queue of a shard. */
export function shardQueueName(shard: number): string {
  return `shard-${shard}`;
}

export interface ShardQueueOptions {
  connection: ConnectionOptions;
  /** Redis key prefix of every queue (default `regsync:bull`). */
  prefix?: string;
  shard?: number;
  /**
   * Delay of change jobs: a burst of changes within it becomes one reconcile. Default 0: a burst
   * arriving while a job waits or runs is coalesced by the de-duplication anyway.
   */
  changeDelayMs?: number;
}

/**
 * The producer side of one shard's queue. Jobs are de-duplicated by service sync key with
 * `keepLastIfActive`: while one waits, more adds are dropped (they would do the same work); while
 * one runs, one more is kept and runs after it. So a service sync never reconciles twice at once,
 * and a change seen during a reconcile always leads to another one.
 */
export class ShardQueue {
  readonly queue: Queue<ReconcileJobData>;
  private readonly changeDelayMs: number;
  /** Service sync key -> id of the last job this queue added behind changes (background or recovery) for it. */
  private readonly background = new Map<string, string>();

  constructor(options: ShardQueueOptions) {
    this.queue = new Queue<ReconcileJobData>(shardQueueName(options.shard ?? 0), {
      connection: options.connection,
      prefix: options.prefix ?? 'regsync:bull',
    });
    this.changeDelayMs = options.changeDelayMs ?? 0;
    // Connection errors reach the owner of the connection (which logs them); a failed add rejects
    // its caller. Without a listener BullMQ would print each one to the console.
    this.queue.on('error', () => undefined);
  }

  /**
   * Asks for a reconcile of `key` soon. Recoveries wait behind changes, full syncs and starts behind
   * both (background priority); a change merged into such a job still waiting moves that job to the
   * front, so that a change never waits behind thousands of full-sync or recovery jobs.
   */
  async enqueue(key: string, reason: ReconcileReason, delayMs?: number): Promise<void> {
    const delay = delayMs ?? (reason === 'change' ? this.changeDelayMs : 0);
    const job = await this.queue.add(RECONCILE_JOB, { key, since: Date.now(), reason }, jobOptions(key, delay, reason));
    if (job.id === undefined) return;
    if (isDeferred(reason)) {
      this.background.set(key, job.id);
      return;
    }
    // De-duplicated into the background job this queue added (its id came back, so it has not
    // started: a running one would have let a new job in): move it to the front.
    if (delay > 0 || this.background.get(key) !== job.id) return;
    this.background.delete(key);
    await job.changePriority({ priority: 0 }).catch(() => undefined);
  }

  /**
   * Asks for a reconcile of every key, in pipelined batches (`addBulk`: one round trip per batch,
   * each job added by the same script as {@link enqueue}, with the same de-duplication).
   */
  async enqueueMany(keys: readonly string[], reason: ReconcileReason): Promise<void> {
    const delay = reason === 'change' ? this.changeDelayMs : 0;
    const since = Date.now();
    // Small batches, one after the other: building a batch holds the event loop (about 70 us a
    // job), so the workers get going at once and keep going while the rest is added.
    for (let i = 0; i < keys.length; i += BULK_SIZE) {
      const batch = keys.slice(i, i + BULK_SIZE);
      const jobs = await this.queue.addBulk(batch.map((key) => ({ name: RECONCILE_JOB, data: { key, since, reason }, opts: jobOptions(key, delay, reason) })));
      for (const job of jobs) {
        if (job.id === undefined) continue;
        if (isDeferred(reason)) this.background.set(job.data.key, job.id);
        else if (delay === 0 && this.background.get(job.data.key) === job.id) {
          this.background.delete(job.data.key);
          await job.changePriority({ priority: 0 }).catch(() => undefined);
        }
      }
    }
  }

  async depth(): Promise<number> {
    const counts = await this.queue.getJobCounts('waiting', 'delayed', 'active', 'prioritized');
    return Object.values(counts).reduce((a, b) => a + b, 0);
  }

  async close(): Promise<void> {
    await this.queue.close();
  }
}

/** Jobs per `addBulk` call: a few milliseconds of building each, a round trip per batch. */
export const BULK_SIZE = 100;

/** BullMQ priority of full-sync and start jobs (jobs without a priority, changes, run first). */
const BACKGROUND_PRIORITY = 10;
/** BullMQ priority of recovery jobs (service syncs that failed during an outage): after changes, before full syncs. */
const RECOVERY_PRIORITY = 5;

/** The BullMQ priority of a job asked for with `reason`; undefined: none, it runs first. */
function priorityOf(reason: ReconcileReason): number | undefined {
  if (reason === 'full' || reason === 'start') return BACKGROUND_PRIORITY;
  if (reason === 'recovery' || reason === 'probe') return RECOVERY_PRIORITY;
  return undefined;
}

/** Whether a job waits behind changes (a change merged into it moves it to the front). */
function isDeferred(reason: ReconcileReason): boolean {
  return priorityOf(reason) !== undefined;
}

function jobOptions(key: string, delay: number, reason: ReconcileReason): JobsOptions {
  const priority = priorityOf(reason);
  return {
    deduplication: { id: key, keepLastIfActive: true },
    ...(delay > 0 ? { delay } : {}),
    ...(priority !== undefined ? { priority } : {}),
    // A probe of a cluster that may still be down is tried once: the next probe comes anyway.
    attempts: reason === 'probe' ? 1 : 4,
    backoff: { type: 'exponential', delay: 500 },
    removeOnComplete: true,
    removeOnFail: 1000,
  };
}

/** The consumer side: runs `process` for every job, `concurrency` at a time. */
export class ShardWorker {
  readonly worker: Worker<ReconcileJobData>;
  private readonly log: Logger;

  constructor(
    options: ShardQueueOptions & { concurrency?: number },
    process: (data: ReconcileJobData, job: Job<ReconcileJobData>) => Promise<void>,
    logger: Logger,
  ) {
    const log = logger.child({ component: 'worker', shard: options.shard ?? 0 });
    this.log = log;
    this.worker = new Worker<ReconcileJobData>(shardQueueName(options.shard ?? 0), (job) => process(job.data, job), {
      connection: options.connection,
      prefix: options.prefix ?? 'regsync:bull',
      concurrency: options.concurrency ?? 16,
      // A worker killed mid-job must not hold its service sync for BullMQ's default 30 s.
      lockDuration: 10_000,
      stalledInterval: 5_000,
      // After Redis was lost, fetch again within a second of it coming back (BullMQ's default waits 15 s).
      runRetryDelay: 1_000,
    });
    this.worker.on('failed', (job, err) => {
      log.warn({ err, key: job?.data.key, attempt: job?.attemptsMade }, 'reconcile failed');
    });
    this.worker.on('error', (err) => log.error({ err }, 'queue worker error'));
  }

  /**
   * Lets running reconciles finish and stops; after `graceMs` (a connection stuck reconnecting
   * after a Redis outage can keep BullMQ's close waiting) its connections are cut instead.
   */
  async close(graceMs = 10_000): Promise<void> {
    if (!(await within(this.worker.close(), graceMs))) {
      this.log.warn({ graceMs }, 'queue worker did not close in time; cutting its connections');
      await this.worker.disconnect().catch(() => undefined);
    }
  }
}

/**
 * The producer side of every shard: each key goes to the queue of its shard. Queues are opened on
 * first use.
 */
export class ShardQueues {
  private readonly queues = new Map<number, ShardQueue>();

  constructor(
    private readonly options: Omit<ShardQueueOptions, 'shard'>,
    private readonly shardOf: (key: string) => number,
  ) {}

  /** The queue of one shard. */
  queue(shard: number): ShardQueue {
    let queue = this.queues.get(shard);
    if (!queue) {
      queue = new ShardQueue({ ...this.options, shard });
      this.queues.set(shard, queue);
    }
    return queue;
  }

  enqueue(key: string, reason: ReconcileReason, delayMs?: number): Promise<void> {
    return this.queue(this.shardOf(key)).enqueue(key, reason, delayMs);
  }

  /**
   * Every key to its shard's queue, {@link BULK_SIZE} keys at a time in the given order (each
   * slice split by shard), so that the first keys are queued first whatever their shard.
   */
  async enqueueMany(keys: readonly string[], reason: ReconcileReason): Promise<void> {
    for (let i = 0; i < keys.length; i += BULK_SIZE) {
      const byShard = new Map<number, string[]>();
      for (const key of keys.slice(i, i + BULK_SIZE)) {
        const shard = this.shardOf(key);
        const list = byShard.get(shard);
        if (list) list.push(key);
        else byShard.set(shard, [key]);
      }
      await Promise.all([...byShard].map(([shard, list]) => this.queue(shard).enqueueMany(list, reason)));
    }
  }

  /** Jobs waiting, delayed or running in one shard. */
  depth(shard: number): Promise<number> {
    return this.queue(shard).depth();
  }

  async close(): Promise<void> {
    await Promise.all([...this.queues.values()].map((q) => q.close()));
    this.queues.clear();
  }
}
