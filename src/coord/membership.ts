import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { HEARTBEAT, LEAVE, LIVE_WORKERS } from './scripts.js';
import { evalScript } from '../util/redis-script.js';
import { redisKeys } from '../util/redis-keys.js';

/** What a worker tells the others about itself. */
export interface WorkerInfo {
  id: string;
  host: string;
  pid: number;
  /** ISO time the worker was created. */
  startedAt: string;
  /** Relative capacity, for display and future weighting; default 1. */
  capacity: number;
  /** What the process runs (e.g. `sync`, `api`); default none. */
  roles: string[];
  /** How parts of the process are doing, as of its last heartbeat. */
  status?: WorkerStatus | undefined;
}

/**
 * What a worker reports about its parts at every heartbeat, by part (`cmdb`, say), as the parts
 * themselves describe it: opaque here, so coordination knows no part's shape.
 */
export type WorkerStatus = Readonly<Record<string, unknown>>;

/** Options of {@link Membership}. */
export interface MembershipOptions {
  /** Connection for commands; never closed by the membership. */
  redis: Redis;
  /** Key prefix, as the store's. */
  prefix: string;
  /** Connection for the events subscription; default `redis.duplicate()`, which the membership owns and closes. */
  subscriber?: Redis;
  /** Default `<hostname>-<pid>-<6 random hex digits>`, unique per process start. */
  id?: string;
  capacity?: number;
  roles?: string[];
  /** Asked at every heartbeat; what it answers is stored with the worker's record. */
  status?: () => WorkerStatus;
  /** How long a worker counts as alive after its last heartbeat; default 5000. Heartbeats run every ttlMs / 3. */
  ttlMs?: number;
  logger?: Logger;
}

/** The live workers' records of a deployment, sorted by id, read now (no membership needed). */
export async function listWorkers(redis: Redis, prefix: string): Promise<WorkerInfo[]> {
  const ids = ((await evalScript(redis, LIVE_WORKERS, 1, redisKeys.workers(prefix), redisKeys.workerEvents(prefix))) as string[]).sort();
  if (ids.length === 0) return [];
  const raws = await redis.mget(ids.map((id) => redisKeys.worker(prefix, id)));
  return raws.flatMap((raw) => (raw === null ? [] : [JSON.parse(raw) as WorkerInfo]));
}

