import type { Logger } from 'pino';
import { instancesDigest, type Instance, type Unsubscribe, type WatchEvent } from '../../../src/model/index.js';
import { describeService, type ServiceRef } from '../wire.js';
import type { ServiceInfoRead } from './messages.js';
import { packInstances, unpackInstances, type PackedInstances } from './packed-instances.js';
import { WatchIndex } from '../watch-index.js';
import { callWatchers, type Watcher } from '../watchers.js';

export interface SubscriptionsOptions {
  log: Logger;
  /** `SubscribeServiceRequest` (subscribe true/false); answers the service's current state. */
  subscribe: (ref: ServiceRef, subscribe: boolean) => Promise<ServiceInfoRead | undefined>;
  /** The connection's generation now and whether it is up: a cached state is served only from the live connection. */
  connection: () => { generation: number; ready: boolean };
  /** Pause before retrying a failed subscribe, doubling up to 30 s (default 1 000). */
  retryMs?: number;
}

interface Subscription {
  readonly ref: ServiceRef;
  watchers: Set<Watcher>;
  /** The last state the server sent (subscribe answer or push), packed: kept for as long as the watch. */
  instances: PackedInstances | undefined;
  digest: string | undefined;
  /** Generation of the connection that confirmed the subscription. */
  generation: number;
  /** The subscribe in flight. */
  pending: Promise<void> | undefined;
  /** A read waited for the first subscribe: its answer is that reader's, not news to the watchers. */
  claimed: boolean;
  retryTimer: NodeJS.Timeout | undefined;
  retryMs: number;
  active: boolean;
}

/**
 * The gRPC watches of one adapter: one `SubscribeServiceRequest` per watched service, however many
 * watchers, whose answer and every `NotifySubscriberRequest` after it carry the service's whole
 * instance list. Reads of a watched service are answered from that list while the connection that
 * confirmed it is up, so at rest nothing is polled or listed. Watchers are called when a push or a
 * re-subscribe after a reconnect brings a different list; the first subscribe, when no read here
 * waited for it, hands its list to the watchers (`firstRead`) for the engine to compare with what
 * the last reconcile saw. A push names group and service but not the namespace: when several
 * namespaces watch the same name, each is subscribed again to learn its own list.
 */
export class GrpcSubscriptions {
  private readonly subs = new WatchIndex<Subscription>();
  private closed = false;
  private pushes = 0;

  constructor(private readonly opts: SubscriptionsOptions) {}

  get size(): number {
    return this.subs.size;
  }

  get pushesApplied(): number {
    return this.pushes;
  }

  watch(ref: ServiceRef, onChange: (event?: WatchEvent) => void): Unsubscribe {
    if (this.closed) return () => {};
    let sub = this.subs.get(ref);
    if (!sub) {
      sub = { ref, watchers: new Set(), instances: undefined, digest: undefined, generation: 0, pending: undefined, claimed: false, retryTimer: undefined, retryMs: this.opts.retryMs ?? 1_000, active: true };
      this.subs.add(sub);
      this.start(sub);
    }
    const watcher: Watcher = { onChange };
    sub.watchers.add(watcher);
    const owner = sub;
    return () => this.unwatch(owner, watcher);
  }

  /**
   * The instances of a watched service as the live connection last heard them, waiting for the
   * subscription when it is being made; undefined when the service is not watched or the state
   * is not confirmed on the live connection (the caller then queries).
   */
  async read(ref: ServiceRef): Promise<Instance[] | undefined> {
    const sub = this.subs.get(ref);
    if (!sub || !sub.active) return undefined;
    if (sub.pending) {
      if (sub.instances === undefined) sub.claimed = true;
      await sub.pending.catch(() => undefined);
    }
    const { generation, ready } = this.opts.connection();
    if (!ready || sub.generation !== generation || sub.instances === undefined) return undefined;
    return unpackInstances(sub.instances);
  }

  /** The digest of a watched service's list as the live connection last heard it; undefined when not confirmed there. */
  digest(ref: ServiceRef): string | undefined {
    const sub = this.subs.get(ref);
    if (!sub || !sub.active || sub.pending) return undefined;
    const { generation, ready } = this.opts.connection();
    if (!ready || sub.generation !== generation) return undefined;
    return sub.digest;
  }

  /** A `NotifySubscriberRequest`'s service state. */
  pushed(info: ServiceInfoRead): void {
    const subs = this.subs.named(info.groupName ?? 'DEFAULT_GROUP', info.name).filter((s) => s.active);
    if (subs.length === 0) return;
    this.pushes += 1;
    if (subs.length === 1) {
      this.accept(subs[0] as Subscription, info.instances, this.opts.connection().generation);
      return;
    }
    for (const sub of subs) this.start(sub);
  }

  /** After a reconnect: subscribe everything again on the new connection (the server forgot it all). */
  resubscribeAll(): void {
    for (const sub of this.subs.values()) this.start(sub);
  }

  close(): void {
    this.closed = true;
    for (const sub of this.subs.values()) {
      sub.active = false;
      clearTimeout(sub.retryTimer);
    }
    this.subs.clear();
  }

  private start(sub: Subscription): void {
    if (!sub.active || this.closed) return;
    clearTimeout(sub.retryTimer);
    sub.retryTimer = undefined;
    const first = sub.instances === undefined;
    const run = this.opts
      .subscribe(sub.ref, true)
      .then((info) => {
        if (!sub.active) return;
        // An answer comes over the live connection (a reconnect fails the calls of the old one).
        sub.retryMs = this.opts.retryMs ?? 1_000;
        if (info) this.accept(sub, info.instances, this.opts.connection().generation, first && !sub.claimed);
      })
      .catch((err: unknown) => {
        if (!sub.active) return;
        this.opts.log.warn({ err, service: describeService(sub.ref), retryInMs: sub.retryMs }, 'nacos gRPC subscribe failed; retrying');
        sub.retryTimer = setTimeout(() => this.start(sub), sub.retryMs);
        sub.retryTimer.unref();
        sub.retryMs = Math.min(sub.retryMs * 2, 30_000);
      })
      .finally(() => {
        if (sub.pending === run) sub.pending = undefined;
      });
    sub.pending = run;
  }

  private accept(sub: Subscription, instances: Instance[], generation: number, firstRead = false): void {
    const digest = instancesDigest(instances);
    const changed = sub.digest !== undefined && digest !== sub.digest;
    // The same list again (a push after the subscribe, a re-subscribe): the packed copy stands.
    if (sub.instances === undefined || digest !== sub.digest) sub.instances = packInstances(instances);
    sub.digest = digest;
    sub.generation = Math.max(sub.generation, generation);
    if (firstRead) this.notify(sub, { firstRead: instances });
    else if (changed) this.notify(sub);
  }

  private notify(sub: Subscription, event?: WatchEvent): void {
    this.opts.log.debug({ service: describeService(sub.ref), watchers: sub.watchers.size }, 'nacos service changed (gRPC)');
    callWatchers(sub.watchers, event, this.opts.log, describeService(sub.ref));
  }

  private unwatch(sub: Subscription, watcher: Watcher): void {
    if (!sub.watchers.delete(watcher) || sub.watchers.size > 0) return;
    sub.active = false;
    clearTimeout(sub.retryTimer);
    this.subs.delete(sub);
    this.opts.subscribe(sub.ref, false).catch((err: unknown) => this.opts.log.debug({ err, service: describeService(sub.ref) }, 'nacos gRPC unsubscribe failed'));
  }
}
