import type { Logger } from 'pino';
import type { ServiceKey, ServicesChange, Unsubscribe } from '../../src/model/index.js';
import { parseServiceKey } from './grpc/fuzzy-pattern.js';
import type { FuzzyKeyChanges, FuzzyWatches, FuzzyWatchEvent, FuzzyWatchHandle } from './grpc/fuzzy-watches.js';
import type { ServiceScope } from './service-list-watch.js';
import { toServiceRef } from './wire.js';

/** The scope wildcard: every namespace, or every group. */
const ANY = '*';

export interface FuzzyServiceListsOptions {
  log: Logger;
  /** The connection's fuzzy watches; undefined when the cluster offers none (HTTP, Nacos 2.x). Rejects while that cannot be known yet. */
  fuzzy: () => Promise<FuzzyWatches | undefined>;
  /** Ids of every namespace (`public` for the public one), for scopes of namespace `*`. */
  listNamespaces: () => Promise<string[]>;
  /** How often a namespace `*` scope reads the namespace list again, and how soon a failed start is tried again. */
  intervalMs: number;
  /** The list-polling watch of a scope, for clusters without fuzzy watch and patterns the server refuses. */
  poll: (scope: ServiceScope, onChange: () => void) => Unsubscribe;
  /** Changes within this long after a call make one more call (default 100 ms), telling them all: a burst of new services is one call. */
  coalesceMs?: number;
}

interface ScopeSub {
  scope: ServiceScope;
  key: string;
  watchers: Set<(change?: ServicesChange) => void>;
  mode: 'starting' | 'push' | 'poll';
  /** Per namespace id, its pattern's watch. */
  patterns: Map<string, FuzzyWatchHandle>;
  /** False while the namespace list of a `*` scope is not known (never read, or its last read failed). */
  namespacesKnown: boolean;
  fuzzy: FuzzyWatches | undefined;
  stopPoll: Unsubscribe | undefined;
  timer: NodeJS.Timeout | undefined;
  coalesce: NodeJS.Timeout | undefined;
  /**
   * What came during the coalescing window, for the call at its end: per service key, whether the
   * pushed set holds it now (the last change of the window wins); `unknown` when anything else
   * happened (the watchers then list again).
   */
  pending: Map<string, boolean> | 'unknown' | undefined;
  failing: boolean;
  active: boolean;
}

/**
 * The service-list watches of one adapter (`watchServices`) where Nacos pushes them: fuzzy watch
 * (Nacos 3.x over gRPC), one pattern `<namespace>>><group or *>>>*` per namespace of the scope
 * (the namespace part of a pattern takes no wildcard, so a namespace `*` scope holds one per
 * namespace, and reads the namespace list again every `intervalMs` to find new ones). Watchers are
 * called when a pattern's services change, with the services that came and went
 * ({@link ServicesChange}), and with nothing (list again) when anything else may have changed the
 * scope's list: a pattern complete again (first, or after a reconnect), a namespace gone, the fall
 * back to polling, and every poll. Calls are coalesced over `coalesceMs`: the call at the end of a
 * window tells what the window's changes came to, or nothing if one of them told nothing.
 *
 * While every pattern of a scope is complete (see {@link FuzzyWatchHandle.keys}), {@link list}
 * answers the scope from the pushed keys, with no request; otherwise it answers undefined and the
 * adapter lists as before, so a list is always whole or an error. Where the cluster offers no fuzzy
 * watch, or the server refuses a pattern (its limits), the scope falls back to `poll` for as long as
 * it is watched.
 */
export class FuzzyServiceLists {
  private readonly subs = new Map<string, ScopeSub>();
  private closed = false;

  constructor(private readonly options: FuzzyServiceListsOptions) {}

  /** Scopes watched by push now. */
  get pushed(): number {
    let n = 0;
    for (const sub of this.subs.values()) if (sub.mode === 'push') n += 1;
    return n;
  }

  watch(scope: ServiceScope, onChange: (change?: ServicesChange) => void): Unsubscribe {
    if (this.closed) return () => {};
    const key = scopeKey(scope);
    let sub = this.subs.get(key);
    if (!sub) {
      sub = {
        scope: { namespace: scope.namespace, group: scope.group },
        key,
        watchers: new Set(),
        mode: 'starting',
        patterns: new Map(),
        namespacesKnown: scope.namespace !== ANY,
        fuzzy: undefined,
        stopPoll: undefined,
        timer: undefined,
        coalesce: undefined,
        pending: undefined,
        failing: false,
        active: true,
      };
      this.subs.set(key, sub);
      void this.start(sub);
    }
    const watcher = (change?: ServicesChange) => onChange(change);
    sub.watchers.add(watcher);
    const owner = sub;
    return () => this.unwatch(owner, watcher);
  }