/** The default worker id: `<hostname>-<pid>-<6 random hex digits>`. */
export function defaultWorkerId(): string {
  return `${hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
}

/**
 * The live workers of a deployment. Each worker keeps itself in the sorted set `<prefix>:workers`,
 * scored by its expiry time on the Redis clock, and its {@link WorkerInfo} at `<prefix>:worker:<id>`
 * with the same TTL; both are refreshed every `ttlMs / 3`. A worker that stops refreshing (crash,
 * partition) drops out `ttlMs` after its last heartbeat; {@link leave} removes it at once.
 *
 * Emits `change` with the sorted live ids whenever they differ from the last ones seen. The list is
 * polled at every heartbeat, and right away when a message arrives on `<prefix>:workers:events`
 * (published on join, leave and pruning), so the others react to a join or a leave within a round trip.
 *
 * Redis errors are logged and retried at the next heartbeat; a worker whose heartbeats keep failing
 * drops out of the others' lists (they take its shards as its leases run out, which the same
 * failing connection cannot renew), and on reconnecting beats at once to be back in them.
 */
export class Membership extends EventEmitter<{ change: [ids: string[]] }> {
  readonly id: string;
  readonly info: WorkerInfo;
  readonly ttlMs: number;
  private readonly redis: Redis;
  private readonly subscriber: Redis;
  private readonly ownsSubscriber: boolean;
  private readonly logger: Logger;
  private readonly setKey: string;
  private readonly channel: string;
  private ids: string[] = [];
  private timer: NodeJS.Timeout | undefined;
  private state: 'new' | 'joined' | 'stopped' = 'new';
  private polling: Promise<string[]> | undefined;
  private pollAgain = false;
  private beating = false;
  /** Redis is back (a failover, a restart): beat at once, so the others see this worker alive before they re-assign its shards. */
  private readonly onReady = (): void => {
    if (this.state === 'joined') void this.beat();
  };
  private readonly onMessage = (channel: string): void => {
    if (channel === this.channel) void this.refresh().catch(() => undefined);
  };

  constructor(private readonly opts: MembershipOptions) {
    super();
    this.ttlMs = opts.ttlMs ?? 5000;
    if (!Number.isInteger(this.ttlMs) || this.ttlMs < 30) throw new RangeError(`ttlMs must be an integer >= 30, got ${this.ttlMs}`);
    this.redis = opts.redis;
    this.id = opts.id ?? defaultWorkerId();
    this.info = {
      id: this.id,
      host: hostname(),
      pid: process.pid,
      startedAt: new Date().toISOString(),
      capacity: opts.capacity ?? 1,
      roles: opts.roles ?? [],
    };
    this.ownsSubscriber = opts.subscriber === undefined;
    this.subscriber = opts.subscriber ?? opts.redis.duplicate();
    this.logger = (opts.logger ?? silentLogger()).child({ component: 'membership', worker: this.id });
    this.setKey = redisKeys.workers(opts.prefix);
    this.channel = redisKeys.workerEvents(opts.prefix);
  }

  /** Registers this worker, subscribes to the events and starts the heartbeat. Idempotent. */
  async join(): Promise<void> {
    if (this.state !== 'new') return;
    this.state = 'joined';
    this.subscriber.on('message', this.onMessage);
    this.redis.on('ready', this.onReady);
    await this.subscriber.subscribe(this.channel);
    await this.heartbeat(true);
    this.timer = setInterval(() => void this.beat(), Math.max(10, Math.floor(this.ttlMs / 3)));
    this.timer.unref();
    await this.refresh();
  }

  /** The live worker ids as last seen, sorted. */
  liveIds(): string[] {
    return [...this.ids];
  }

  /** Polls the live worker ids now (emitting `change` when they changed) and answers them. */
  refresh(): Promise<string[]> {
    if (this.state !== 'joined') return Promise.resolve(this.liveIds());
    if (this.polling) {
      this.pollAgain = true;
      return this.polling;
    }
    const poll = async (): Promise<string[]> => {
      do {
        this.pollAgain = false;
        const ids = ((await evalScript(this.redis, LIVE_WORKERS, 1, this.setKey, this.channel)) as string[]).sort();
        if (this.state === 'joined' && ids.join('\n') !== this.ids.join('\n')) {
          this.ids = ids;
          this.emit('change', this.liveIds());
        }
      } while (this.pollAgain && this.state === 'joined');
      return this.liveIds();
    };
    this.polling = poll().finally(() => (this.polling = undefined));
    return this.polling;
  }

  /** The live workers' records, sorted by id, read now. */
  list(): Promise<WorkerInfo[]> {
    return listWorkers(this.redis, this.opts.prefix);
  }

  /** Stops the heartbeat and removes this worker from Redis at once, telling the others. */
  async leave(): Promise<void> {
    if (this.state === 'stopped') return;
    const joined = this.state === 'joined';
    this.halt();
    if (joined) await evalScript(this.redis, LEAVE, 2, this.setKey, this.recordKey(this.id), this.id, this.channel);
  }

  /**
   * Stops the heartbeat and the subscription without telling Redis, as a crash would: the record
   * stays until its TTL runs out. For a process that cannot trust its connection, and for tests.
   */
  halt(): void {
    this.state = 'stopped';
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    this.subscriber.off('message', this.onMessage);
    this.redis.off('ready', this.onReady);
    if (this.ownsSubscriber) this.subscriber.disconnect();
    else void this.subscriber.unsubscribe(this.channel).catch(() => undefined);
  }

  private async beat(): Promise<void> {
    try {
      await this.heartbeat(false);
      await this.refresh();
    } catch (error) {
      this.logger.warn({ err: error }, 'membership heartbeat failed');
    }
  }

  private async heartbeat(first: boolean): Promise<void> {
    if (this.beating && !first) return;
    this.beating = true;
    try {
      const added = await evalScript(this.redis, HEARTBEAT, 2, this.setKey, this.recordKey(this.id), this.id, JSON.stringify(this.opts.status ? { ...this.info, status: this.opts.status() } : this.info), this.ttlMs, this.channel);
      if (added === 1 && !first) this.logger.warn('worker had expired from the membership; re-registered');
    } finally {
      this.beating = false;
    }
  }

  private recordKey(id: string): string {
    return redisKeys.worker(this.opts.prefix, id);
  }
}
