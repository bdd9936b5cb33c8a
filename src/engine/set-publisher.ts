import { performance } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { Logger } from 'pino';
import type { RegistryAdapter } from '../model/adapter.js';
import { parseServiceSyncKey, serviceKeyString, type ServiceKey, type TaskSpec } from '../model/types.js';
import { mapService } from '../model/task-rules.js';
import type { AdapterPool } from './adapter-pool.js';
import type { LiveSets } from './live-sets.js';
import { connectionBound } from './reconciler.js';

/** Options of {@link SetPublisher}. */
export interface SetPublisherOptions {
  liveSets: LiveSets;
  adapters: AdapterPool;
  /** The task as this process runs it, or undefined when it does not run here (paused, deleted). */
  activeTask: (taskId: string) => TaskSpec | undefined;
  /** The shard of a service sync key (where its live set is kept). */
  shardOf: (key: string) => number;
  logger: Logger;
  /** Service syncs published at once; default 16. */
  concurrency?: number | undefined;
  /** First retry after a failed publish or shard load, ms (doubling up to `maxRetryMs`); default 500. */
  retryMs?: number | undefined;
  /** Longest wait between retries, ms; default 5 000 (a copy missing from a replica matters more than a few requests). */
  maxRetryMs?: number | undefined;
  /**
   * How long a lost shard's sets stay published (and follow their live sets), ms; default 15 000.
   * A shard moves to a replica that has yet to connect and publish (a worker replacing a killed one
   * takes shards whose other replica is still the dead one, until its membership expires): the
   * copies must not vanish in between.
   */
  handoverGraceMs?: number | undefined;
}

/** Where this process published a service sync's set: withdrawn from there again. */
interface Holder {
  adapter: RegistryAdapter;
  target: ServiceKey;
}

/** One service sync this process knows of: in a shard it serves, or published here. */
interface Entry {
  key: string;
  shard: number;
  held: Holder | undefined;
  /** Failed publishes in a row (the backoff). */
  failures: number;
  retry: NodeJS.Timeout | undefined;
}

/** How long one slice of a shard's keys may hold the event loop, ms. */
const SLICE_MS = 4;

/**
 * Keeps copies alive on connection-bound destinations (Nacos gRPC) from every replica: for each
 * shard this process is a replica of (its leader or a follower), it publishes, over its own
 * connection, every live set of the shard whose task runs here and whose destination is
 * connection-bound. The registry shows identical instances published by several connections once
 * and keeps them until the last one leaves, so a replica killed with -9 takes no copy with it.
 *
 * Level-triggered, by key: every trigger (a shard gained or lost, a live-set change announced by
 * another replica, a task started, changed, paused or removed, a set the reconciler published)
 * only marks the key, and one sync per key at a time compares what should be published with what
 * is, re-reading the live set from Redis. A burst of triggers coalesces into one sync. A set is
 * withdrawn (`publish(..., [])`) when the shard is lost (after a hand-over grace, during which it
 * still follows the shard's live sets), the task stops running here (at once), or its live set is
 * gone. Failures are logged and retried with backoff. Nothing here runs at rest: there is no
 * period, and the adapter sends nothing for a set it holds already.
 */
export class SetPublisher {
  private readonly log: Logger;
  private readonly concurrency: number;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  private served = new Set<number>();
  /** Shards lost within the hand-over grace: still published here, until their timer withdraws them. */
  private readonly lingering = new Map<number, NodeJS.Timeout>();
  private readonly handoverGraceMs: number;
  private readonly entries = new Map<string, Entry>();
  private readonly pending = new Set<string>();
  private readonly running = new Set<string>();
  /** Keys marked again while their sync ran: synced once more after it. */
  private readonly again = new Set<string>();
  private readonly waiters = new Map<string, Array<() => void>>();
  private readonly idleWaiters: Array<() => void> = [];
  private readonly shardRetries = new Map<number, NodeJS.Timeout>();
  private active = 0;
  private stopped = false;

  constructor(private readonly opts: SetPublisherOptions) {
    this.log = opts.logger.child({ component: 'set-publisher' });
    this.concurrency = Math.max(1, opts.concurrency ?? 16);
    this.retryMs = opts.retryMs ?? 500;
    this.maxRetryMs = opts.maxRetryMs ?? 5_000;
    this.handoverGraceMs = opts.handoverGraceMs ?? 15_000;
  }

  /**
   * The shards this process is a replica of (all of them, sorted or not): publishes the live sets of
   * the shards gained, and withdraws those of the shards lost once `handoverGraceMs` passed without
   * gaining them back (meanwhile they follow their live sets). Resolves once the gained shards' keys
   * are loaded and marked (not once they are all published).
   */
  async serve(shards: readonly number[]): Promise<void> {
    const next = new Set(shards);
    const lost = [...this.served].filter((s) => !next.has(s));
    const gained = [...next].filter((s) => !this.served.has(s));
    this.served = next;
    for (const shard of gained) {
      clearTimeout(this.lingering.get(shard));
      this.lingering.delete(shard);
    }
    for (const shard of lost) {
      clearTimeout(this.shardRetries.get(shard));
      this.shardRetries.delete(shard);
      const timer = setTimeout(() => void this.handedOver(shard), this.handoverGraceMs);
      timer.unref();
      this.lingering.set(shard, timer);
    }
    await Promise.all(gained.map((shard) => this.loadShard(shard, 0)));
  }