  /** Whether every pattern of the scope holds its complete pushed set (then {@link list} answers). */
  complete(scope: ServiceScope): boolean {
    return this.pushedSets(scope) !== undefined;
  }

  /** The scope's services from the pushed keys while they are complete, else undefined (list it another way). */
  list(scope: ServiceScope): ServiceKey[] | undefined {
    const sets = this.pushedSets(scope);
    if (!sets) return undefined;
    const out: ServiceKey[] = [];
    for (const keys of sets) {
      for (const key of keys) {
        const service = serviceOf(scope, key);
        if (service) out.push(service);
      }
    }
    return out;
  }

  private pushedSets(scope: ServiceScope): Array<ReadonlySet<string>> | undefined {
    const sub = this.subs.get(scopeKey(scope));
    if (!sub || sub.mode !== 'push' || !sub.namespacesKnown) return undefined;
    const sets: Array<ReadonlySet<string>> = [];
    for (const handle of sub.patterns.values()) {
      const keys = handle.keys();
      if (!keys) return undefined;
      sets.push(keys);
    }
    return sets;
  }

  close(): void {
    this.closed = true;
    for (const sub of this.subs.values()) this.deactivate(sub);
    this.subs.clear();
  }

  private async start(sub: ScopeSub): Promise<void> {
    let fuzzy: FuzzyWatches | undefined;
    try {
      fuzzy = await this.options.fuzzy();
    } catch (err) {
      if (!sub.active) return;
      this.options.log.debug({ err, scope: describe(sub.scope) }, 'nacos not reachable yet; the service-list watch starts once it answers');
      this.later(sub, () => void this.start(sub));
      return;
    }
    if (!sub.active) return;
    if (!fuzzy) {
      this.toPoll(sub);
      return;
    }
    sub.fuzzy = fuzzy;
    sub.mode = 'push';
    if (sub.scope.namespace !== ANY) {
      this.addPattern(sub, toServiceRef({ namespace: sub.scope.namespace, group: sub.scope.group === ANY ? 'x' : sub.scope.group, name: '' }).namespaceId);
      return;
    }
    await this.readNamespaces(sub);
  }

  /** Reads the namespace list of a `*` scope: a pattern for every new namespace, none for a namespace gone. */
  private async readNamespaces(sub: ScopeSub): Promise<void> {
    const { log } = this.options;
    try {
      const namespaces = new Set(await this.options.listNamespaces());
      if (!sub.active || sub.mode !== 'push') return;
      let changed = !sub.namespacesKnown;
      for (const ns of namespaces) if (!sub.patterns.has(ns)) this.addPattern(sub, ns);
      for (const [ns, handle] of sub.patterns) {
        if (namespaces.has(ns)) continue;
        handle.stop();
        sub.patterns.delete(ns);
        changed = true;
      }
      if (sub.failing) log.info({ scope: describe(sub.scope) }, 'nacos namespace list reads again');
      sub.failing = false;
      sub.namespacesKnown = true;
      if (changed) this.notify(sub);
    } catch (err) {
      if (!sub.active) return;
      if (!sub.failing) log.warn({ err, scope: describe(sub.scope) }, 'nacos namespace list failed; the scope is listed by request until it reads again');
      sub.failing = true;
      sub.namespacesKnown = false;
    }
    if (sub.active && sub.mode === 'push') this.later(sub, () => void this.readNamespaces(sub));
  }

  private addPattern(sub: ScopeSub, namespaceId: string): void {
    if (sub.mode !== 'push') return;
    const fuzzy = sub.fuzzy as FuzzyWatches;
    const group = sub.scope.group === ANY ? ANY : toServiceRef({ namespace: namespaceId, group: sub.scope.group, name: '' }).group;
    const handle = fuzzy.watch(namespaceId, group, (event, changes) => this.patternEvent(sub, event, changes));
    sub.patterns.set(namespaceId, handle);
    // A pattern another scope watched already can be refused before any event reaches this one.
    if (handle.refused()) this.toPoll(sub);
  }

