import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { ACQUIRE_LEASE, RELEASE_LEASE, RENEW_LEASE } from './scripts.js';
import { evalScript } from '../util/redis-script.js';
import { redisKeys } from '../util/redis-keys.js';

/** A shard lease as stored at `<prefix>:lease:<shard>`. */
export interface LeaseRecord {
  owner: string;
  /**
   * Grows with every acquisition of the shard (see ACQUIRE_LEASE for data loss): it tells one
   * leadership from the next in Redis, the logs and `/api/v1/shards`. Registries cannot see it, so no
   * write or beat is checked against it; the holder's local deadline bounds its leadership.
   */
  token: number;
  ttlLeftMs: number;
  /** When this token was handed out (Redis clock, ms since the epoch); absent for leases taken before it was recorded. */
  acquiredAtMs?: number;
}

export const DEFAULT_LEASE_TTL_MS = 5000;

export function leaseKey(prefix: string, shard: number): string {
  return redisKeys.lease(prefix, shard);
}

function sinceKey(prefix: string, shard: number): string {
  return redisKeys.leaseSince(prefix, shard);
}

function leaseValue(owner: string, token: number): string {
  return JSON.stringify({ owner, token });
}

/**
 * Takes the shard's lease for `ttlMs` when nobody holds it, with a token one higher than any
 * before it (INCR of `<prefix>:lease-token:<shard>`). Answers the token, or undefined when held.
 */
export async function acquireLease(redis: Redis, prefix: string, shard: number, owner: string, ttlMs: number): Promise<number | undefined> {
  const token = Number(
    await evalScript(redis, ACQUIRE_LEASE, 3, leaseKey(prefix, shard), redisKeys.leaseToken(prefix, shard), sinceKey(prefix, shard), JSON.stringify(owner), ttlMs),
  );
  return token > 0 ? token : undefined;
}

/**
 * Extends the lease to `ttlMs` from now, only while `owner` still holds it with `token`, or takes it
 * back when its key is gone and no later token was handed out (see RENEW_LEASE).
 */
export async function renewLease(redis: Redis, prefix: string, shard: number, owner: string, token: number, ttlMs: number): Promise<boolean> {
  const answer = await evalScript(redis, RENEW_LEASE, 2, leaseKey(prefix, shard), redisKeys.leaseToken(prefix, shard), leaseValue(owner, token), ttlMs, token);
  return answer === 1 || answer === 2;
}

/** Deletes the lease, only while `owner` still holds it with `token`. */
export async function releaseLease(redis: Redis, prefix: string, shard: number, owner: string, token: number): Promise<boolean> {
  return (await evalScript(redis, RELEASE_LEASE, 1, leaseKey(prefix, shard), leaseValue(owner, token))) === 1;
}

/** The leases of the given shards in one round trip; undefined where free. */
export async function readLeases(redis: Redis, prefix: string, shards: readonly number[]): Promise<(LeaseRecord | undefined)[]> {
  const pipeline = redis.pipeline();
  for (const shard of shards) pipeline.get(leaseKey(prefix, shard)).pttl(leaseKey(prefix, shard)).get(sinceKey(prefix, shard));
  const replies = (await pipeline.exec()) ?? [];
  return shards.map((shard, i) => {
    const [error, raw] = replies[3 * i] ?? [];
    if (error) throw error;
    const lease = parseLease(leaseKey(prefix, shard), raw as string | null, Number(replies[3 * i + 1]?.[1]));
    const [since, at] = String(replies[3 * i + 2]?.[1] ?? '').split(':').map(Number);
    return lease && since === lease.token && Number.isFinite(at) ? { ...lease, acquiredAtMs: at } : lease;
  });
}

/** The shard's lease; undefined when free. */
export async function readLease(redis: Redis, prefix: string, shard: number): Promise<LeaseRecord | undefined> {
  return (await readLeases(redis, prefix, [shard]))[0];
}