  /** Another process announced a change of `key`'s live set. */
  changed(shard: number, key: string): void {
    if (this.publishes(shard) || this.entries.has(key)) void this.mark(key, shard);
  }

  /** Whether this process publishes the shard's sets: it serves it, or lost it within the hand-over grace. */
  private publishes(shard: number): boolean {
    return this.served.has(shard) || this.lingering.has(shard);
  }

  /** The hand-over grace of a lost shard ended: its sets are withdrawn here. */
  private async handedOver(shard: number): Promise<void> {
    this.lingering.delete(shard);
    if (this.stopped || this.served.has(shard)) return;
    await forEachYielding([...this.entries.values()], (entry) => {
      if (entry.shard === shard) void this.mark(entry.key);
    });
  }

  /**
   * This process's reconciler published `key`'s set through `adapter` into `target` (see
   * `ReconcilerOptions.published`): it is withdrawn from there with its shard or its task, and at
   * once when either is gone already.
   */
  note(key: string, shard: number, adapter: RegistryAdapter, target: ServiceKey): void {
    const entry = this.entry(key, shard);
    const before = entry.held;
    entry.held = { adapter, target };
    if (before && !sameHolder(before, entry.held)) void this.withdraw(key, before).catch(() => undefined);
    if (!this.publishes(shard) || this.opts.activeTask(parseServiceSyncKey(key).taskId) === undefined) void this.mark(key, shard);
  }

  /**
   * The tasks whose service sync keys start with `prefix` started, changed, stopped or were removed
   * here: publishes, moves or withdraws their sets. Resolves once each of them was synced once (a
   * failure is retried later), so a caller moving a task onto a new adapter can close the old one.
   * `removed`: the tasks are gone for good, and their keys are forgotten once withdrawn.
   */
  async refresh(prefix: string, removed = false): Promise<void> {
    const keys = [...this.entries.keys()].filter((key) => key.startsWith(prefix));
    await Promise.all(keys.map((key) => this.mark(key)));
    if (!removed) return;
    // A removed task's keys are not kept for a resume: only what could not be withdrawn yet stays.
    for (const key of keys) {
      const entry = this.entries.get(key);
      if (entry && !entry.held && !this.pending.has(key) && !this.running.has(key)) this.entries.delete(key);
    }
  }

  /** How many service syncs this process keeps track of (served shards' keys, and sets still held). */
  known(): number {
    return this.entries.size;
  }

  /** How many sets this process publishes, by destination cluster. */
  held(): Map<string, number> {
    const byCluster = new Map<string, number>();
    for (const entry of this.entries.values()) {
      if (entry.held) byCluster.set(entry.held.adapter.clusterId, (byCluster.get(entry.held.adapter.clusterId) ?? 0) + 1);
    }
    return byCluster;
  }