  private patternEvent(sub: ScopeSub, event: FuzzyWatchEvent, changes: FuzzyKeyChanges | undefined): void {
    if (!sub.active || sub.mode !== 'push') return;
    if (event === 'refused') {
      this.toPoll(sub);
      return;
    }
    if (event === 'changed') this.notify(sub, changes);
    // Complete again: what changed meanwhile is not known key by key.
    else if ([...sub.patterns.values()].every((h) => h.ready())) this.notify(sub);
  }

  /** From push to list polling, for as long as the scope is watched. */
  private toPoll(sub: ScopeSub): void {
    if (!sub.active || sub.mode === 'poll') return;
    const wasPush = sub.mode === 'push';
    for (const handle of sub.patterns.values()) handle.stop();
    sub.patterns.clear();
    clearTimeout(sub.timer);
    sub.timer = undefined;
    sub.mode = 'poll';
    sub.stopPoll = this.options.poll(sub.scope, () => this.callWatchers(sub));
    // What the pushes told may be out of date: the watchers list again.
    if (wasPush) this.notify(sub);
  }

  private later(sub: ScopeSub, run: () => void): void {
    clearTimeout(sub.timer);
    sub.timer = setTimeout(() => {
      sub.timer = undefined;
      if (sub.active) run();
    }, this.options.intervalMs);
    sub.timer.unref();
  }

  /**
   * Calls the watchers now (with `changes`, the keys that came and went, or with nothing: list
   * again), and once more at the end of the window with what the changes that came meanwhile add up to.
   */
  private notify(sub: ScopeSub, changes?: FuzzyKeyChanges): void {
    if (sub.coalesce) {
      sub.pending = mergeChanges(sub.pending, changes);
      return;
    }
    this.callWatchers(sub, changes && servicesChange(sub.scope, changes));
    sub.coalesce = setTimeout(() => {
      sub.coalesce = undefined;
      const pending = sub.pending;
      sub.pending = undefined;
      if (pending === undefined || !sub.active) return;
      this.notify(sub, pending === 'unknown' ? undefined : pending);
    }, this.options.coalesceMs ?? 100);
    sub.coalesce.unref();
  }

  private callWatchers(sub: ScopeSub, change?: ServicesChange): void {
    for (const watcher of [...sub.watchers]) {
      if (!sub.active) return;
      if (!sub.watchers.has(watcher)) continue;
      try {
        watcher(change);
      } catch (err) {
        this.options.log.error({ err }, 'a watcher of a nacos service list threw');
      }
    }
  }

  private unwatch(sub: ScopeSub, watcher: (change?: ServicesChange) => void): void {
    if (!sub.watchers.delete(watcher) || sub.watchers.size > 0) return;
    this.deactivate(sub);
    if (this.subs.get(sub.key) === sub) this.subs.delete(sub.key);
  }

  private deactivate(sub: ScopeSub): void {
    sub.active = false;
    clearTimeout(sub.timer);
    clearTimeout(sub.coalesce);
    for (const handle of sub.patterns.values()) handle.stop();
    sub.patterns.clear();
    sub.stopPoll?.();
    sub.stopPoll = undefined;
  }
}

/** A pushed service key as `listServices` of the scope answers it: the scope's own namespace and group, the key's under a `*`. */
function serviceOf(scope: ServiceScope, key: string): ServiceKey | undefined {
  const parts = parseServiceKey(key);
  if (!parts) return undefined;
  return {
    namespace: scope.namespace === ANY ? parts.namespace : scope.namespace,
    group: scope.group === ANY ? parts.group : scope.group,
    name: parts.name,
  };
}

/** The services a window's key changes name, split by whether they ended added or removed. */
function servicesChange(scope: ServiceScope, changes: FuzzyKeyChanges): ServicesChange {
  const change: ServicesChange = { added: [], removed: [] };
  for (const [key, present] of changes) {
    const service = serviceOf(scope, key);
    if (service) (present ? change.added : change.removed).push(service);
  }
  return change;
}

/** What is pending after one more change in the window: its keys over the pending ones, or `unknown` once either tells nothing. */
function mergeChanges(pending: Map<string, boolean> | 'unknown' | undefined, changes: FuzzyKeyChanges | undefined): Map<string, boolean> | 'unknown' {
  if (pending === 'unknown' || changes === undefined) return 'unknown';
  const merged = pending ?? new Map<string, boolean>();
  for (const [key, present] of changes) merged.set(key, present);
  return merged;
}

function scopeKey(scope: ServiceScope): string {
  return `${scope.namespace}\n${scope.group}`;
}

function describe(scope: ServiceScope): string {
  return `${scope.namespace}/${scope.group}`;
}
