import type { Logger } from 'pino';
import type { BeatResult, RegistryAdapter } from '../model/adapter.js';
import { instanceId, serviceKeyString, type Instance, type ServiceKey } from '../model/types.js';
import { NOOP_OBSERVER, type EngineObserver } from './observer.js';
import { quickHash } from '../util/hash.js';

interface Entry {
  key: string;
  owner: string;
  adapter: RegistryAdapter;
  service: ServiceKey;
  instance: Instance;
  intervalMs: number;
  /** Hash of the key: the entry's fixed phase within an interval or a window. */
  phase: number;
  /** Absolute tick at which the entry beats next. */
  dueTick: number;
  inFlight: boolean;
  /** Set by {@link HeartbeatScheduler.listedInSource}: the last source read no longer lists it, so it is not registered again. */
  unlisted?: boolean;
}

export interface HeartbeatStats {
  /** Instances currently kept alive. */
  entries: number;
  sent: number;
  failed: number;
  /** Instances registered again because the destination had lost them. */
  reRegistered: number;
  /** Largest delay of a beat behind its schedule, in ms, since the last `stats()` call. */
  maxLatenessMs: number;
}

export interface HeartbeatOptions {
  /** Resolution of the wheel. Default 100 ms. */
  tickMs?: number;
  logger: Logger;
  /** Told the result of every beat (metrics). */
  observer?: EngineObserver | undefined;
  /**
   * Asked right before an owner's beats (once per owner and tick) and before a re-registration:
   * false skips them, and the entries keep their schedule. The node answers whether this process
   * still leads the owner's shard within its lease's local deadline, so that beats stop the moment
   * that deadline passes, before the lease's `lost` is handled. Default: always.
   */
  mayBeat?: ((owner: string) => boolean) | undefined;
  /**
   * Asked before a copy the destination lost is registered again; default {@link mayBeat}. The node
   * answers whether the lease is valid by its deadline, not merely kept alive through its grace: a
   * leader cut off from Redis may have missed that the copy was removed on purpose.
   */
  mayRegister?: ((owner: string) => boolean) | undefined;
}

/**
 * How soon a copy this process did not just register gets its first beat here: a new leader taking
 * over a shard, or a restarted process, cannot know when the copy was beaten last.
 */
export const SOON_MS = 1_000;

/**
 * The heartbeat proxy: keeps ephemeral copies alive on registries that need beats (Nacos), and every
 * copy where every registration is a lease (Eureka), for as long as their owner (a service sync) says so.
 *
 * Beats are spread evenly over the interval (each instance gets a fixed phase from a hash of its key)
 * on a bucketed timer wheel: one timer for the whole process, not one per instance. Beats run apart
 * from reconciles, so they never wait behind them. A beat answered "unknown" registers the instance
 * again. Owners replace their whole set at once (`set`) and stop with `clear`. A set costs time in
 * proportion to its size (one service can hold 10,000 instances, and a set runs on the event loop
 * that also turns the wheel). Entries that fell due while the scheduler was stopped get their beat
 * within {@link SOON_MS} of `start()`, spread over it.
 */
export class HeartbeatScheduler {
  private readonly tickMs: number;
  private readonly log: Logger;
  private readonly entries = new Map<string, Entry>();
  private readonly byOwner = new Map<string, Set<string>>();
  private readonly wheel = new Map<number, Set<string>>();
  private timer: NodeJS.Timeout | undefined;
  private lastTick: number;
  private readonly counters = { sent: 0, failed: 0, reRegistered: 0, maxLatenessMs: 0 };
  private readonly observer: EngineObserver;
  private readonly mayBeat: (owner: string) => boolean;
  private readonly mayRegister: (owner: string) => boolean;

  constructor(options: HeartbeatOptions) {
    this.tickMs = options.tickMs ?? 100;
    this.log = options.logger.child({ component: 'heartbeats' });
    this.observer = options.observer ?? NOOP_OBSERVER;
    this.mayBeat = options.mayBeat ?? (() => true);
    this.mayRegister = options.mayRegister ?? this.mayBeat;
    this.lastTick = this.currentTick();
  }