  /** Resolves once nothing is marked or being synced (retries scheduled for later aside). */
  idle(): Promise<void> {
    if (this.pending.size === 0 && this.running.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops publishing (the process is going away: its connections close, and the registry drops its sets). */
  stop(): void {
    this.stopped = true;
    for (const entry of this.entries.values()) clearTimeout(entry.retry);
    for (const timer of this.shardRetries.values()) clearTimeout(timer);
    this.shardRetries.clear();
    for (const timer of this.lingering.values()) clearTimeout(timer);
    this.lingering.clear();
    this.pending.clear();
    for (const resolve of [...this.waiters.values()].flat()) resolve();
    this.waiters.clear();
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private async loadShard(shard: number, failures: number): Promise<void> {
    let keys: string[];
    try {
      keys = await this.opts.liveSets.keys(shard);
    } catch (err) {
      if (this.stopped || !this.served.has(shard)) return;
      const delay = this.backoff(failures);
      this.log.warn({ err, shard, retryMs: delay }, 'cannot load the live sets of a shard; retrying');
      const timer = setTimeout(() => {
        this.shardRetries.delete(shard);
        void this.loadShard(shard, failures + 1);
      }, delay);
      timer.unref();
      this.shardRetries.set(shard, timer);
      return;
    }
    if (this.stopped || !this.served.has(shard)) return;
    await forEachYielding(keys, (key) => void this.mark(key, shard));
  }

  private entry(key: string, shard = this.opts.shardOf(key)): Entry {
    let entry = this.entries.get(key);
    if (!entry) {
      entry = { key, shard, held: undefined, failures: 0, retry: undefined };
      this.entries.set(key, entry);
    }
    return entry;
  }

  /** Marks a key for a sync; resolves once a sync that started after this call ended. */
  private mark(key: string, shard?: number): Promise<void> {
    if (this.stopped) return Promise.resolve();
    const entry = this.entry(key, shard);
    clearTimeout(entry.retry);
    entry.retry = undefined;
    const done = this.waitFor(key);
    if (this.running.has(key)) this.again.add(key);
    else this.pending.add(key);
    this.pump();
    return done;
  }

  private waitFor(key: string): Promise<void> {
    return new Promise((resolve) => {
      let list = this.waiters.get(key);
      if (!list) this.waiters.set(key, (list = []));
      list.push(resolve);
    });
  }

  private pump(): void {
    while (!this.stopped && this.active < this.concurrency && this.pending.size > 0) {
      const key = this.pending.values().next().value as string;
      this.pending.delete(key);
      const entry = this.entries.get(key);
      const waiting = this.waiters.get(key) ?? [];
      this.waiters.delete(key);
      if (!entry) {
        for (const resolve of waiting) resolve();
        continue;
      }
      this.active += 1;
      this.running.add(key);
      void this.sync(entry)
        .then(
          () => (entry.failures = 0),
          (err: unknown) => this.failed(entry, err),
        )
        .finally(() => {
          this.active -= 1;
          this.running.delete(key);
          if (this.again.delete(key)) this.pending.add(key);
          else {
            waiting.push(...(this.waiters.get(key) ?? []));
            this.waiters.delete(key);
          }
          for (const resolve of waiting) resolve();
          this.pump();
          if (this.pending.size === 0 && this.running.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
        });
    }
  }

  private failed(entry: Entry, err: unknown): void {
    if (this.stopped || this.entries.get(entry.key) !== entry) return;
    const delay = this.backoff(entry.failures);
    entry.failures += 1;
    this.log.warn({ err, key: entry.key, shard: entry.shard, retryMs: delay }, 'cannot publish the copies of a service sync; retrying');
    entry.retry = setTimeout(() => {
      entry.retry = undefined;
      void this.mark(entry.key, entry.shard);
    }, delay);
    entry.retry.unref();
  }

  private backoff(failures: number): number {
    return Math.min(this.maxRetryMs, this.retryMs * 2 ** Math.min(failures, 20));
  }

  /**
   * One key's sync: what should be published (the live set, when the shard is served here, the task
   * runs here and its destination is connection-bound) against what is. A new holder publishes
   * before the old one withdraws, so that the copies never vanish in between.
   */
  private async sync(entry: Entry): Promise<void> {
    const { key, shard } = entry;
    let sync;
    try {
      sync = parseServiceSyncKey(key);
    } catch (err) {
      this.log.warn({ err, key }, 'live set of an unreadable service sync key ignored');
      this.entries.delete(key);
      return;
    }
    const task = this.publishes(shard) ? this.opts.activeTask(sync.taskId) : undefined;
    let inHash = true;
    if (task) {
      const adapter = await this.opts.adapters.get(task.destination);
      if (await connectionBound(adapter)) {
        const instances = await this.opts.liveSets.get(key, shard);
        inHash = instances.length > 0;
        if (inHash) {
          const target = mapService(sync.service, task.options.mapping);
          await adapter.publish?.(target, key, instances);
          const before = entry.held;
          entry.held = { adapter, target };
          if (before && !sameHolder(before, entry.held)) await this.withdraw(key, before);
          return;
        }
      }
    }
    if (entry.held) {
      await this.withdraw(key, entry.held);
      entry.held = undefined;
    }
    // A task that does not run here may be paused (kept) or removed (its live set is gone).
    if (!task && this.publishes(shard)) inHash = await this.opts.liveSets.has(key, shard);
    // Kept while the shard is published here and the key has a live set: a task resumed here publishes it.
    if ((!this.publishes(entry.shard) || !inHash) && !this.again.has(key)) this.entries.delete(key);
  }

  /**
   * Withdraws what `key` published through `holder`. On an adapter the pool no longer hands out (its
   * cluster's settings changed; it is being closed, and its sets go with its connection), a failure
   * is dropped rather than retried.
   */
  private async withdraw(key: string, holder: Holder): Promise<void> {
    try {
      await holder.adapter.publish?.(holder.target, key, []);
    } catch (err) {
      const current = await this.opts.adapters.get(holder.adapter.clusterId).catch(() => undefined);
      if (current === holder.adapter) throw err;
      this.log.debug({ err, key, service: serviceKeyString(holder.target) }, 'withdrawal through a replaced adapter failed; its connection closes anyway');
    }
  }
}

function sameHolder(a: Holder, b: Holder): boolean {
  return a.adapter === b.adapter && serviceKeyString(a.target) === serviceKeyString(b.target);
}

/** Calls `each` on every item, giving the event loop back every few milliseconds. */
async function forEachYielding<T>(items: readonly T[], each: (item: T) => void): Promise<void> {
  let sliceStart = performance.now();
  for (let i = 0; i < items.length; i += 1) {
    each(items[i] as T);
    if (i % 64 === 63 && performance.now() - sliceStart > SLICE_MS) {
      await nextTurn();
      sliceStart = performance.now();
    }
  }
}