function parseLease(key: string, raw: string | null, ttlLeftMs: number): LeaseRecord | undefined {
  if (raw === null) return undefined;
  const value = JSON.parse(raw) as Partial<LeaseRecord>;
  if (typeof value.owner !== 'string' || typeof value.token !== 'number') {
    throw new Error(`${key} does not hold a lease record: ${raw.slice(0, 200)}`);
  }
  return { owner: value.owner, token: value.token, ttlLeftMs: Math.max(ttlLeftMs, 0) };
}

/** Options of {@link LeaseManager}. */
export interface LeaseManagerOptions {
  /** Connection for the lease commands; never closed by the manager. */
  redis: Redis;
  prefix: string;
  /** Who holds the leases: the worker id. */
  owner: string;
  /** Lease TTL in Redis; default 5000. Held leases are renewed every ttlMs / 3. */
  ttlMs?: number;
  /**
   * Subtracted from the local deadline to cover clock rate differences and timer lateness; default
   * ttlMs / 10 (at least 10 ms). Must be less than 2/3 of ttlMs, so a renewal can land in time.
   */
  safetyMarginMs?: number;
  /**
   * How long past its local deadline a lease not known to be lost still counts for keep-alive
   * ({@link LeaseManager.keepsAlive}), while its renewals go unanswered; default 0 (none). Redis
   * failing over or restarting answers no one, so no one else can take the lease meanwhile; when it
   * answers again the lease is renewed or taken back (RENEW_LEASE) and leadership goes on, or it is
   * found taken and lost at once. Past the grace it is lost as without one.
   */
  graceMs?: number;
  logger?: Logger;
}

interface HeldLease {
  token: number;
  /** performance.now() after which the lease must not be used, whatever Redis says. */
  deadline: number;
  renewing: boolean;
  renewTimer: NodeJS.Timeout;
  deadlineTimer?: NodeJS.Timeout;
  /** Whether the local deadline passed and the lease lives on by the grace alone. */
  inGrace: boolean;
}

/**
 * Shard leases held by one owner, bounded by a local deadline. A lease is valid locally until
 * `sent + ttlMs - margin`, where `sent` is the monotonic time the acquire or last successful renew
 * was sent: Redis cannot have started the TTL before that moment, so the local deadline always
 * passes before the key expires, and a worker cut off from Redis stops using a lease (see
 * {@link isValid}) before anyone else can take it. That is the whole guarantee: it holds as long as
 * the holder asks {@link isValid} right before each leader-only action (the node does before every
 * beat, retain and live-set takeover). Nothing downstream checks the token (registries cannot see
 * it, and a Redis round trip per beat would cost more than the beat): an action sent just before
 * the deadline may still arrive after it, and only the safety margin separates it from the next
 * holder's first one (beats and retains are idempotent, so an overlap that short does no harm).
 *
 * Emits `lost` (shard, token) at once when Redis answers a renew with "not yours", and when the local
 * deadline passes without a successful renew (Redis unreachable or too slow); the lease is then
 * forgotten and, in the second case, released in the background in case it is still ours. A renew that
 * fails with an error is retried at the next interval: the deadline alone decides.
 *
 * With a grace ({@link LeaseManagerOptions.graceMs}) a deadline passed without an answer from Redis
 * ends {@link isValid} but not {@link keepsAlive}: the holder keeps beating what it leads for the
 * grace, renewing all the while (at once when the connection is ready again); a renewal that lands
 * ends the grace, an answer "not yours" loses the lease at once, and the end of the grace loses it
 * as the deadline does without one.
 */
export class LeaseManager extends EventEmitter<{ lost: [shard: number, token: number] }> {
  readonly owner: string;
  readonly prefix: string;
  readonly ttlMs: number;
  readonly safetyMarginMs: number;
  readonly graceMs: number;
  private readonly redis: Redis;
  private readonly logger: Logger;
  private readonly held = new Map<number, HeldLease>();
  private halted = false;
  /** Whether the connection was ready once: a later `ready` is a reconnection. */
  private wasReady: boolean;
  /** performance.now() of the last reconnection; -Infinity before any. */
  private reconnectedAt = Number.NEGATIVE_INFINITY;

