import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import type { ServiceKey, Unsubscribe } from '../../src/model/index.js';

/** A `listServices` scope: a namespace and a group, either of which may be `*`. */
export interface ServiceScope {
  namespace: string;
  group: string;
}

export interface ServiceListWatchOptions {
  /** How often each watched scope is listed. */
  intervalMs: number;
  log: Logger;
  /** Lists a scope (the adapter's `listServices`, every namespace and page it covers). */
  list: (scope: ServiceScope) => Promise<ServiceKey[]>;
  /** Random number in [0, 1) for poll jitter; injectable for tests. */
  random?: () => number;
}

interface Subscription {
  scope: ServiceScope;
  key: string;
  watchers: Set<() => void>;
  timer: NodeJS.Timeout | undefined;
  failing: boolean;
  active: boolean;
}

/**
 * The service-list watches of one adapter (`watchServices`). Nacos' HTTP APIs push nothing about
 * services coming or going, so each watched scope (`*` namespaces and groups included) is listed
 * every `intervalMs` (±10% jitter), one poll per scope however many watchers it has, and the watchers
 * are called when the list differs from the last one seen here: the last poll, or the last
 * `listServices` of that scope (see {@link observed}), so that the list a caller has just read is
 * not reported to it again. The first poll of a scope nobody listed here only records what it saw.
 *
 * A watch never throws: a failing poll is logged (once per outage) and retried at the next interval
 * without calling anyone (the engine's full sync reports the error); the first poll that works
 * again calls the watchers if the list changed meanwhile. Deliberately left out: telling watchers
 * which services changed (they re-list).
 */
export class ServiceListWatch {
  private readonly subscriptions = new Map<string, Subscription>();
  /** Digest of the last list seen per scope (a poll or a caller's list). */
  private readonly seen = new Map<string, string>();
  private closed = false;

  constructor(private readonly options: ServiceListWatchOptions) {}

  /** Scopes watched now. */
  get size(): number {
    return this.subscriptions.size;
  }

  watch(scope: ServiceScope, onChange: () => void): Unsubscribe {
    if (this.closed) return () => {};
    const key = scopeKey(scope);
    let sub = this.subscriptions.get(key);
    if (!sub) {
      sub = { scope: { namespace: scope.namespace, group: scope.group }, key, watchers: new Set(), timer: undefined, failing: false, active: true };
      this.subscriptions.set(key, sub);
      this.schedule(sub);
    }
    // One entry per call, so that watching twice with the same function needs two unwatches.
    const watcher = () => onChange();
    sub.watchers.add(watcher);
    const owner = sub;
    return () => this.unwatch(owner, watcher);
  }

  /** A caller listed `scope` and got `services`: the next poll compares with this. */
  observed(scope: ServiceScope, services: readonly ServiceKey[]): void {
    if (this.closed) return;
    this.seen.set(scopeKey(scope), servicesDigest(services));
  }

  close(): void {
    this.closed = true;
    for (const sub of this.subscriptions.values()) this.deactivate(sub);
    this.subscriptions.clear();
    this.seen.clear();
  }

  private unwatch(sub: Subscription, watcher: () => void): void {
    if (!sub.watchers.delete(watcher) || sub.watchers.size > 0) return;
    this.deactivate(sub);
    if (this.subscriptions.get(sub.key) === sub) {
      this.subscriptions.delete(sub.key);
      this.seen.delete(sub.key);
    }
  }

  private deactivate(sub: Subscription): void {
    sub.active = false;
    if (sub.timer) clearTimeout(sub.timer);
    sub.timer = undefined;
  }

  private schedule(sub: Subscription): void {
    if (!sub.active) return;
    const random = this.options.random ?? Math.random;
    sub.timer = setTimeout(() => void this.poll(sub), Math.round(this.options.intervalMs * (0.9 + 0.2 * random())));
    sub.timer.unref();
  }

  private async poll(sub: Subscription): Promise<void> {
    sub.timer = undefined;
    if (!sub.active) return;
    const { log } = this.options;
    const scope = `${sub.scope.namespace}/${sub.scope.group}`;
    try {
      const services = await this.options.list(sub.scope);
      if (!sub.active) return;
      const digest = servicesDigest(services);
      const before = this.seen.get(sub.key);
      this.seen.set(sub.key, digest);
      if (sub.failing) log.info({ scope }, 'nacos service list reads again');
      sub.failing = false;
      if (before !== undefined && before !== digest) this.notify(sub, services.length);
    } catch (err) {
      if (!sub.active) return;
      if (sub.failing) log.debug({ err, scope }, 'nacos service list poll failed again');
      else log.warn({ err, scope }, 'nacos service list poll failed; retrying at the next interval');
      sub.failing = true;
    } finally {
      this.schedule(sub);
    }
  }

  private notify(sub: Subscription, services: number): void {
    this.options.log.debug({ scope: `${sub.scope.namespace}/${sub.scope.group}`, services, watchers: sub.watchers.size }, 'nacos service list changed');
    for (const watcher of [...sub.watchers]) {
      if (!sub.active) return;
      // A watcher removed by an earlier one in this loop is not called any more.
      if (!sub.watchers.has(watcher)) continue;
      try {
        watcher();
      } catch (err) {
        this.options.log.error({ err }, 'a watcher of a nacos service list threw');
      }
    }
  }
}

function scopeKey(scope: ServiceScope): string {
  return `${scope.namespace}\n${scope.group}`;
}

/** Order-independent fingerprint of a service list. */
function servicesDigest(services: readonly ServiceKey[]): string {
  const lines = services.map((s) => `${s.namespace}\u0000${s.group}\u0000${s.name}`).sort();
  const hash = createHash('sha256');
  for (const line of lines) hash.update(line).update('\n');
  return hash.digest('base64');
}
