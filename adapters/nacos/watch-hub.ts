import type { Logger } from 'pino';
import { instancesDigest, type Instance, type Unsubscribe, type WatchEvent, type WatchOptions } from '../../src/model/index.js';
import { describeService, GROUP_SEPARATOR, type ServiceRef } from './wire.js';
import { WatchIndex } from './watch-index.js';
import { callWatchers, type Watcher } from './watchers.js';

export interface WatchHubOptions {
  pollIntervalMs: number;
  log: Logger;
  /** Reads a watched service; for v1 this list also (re)subscribes to push. */
  list: (ref: ServiceRef) => Promise<Instance[]>;
  /** Random number in [0, 1) for poll jitter; injectable for tests. */
  random?: () => number;
  /**
   * The first poll of a new watch comes after a random delay between half of this and all of it
   * (default `pollIntervalMs`), or between this and twice this when a read follows in this process
   * (`readFollows`). Callers watch and then read (the engine queues a reconcile with every watch),
   * and such a read subscribes in the first poll's place (see {@link observed}), so the first poll
   * is the fallback for a read that does not come here (the reconcile ran in another process).
   * When every read comes here, the reads of thousands of services watched at once (a `*` task
   * starting) queue up for seconds, and a first poll due before them would read each service
   * twice, and add work (comparing, queueing) while the machine is busiest.
   */
  firstPollDelayMs?: number;
}

interface Subscription {
  readonly ref: ServiceRef;
  watchers: Set<Watcher>;
  timer: NodeJS.Timeout | undefined;
  /** Fingerprint of the last instances seen (a poll, or a caller's first read); undefined before the first read. */
  fingerprint: string | undefined;
  /** A caller's first read, kept until the first poll fingerprints it (most reads are never compared to anything). */
  baseline: readonly Instance[] | undefined;
  /** The last poll failed. */
  failing: boolean;
  active: boolean;
  /** The first poll has not started yet. */
  awaitingFirstPoll: boolean;
}

/**
 * The watches of one adapter: one subscription per service however many watchers it has, each
 * polled every `pollIntervalMs` (with ±10% jitter so that thousands of services spread out), and
 * told about pushes. A watcher is called when a poll finds instances that differ from the last ones
 * seen, so an outage that changed nothing wakes nobody when it ends, while one that did is noticed at
 * the first poll that works; and at once on every push for the service (a push is not decoded: it
 * only says "read again", and the readers de-duplicate). A push does not move the baseline, so a
 * later poll that still differs from it calls the watchers once more (harmless: level-triggered
 * readers), and a change whose push was lost is still noticed. The first read of the service (see
 * {@link observed}) subscribes to push and records what is there (callers read after they watch);
 * the first poll, half to one `firstPollDelayMs` after the watch (one to two when a read follows
 * here), subscribes when no read came
 * first, and then calls the watchers with what it read (`firstRead`): without a read here, only
 * they can tell whether it is what the last reconcile saw.
 *
 * A watch never throws: poll failures are logged (once per outage, then quietly) and retried at the
 * next interval; a throwing watcher is logged and does not disturb the others.
 */
export class WatchHub {
  /** By group and name: a push does not say which namespace it is about. */
  private readonly subscriptions = new WatchIndex<Subscription>();
  private closed = false;

  constructor(private readonly options: WatchHubOptions) {}

  /** Services watched now. */
  get size(): number {
    return this.subscriptions.size;
  }

  watch(ref: ServiceRef, onChange: (event?: WatchEvent) => void, options: WatchOptions = {}): Unsubscribe {
    if (this.closed) return () => {};
    let sub = this.subscriptions.get(ref);
    if (!sub) {
      sub = { ref, watchers: new Set(), timer: undefined, fingerprint: undefined, baseline: undefined, failing: false, active: true, awaitingFirstPoll: true };
      this.subscriptions.add(sub);
      const random = this.options.random ?? Math.random;
      const span = this.options.firstPollDelayMs ?? this.options.pollIntervalMs;
      this.schedule(sub, Math.floor(span * (options.readFollows ? 1 + random() : 0.5 + 0.5 * random())));
    }
    const watcher: Watcher = { onChange };
    sub.watchers.add(watcher);
    const owner = sub;
    return () => this.unwatch(owner, watcher);
  }