  constructor(opts: LeaseManagerOptions) {
    super();
    this.redis = opts.redis;
    this.prefix = opts.prefix;
    this.owner = opts.owner;
    this.ttlMs = opts.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    if (!Number.isInteger(this.ttlMs) || this.ttlMs < 30) throw new RangeError(`ttlMs must be an integer >= 30, got ${this.ttlMs}`);
    this.safetyMarginMs = opts.safetyMarginMs ?? Math.max(10, Math.round(this.ttlMs / 10));
    if (!(this.safetyMarginMs >= 0 && this.safetyMarginMs < (this.ttlMs * 2) / 3)) {
      throw new RangeError(`safetyMarginMs must be from 0 to below 2/3 of ttlMs, got ${this.safetyMarginMs}`);
    }
    this.graceMs = opts.graceMs ?? 0;
    if (!Number.isInteger(this.graceMs) || this.graceMs < 0) throw new RangeError(`graceMs must be a whole number of ms, got ${this.graceMs}`);
    this.logger = (opts.logger ?? silentLogger()).child({ component: 'lease', owner: this.owner });
    this.wasReady = this.redis.status === 'ready';
    // Redis is back (a failover, a restart): renew at once, before another worker finds a lease free.
    this.redis.on('ready', this.onReady);
  }

  private readonly onReady = (): void => {
    if (this.wasReady) this.reconnectedAt = performance.now();
    this.wasReady = true;
    for (const shard of this.held.keys()) void this.renew(shard);
  };

  /**
   * True for one lease TTL after the connection came back from an outage. Every worker was cut off
   * alike, and the holders of leases that ran out meanwhile take them back as they reconnect
   * (RENEW_LEASE); a worker that reconnected first must not take them meanwhile (see
   * `ShardCoordinator`), or leadership would move twice for nothing.
   */
  justReconnected(): boolean {
    return performance.now() - this.reconnectedAt < this.ttlMs;
  }

  /** Takes the shard's lease if it is free and answers its token; undefined when someone holds it. */
  async acquire(shard: number): Promise<number | undefined> {
    const mine = this.held.get(shard);
    if (mine) return mine.token;
    if (this.halted) return undefined;
    const sent = performance.now();
    const token = await acquireLease(this.redis, this.prefix, shard, this.owner, this.ttlMs);
    if (token === undefined) return undefined;
    const deadline = sent + this.ttlMs - this.safetyMarginMs;
    if (this.halted || this.held.has(shard) || performance.now() >= deadline) {
      // Stopped meanwhile, raced by a parallel acquire, or the answer came too late to use.
      void releaseLease(this.redis, this.prefix, shard, this.owner, token).catch(() => undefined);
      return this.held.get(shard)?.token;
    }
    const renewTimer = setInterval(() => void this.renew(shard), Math.max(10, Math.floor(this.ttlMs / 3)));
    renewTimer.unref();
    const lease: HeldLease = { token, deadline, renewing: false, renewTimer, inGrace: false };
    this.held.set(shard, lease);
    this.armDeadline(shard, lease);
    return token;
  }

  /**
   * Extends a held lease now (the timer does it every ttlMs / 3). Answers whether it is still valid;
   * false, with `lost`, when Redis says it is no longer ours.
   */
  async renew(shard: number): Promise<boolean> {
    const lease = this.held.get(shard);
    if (!lease || lease.renewing || this.halted) return this.isValid(shard);
    lease.renewing = true;
    const sent = performance.now();
    try {
      const ok = await renewLease(this.redis, this.prefix, shard, this.owner, lease.token, this.ttlMs);
      if (this.held.get(shard) !== lease) return false;
      if (!ok) {
        this.lose(shard, lease, false);
        return false;
      }
      lease.deadline = Math.max(lease.deadline, sent + this.ttlMs - this.safetyMarginMs);
      if (lease.inGrace && performance.now() < lease.deadline) {
        lease.inGrace = false;
        this.logger.info({ shard, token: lease.token }, 'lease renewed after Redis answered again; leadership goes on');
        this.armDeadline(shard, lease);
      }
    } catch (error) {
      this.logger.warn({ err: error, shard }, 'lease renew failed; retrying until the local deadline (and its grace)');
    } finally {
      lease.renewing = false;
    }
    return this.isValid(shard);
  }