  start(): void {
    if (this.timer) return;
    this.lastTick = this.currentTick();
    this.rescheduleOverdue();
    this.timer = setInterval(() => this.onTick(), this.tickMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  /**
   * Makes `instances` the complete set `owner` keeps alive on `adapter` for `service`. Instances
   * that stay keep their schedule; missing ones stop at once. New ones that were just `written`
   * (registered: that counts as a beat) join at their phase within the interval; other new ones
   * (beaten until now by another process or an earlier life of this one, when, nobody knows) get a
   * first beat within {@link SOON_MS}, spread over it, then keep their phase.
   */
  set(owner: string, adapter: RegistryAdapter, service: ServiceKey, instances: readonly Instance[], written: readonly Instance[] = []): void {
    if (!adapter.heartbeat) {
      this.clear(owner);
      return;
    }
    const intervalMs = Math.max(this.tickMs, adapter.heartbeatIntervalMs ?? 5_000);
    const justWritten = new Set(written.map(instanceId));
    const keyPrefix = entryPrefix(owner, adapter, service);
    const keep = new Set<string>();
    for (const instance of instances) {
      if (!instance.ephemeral && adapter.leasesEveryInstance !== true) continue;
      const key = keyPrefix + instanceId(instance);
      keep.add(key);
      const existing = this.entries.get(key);
      if (existing) {
        existing.unlisted = undefined;
        existing.instance = instance;
        existing.adapter = adapter;
        existing.intervalMs = intervalMs;
        continue;
      }
      const phase = phaseOf(key);
      const dueTick = justWritten.has(instanceId(instance)) ? this.firstTick(phase, intervalMs) : this.soonTick(phase, intervalMs);
      const entry: Entry = { key, owner, adapter, service, instance, intervalMs, phase, dueTick, inFlight: false };
      this.entries.set(key, entry);
      this.schedule(entry);
    }
    const previous = this.byOwner.get(owner) ?? new Set();
    for (const key of previous) if (!keep.has(key)) this.entries.delete(key);
    if (keep.size > 0) this.byOwner.set(owner, keep);
    else this.byOwner.delete(owner);
  }

  /**
   * Tells which of `owner`'s instances (by `ip:port`) its source still lists, when a reconcile read
   * the source but could not apply it (the destination could not be read). The others keep their
   * beats (a guard may have held their removal) but are no longer registered again when the
   * destination answers that it lost them: a destination cut off long enough to expire the copies
   * would otherwise get back, for a moment, copies of instances that left the source meanwhile,
   * before a reconcile could remove them. The owner's next {@link set} decides anew.
   */
  listedInSource(owner: string, listed: ReadonlySet<string>): void {
    for (const key of this.byOwner.get(owner) ?? []) {
      const entry = this.entries.get(key);
      if (entry) entry.unlisted = !listed.has(`${entry.instance.ip}:${entry.instance.port}`);
    }
  }

  /**
   * Stops the beats of those of `owner`'s `instances` on `adapter` and `service` that it is about to
   * remove, before the removal is sent: a beat of a copy already deregistered answers "unknown",
   * and would register it again (for good, until the next reconcile) if its entry were still there.
   * A beat in flight meanwhile finds its entry gone and registers nothing.
   */
  forget(owner: string, adapter: RegistryAdapter, service: ServiceKey, instances: readonly Instance[]): void {
    const keys = this.byOwner.get(owner);
    if (!keys || instances.length === 0) return;
    const keyPrefix = entryPrefix(owner, adapter, service);
    for (const instance of instances) {
      const key = keyPrefix + instanceId(instance);
      if (keys.delete(key)) this.entries.delete(key);
    }
    if (keys.size === 0) this.byOwner.delete(owner);
  }

  /** Stops every beat of `owner` at once. */
  clear(owner: string): void {
    for (const key of this.byOwner.get(owner) ?? []) this.entries.delete(key);
    this.byOwner.delete(owner);
  }

  /** Stops every beat whose owner starts with `prefix` (all service syncs of a task). */
  clearPrefix(prefix: string): void {
    for (const owner of [...this.byOwner.keys()]) if (owner.startsWith(prefix)) this.clear(owner);
  }

  clearAll(): void {
    this.entries.clear();
    this.byOwner.clear();
    this.wheel.clear();
  }

  /** Instances `owner` keeps alive. */
  instancesOf(owner: string): Instance[] {
    return [...(this.byOwner.get(owner) ?? [])].flatMap((k) => {
      const e = this.entries.get(k);
      return e ? [e.instance] : [];
    });
  }

  stats(): HeartbeatStats {
    const s = { entries: this.entries.size, ...this.counters };
    this.counters.maxLatenessMs = 0;
    return s;
  }

  private currentTick(): number {
    return Math.floor(Date.now() / this.tickMs);
  }

  /** The next tick at this key's fixed phase within the interval, so beats spread evenly. */
  private firstTick(phase: number, intervalMs: number): number {
    const ticksPerInterval = Math.max(1, Math.round(intervalMs / this.tickMs));
    const now = this.currentTick();
    const base = now - (now % ticksPerInterval) + (phase % ticksPerInterval);
    return base > now ? base : base + ticksPerInterval;
  }

  /** A tick within the next SOON_MS (at most half the interval), at this key's phase within that window. */
  private soonTick(phase: number, intervalMs: number): number {
    const window = Math.max(1, Math.round(Math.min(SOON_MS, intervalMs / 2) / this.tickMs));
    return this.currentTick() + 1 + (phase % window);
  }

  /**
   * Gives every entry that fell due while the wheel stood still (the scheduler stopped) a beat within
   * {@link SOON_MS}, spread over it, and drops the buckets of the ticks that passed meanwhile.
   */
  private rescheduleOverdue(): void {
    const now = this.currentTick();
    for (const tick of this.wheel.keys()) if (tick <= now) this.wheel.delete(tick);
    for (const entry of this.entries.values()) {
      if (entry.dueTick > now) continue;
      entry.dueTick = this.soonTick(entry.phase, entry.intervalMs);
      this.schedule(entry);
    }
  }

  private schedule(entry: Entry): void {
    let bucket = this.wheel.get(entry.dueTick);
    if (!bucket) {
      bucket = new Set();
      this.wheel.set(entry.dueTick, bucket);
    }
    bucket.add(entry.key);
  }

  private onTick(): void {
    const now = this.currentTick();
    // Asked once per owner and tick: an owner's beats all go out, or none.
    const allowed = new Map<string, boolean>();
    const may = (owner: string): boolean => {
      let yes = allowed.get(owner);
      if (yes === undefined) {
        yes = this.askMayBeat(owner);
        allowed.set(owner, yes);
      }
      return yes;
    };
    for (let tick = this.lastTick + 1; tick <= now; tick++) {
      const bucket = this.wheel.get(tick);
      if (!bucket) continue;
      this.wheel.delete(tick);
      for (const key of bucket) {
        const entry = this.entries.get(key);
        if (!entry || entry.dueTick !== tick) continue;
        this.counters.maxLatenessMs = Math.max(this.counters.maxLatenessMs, (now - tick) * this.tickMs);
        // The adapter's interval can change (Nacos tells it in every beat answer).
        entry.intervalMs = Math.max(this.tickMs, entry.adapter.heartbeatIntervalMs ?? entry.intervalMs);
        entry.dueTick = tick + Math.max(1, Math.round(entry.intervalMs / this.tickMs));
        this.schedule(entry);
        if (may(entry.owner)) void this.beat(entry);
      }
    }
    this.lastTick = now;
  }

  private askMayBeat(owner: string, ask: (owner: string) => boolean = this.mayBeat): boolean {
    try {
      return ask(owner);
    } catch (err) {
      this.log.warn({ err, owner }, 'cannot tell whether beats may go out; skipping them');
      return false;
    }
  }

  private async beat(entry: Entry): Promise<void> {
    if (entry.inFlight || !entry.adapter.heartbeat) return;
    entry.inFlight = true;
    let answered: BeatResult | undefined;
    try {
      const result = await entry.adapter.heartbeat(entry.service, entry.instance);
      answered = result;
      this.counters.sent += 1;
      // The owner may have dropped the instance, or this process its lead, while the beat was in flight.
      if (result === 'unknown' && this.entries.get(entry.key) === entry && entry.unlisted !== true && this.askMayBeat(entry.owner, this.mayRegister)) {
        await entry.adapter.apply(entry.service, { upsert: [entry.instance], remove: [] });
        this.counters.reRegistered += 1;
        this.log.info({ cluster: entry.adapter.clusterId, service: serviceKeyString(entry.service), instance: instanceId(entry.instance) }, 'destination lost a copy; registered it again');
      }
    } catch (err) {
      this.counters.failed += 1;
      this.log.warn({ err, cluster: entry.adapter.clusterId, service: serviceKeyString(entry.service), instance: instanceId(entry.instance) }, 'heartbeat failed');
    } finally {
      entry.inFlight = false;
      // One observation per beat: what the destination answered, `failed` when the beat threw (a
      // failed re-registration after `unknown` is logged, and counted as the `unknown` it follows).
      try {
        this.observer.beat?.(entry.adapter.clusterId, answered ?? 'failed');
      } catch (err) {
        this.log.warn({ err }, 'a heartbeat observer threw');
      }
    }
  }
}

/**
 * The fixed phase of an entry: FNV-1a over the key's UTF-16 code units, finished with MurmurHash3's
 * `fmix32` so that keys differing in their last characters spread over every phase. Kept only in
 * memory (a restarted process gives its copies a first beat soon anyway), so it need not be stable
 * across versions; it is cheap, as a set of 10,000 instances hashes 10,000 keys.
 */
function phaseOf(key: string): number {
  return quickHash(key);
}

/** Where the keys of `owner`'s entries on `adapter` and `service` start (the instance's id follows). */
function entryPrefix(owner: string, adapter: RegistryAdapter, service: ServiceKey): string {
  return `${owner}\n${adapter.clusterId}\n${serviceKeyString(service)}\n`;
}