  /**
   * A push says service `grouped` changed, in one of the namespaces that watch it: every such
   * subscription is told (no instances are decoded or compared on this path).
   */
  pushed(grouped: string): void {
    const at = grouped.indexOf(GROUP_SEPARATOR);
    if (at < 0) return;
    for (const sub of this.subscriptions.named(grouped.slice(0, at), grouped.slice(at + GROUP_SEPARATOR.length))) this.notify(sub, 'push');
  }

  /**
   * Whether a read of `ref` should subscribe to push on the way: the service is watched and its
   * first poll (which would subscribe) has not started. Such a read stands in for that poll.
   */
  wantsSubscription(ref: ServiceRef): boolean {
    const sub = this.subscriptions.get(ref);
    return sub !== undefined && sub.active && sub.awaitingFirstPoll;
  }

  /**
   * Someone read a watched service (the engine's reconcile). Before the subscription's first poll
   * this read becomes its baseline, so that a change between this read and the (delayed) first poll
   * is noticed by that poll. When the read also subscribed to push (`subscribed`), it was the first
   * poll's work: the next poll comes a whole interval later. Later reads change nothing.
   */
  observed(ref: ServiceRef, instances: readonly Instance[], subscribed = false): void {
    const sub = this.subscriptions.get(ref);
    if (!sub || !sub.active) return;
    if (sub.fingerprint === undefined) sub.baseline ??= instances;
    if (subscribed && sub.awaitingFirstPoll) {
      this.firstPollStarted(sub);
      if (sub.timer) clearTimeout(sub.timer);
      const random = this.options.random ?? Math.random;
      this.schedule(sub, Math.round(this.options.pollIntervalMs * (0.9 + 0.2 * random())));
    }
  }

  close(): void {
    this.closed = true;
    for (const sub of this.subscriptions.values()) this.deactivate(sub);
    this.subscriptions.clear();
  }

  private unwatch(sub: Subscription, watcher: Watcher): void {
    if (!sub.watchers.delete(watcher) || sub.watchers.size > 0) return;
    this.deactivate(sub);
    this.subscriptions.delete(sub);
  }

  private deactivate(sub: Subscription): void {
    this.firstPollStarted(sub);
    sub.active = false;
    if (sub.timer) clearTimeout(sub.timer);
    sub.timer = undefined;
  }

  private schedule(sub: Subscription, delayMs: number): void {
    if (!sub.active) return;
    sub.timer = setTimeout(() => void this.poll(sub), delayMs);
    sub.timer.unref();
  }

  private firstPollStarted(sub: Subscription): void {
    sub.awaitingFirstPoll = false;
  }

  private async poll(sub: Subscription): Promise<void> {
    sub.timer = undefined;
    this.firstPollStarted(sub);
    if (!sub.active) return;
    const { log } = this.options;
    try {
      const instances = await this.options.list(sub.ref);
      if (!sub.active) return;
      const fingerprint = instancesDigest(instances);
      if (sub.fingerprint === undefined && sub.baseline !== undefined) sub.fingerprint = instancesDigest(sub.baseline);
      sub.baseline = undefined;
      // No read here since the watch began (the service may be reconciled by another process, with
      // what it saw unknown here): the first poll hands its read to the watchers to compare.
      const unknown = sub.fingerprint === undefined;
      const changed = unknown || fingerprint !== sub.fingerprint;
      if (sub.failing) log.info({ service: describeService(sub.ref) }, 'nacos watch reads again');
      sub.fingerprint = fingerprint;
      sub.failing = false;
      if (changed) this.notify(sub, 'poll', unknown ? { firstRead: instances } : undefined);
    } catch (err) {
      if (!sub.active) return;
      if (sub.failing) log.debug({ err, service: describeService(sub.ref) }, 'nacos watch poll failed again');
      else log.warn({ err, service: describeService(sub.ref) }, 'nacos watch poll failed; retrying at the next interval');
      sub.failing = true;
    } finally {
      const random = this.options.random ?? Math.random;
      this.schedule(sub, Math.round(this.options.pollIntervalMs * (0.9 + 0.2 * random())));
    }
  }

  private notify(sub: Subscription, via: 'push' | 'poll', event?: WatchEvent): void {
    if (!sub.active) return;
    this.options.log.debug({ service: describeService(sub.ref), via, watchers: sub.watchers.size }, 'nacos service changed');
    callWatchers(sub.watchers, event, this.options.log, describeService(sub.ref));
  }
}