  /** Gives a held lease up and deletes it in Redis (if still ours). False when not held or on a Redis error. */
  async release(shard: number): Promise<boolean> {
    const lease = this.held.get(shard);
    if (!lease) return false;
    this.forget(shard, lease);
    try {
      return await releaseLease(this.redis, this.prefix, shard, this.owner, lease.token);
    } catch (error) {
      this.logger.warn({ err: error, shard }, 'lease release failed; it expires by its TTL');
      return false;
    }
  }

  /**
   * True while the lease is held and its local deadline has not passed: the test right before every
   * leader-only action (beat, retain, live-set takeover). Needs no Redis, so it turns false on time
   * even while Redis does not answer.
   */
  isValid(shard: number): boolean {
    const lease = this.held.get(shard);
    return lease !== undefined && performance.now() < lease.deadline;
  }

  /**
   * True while the lease is valid ({@link isValid}), or its deadline passed less than
   * {@link LeaseManagerOptions.graceMs} ago without the lease being found lost: the test before
   * keep-alive actions (beats, retains), which repeat what the holder already wrote and so may go
   * on while Redis fails over. Needs no Redis.
   */
  keepsAlive(shard: number): boolean {
    const lease = this.held.get(shard);
    return lease !== undefined && performance.now() < lease.deadline + this.graceMs;
  }

  /** The token of a held lease (valid or not yet known to be lost). */
  token(shard: number): number | undefined {
    return this.held.get(shard)?.token;
  }

  heldShards(): number[] {
    return [...this.held.keys()].sort((a, b) => a - b);
  }

  /** The shard's lease as stored in Redis now. */
  read(shard: number): Promise<LeaseRecord | undefined> {
    return readLease(this.redis, this.prefix, shard);
  }

  /** The leases of shards `0 .. count-1`, read in one round trip. */
  readAll(count: number): Promise<(LeaseRecord | undefined)[]> {
    return readLeases(this.redis, this.prefix, [...Array(count).keys()]);
  }

  /**
   * Stops renewing and acquiring without telling Redis, as a crash would; {@link isValid} keeps
   * following the local deadlines, and no `lost` is emitted any more.
   */
  halt(): void {
    this.halted = true;
    this.redis.off('ready', this.onReady);
    for (const lease of this.held.values()) {
      clearInterval(lease.renewTimer);
      clearTimeout(lease.deadlineTimer);
    }
  }

  /** Loses the lease when its deadline (and then its grace) passes without a renewal. */
  private armDeadline(shard: number, lease: HeldLease): void {
    clearTimeout(lease.deadlineTimer);
    const end = lease.deadline + (lease.inGrace ? this.graceMs : 0);
    lease.deadlineTimer = setTimeout(() => {
      if (this.held.get(shard) !== lease || this.halted) return;
      const now = performance.now();
      if (now < lease.deadline) {
        lease.inGrace = false;
        this.armDeadline(shard, lease);
      } else if (!lease.inGrace && this.graceMs > 0 && now < lease.deadline + this.graceMs) {
        lease.inGrace = true;
        this.logger.warn({ shard, token: lease.token, graceMs: this.graceMs }, 'lease not renewed by its deadline (Redis does not answer); keeping copies alive for the grace');
        this.armDeadline(shard, lease);
      } else if (now >= lease.deadline + (lease.inGrace ? this.graceMs : 0)) this.lose(shard, lease, true);
      else this.armDeadline(shard, lease);
    }, Math.max(0, end - performance.now()) + 1);
    lease.deadlineTimer.unref();
  }

  private lose(shard: number, lease: HeldLease, expired: boolean): void {
    this.forget(shard, lease);
    this.logger.warn({ shard, token: lease.token, expired }, 'lease lost');
    if (expired) void releaseLease(this.redis, this.prefix, shard, this.owner, lease.token).catch(() => undefined);
    this.emit('lost', shard, lease.token);
  }

  private forget(shard: number, lease: HeldLease): void {
    clearInterval(lease.renewTimer);
    clearTimeout(lease.deadlineTimer);
    this.held.delete(shard);
  }
}
