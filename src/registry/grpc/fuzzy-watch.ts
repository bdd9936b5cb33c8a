import type { Logger } from 'pino';
import { fuzzyServiceKey, parseFuzzyPattern, patternMatches, type FuzzyPattern } from '../../../adapters/nacos/grpc/fuzzy-pattern.js';
import { FUZZY_CHANGE, FUZZY_LIMIT, FUZZY_SYNC_TYPE, isOk, SERVER_REQUEST } from '../../../adapters/nacos/grpc/messages.js';
import { GROUP_SEPARATOR, PUBLIC_NAMESPACE, type NamingStore, type ServiceChange } from '../naming-store.js';
import type { GrpcConnection } from './connection.js';
import { GrpcRequestError } from './grpc-request-error.js';
import { ServerRequestError } from './server-request-error.js';

/** Limits and push timings of fuzzy watch. */
export interface FuzzyWatchOptions {
  /** Distinct patterns the registry holds over all connections (Nacos `nacos.naming.fuzzy.watch.max.pattern.count`, 20). */
  maxPatterns: number;
  /** Services one pattern's matched set holds at most (Nacos `nacos.naming.fuzzy.watch.max.pattern.match.service.count`, 500). */
  maxServices: number;
  /** Change notifies of one service to one connection within this window are sent once, the last change winning. */
  mergeWindowMs: number;
  ackTimeoutMs: number;
  retryDelayMs: number;
  /** Attempts per server request, the first included; then it is given up (the client's next WATCH repairs it). */
  maxAttempts: number;
}

export const DEFAULT_FUZZY_LIMITS = { maxPatterns: 20, maxServices: 500 } as const;

/** Contexts per `NamingFuzzyWatchSyncRequest` (Nacos `BATCH_SIZE`). */
export const SYNC_BATCH_SIZE = 10;

/** Server requests in flight per connection at most; the rest wait their turn. */
const MAX_IN_FLIGHT = 128;

/** Counters, for tests and metrics. */
export interface FuzzyWatchStats {
  patterns: number;
  /** Connection-pattern pairs. */
  watches: number;
  syncsSent: number;
  changesSent: number;
  failed: number;
}

interface PatternState {
  text: string;
  parsed: FuzzyPattern;
  matched: Set<string>;
  watchers: Map<string, GrpcConnection>;
  /** Settles once the first scan of the namespace is done. */
  filled: Promise<void>;
}

/** Services scanned per event-loop turn when a new pattern builds its matched set. */
const SCAN_SLICE = 5_000;

interface Outgoing {
  type: string;
  fields: Record<string, unknown>;
  attempt: number;
  /** Called once the client answered with success. */
  acked?: () => void;
}

/** Requests made one at a time as the connection takes them: a sync of 100,000 keys is not built at once. */
interface Job {
  next(): Outgoing | undefined;
}

/** What one connection has waiting: change notifies being merged, jobs queued, requests in flight. */
interface Outbox {
  connection: GrpcConnection;
  changes: Map<string, string>;
  timer: NodeJS.Timeout | undefined;
  queue: Job[];
  inFlight: number;
}

/**
 * Nacos 3.x fuzzy watch, served to gRPC connections (`NamingFuzzyWatchRequest`): which services
 * exist, per pattern `<namespace>>><groupPattern>>><servicePattern>`, without instance data.
 *
 * As Nacos keeps it: a matched set per distinct pattern, built by scanning the pattern's namespace
 * the first time the pattern is watched (empty services not yet cleaned up included) and capped at
 * `maxServices`; the connections watching each pattern; a WATCH answered with the diff of the
 * matched set against the client's `receivedGroupKeys` in batches of 10 (INIT when the client is
 * initializing, then FINISH once every batch is acked; DIFF otherwise, nothing when equal; at the
 * cap DELETE entries are left out, the set being incomplete); a service's first instance (ADD_SERVICE)
 * or last (DELETE_SERVICE) changing the matched sets of its namespace's patterns and notifying every
 * connection whose pattern matches. At the cap a new service is neither added nor notified, and a
 * deleted one makes the pattern rescan its namespace to refill. State is per connection and goes
 * with it. Patterns are indexed by namespace, so a service's change is matched only against the
 * patterns of its own namespace.
 *
 * Deliberately unlike Nacos: sync batches and FINISH go out at once rather than after 1 s and
 * 0.5 s; a pattern nobody watches any more frees its slot at once (Nacos trims every 30 s); a
 * pattern without two `>>` is refused with 400 (Nacos would fail while matching); a request not
 * acked after `maxAttempts` is given up rather than queued again forever.
 */
export class FuzzyWatchHub {
  private readonly patterns = new Map<string, PatternState>();
  private readonly byNamespace = new Map<string, Map<string, PatternState>>();
  private readonly byConnection = new Map<string, Set<string>>();
  private readonly outboxes = new Map<string, Outbox>();
  private readonly retries = new Set<NodeJS.Timeout>();
  private readonly counters = { syncsSent: 0, changesSent: 0, failed: 0 };
  private readonly onPopulated = (change: ServiceChange) => this.serviceChanged(change, FUZZY_CHANGE.add);
  private readonly onEmptied = (change: ServiceChange) => this.serviceChanged(change, FUZZY_CHANGE.remove);
  private closed = false;

  constructor(
    private readonly store: NamingStore,
    private readonly options: FuzzyWatchOptions,
    private readonly log: Logger,
    private readonly onDeadConnection: (connection: GrpcConnection) => void,
  ) {}

  start(): void {
    this.store.on('populated', this.onPopulated);
    this.store.on('emptied', this.onEmptied);
  }

  close(): void {
    this.closed = true;
    this.store.off('populated', this.onPopulated);
    this.store.off('emptied', this.onEmptied);
    for (const box of this.outboxes.values()) clearTimeout(box.timer);
    this.outboxes.clear();
    for (const t of this.retries) clearTimeout(t);
    this.retries.clear();
  }

  /**
   * WATCH: adds the connection to the pattern (creating the pattern and its matched set when new)
   * and sends the sync. Throws {@link GrpcRequestError} 50310 when the pattern is new and the
   * registry holds `maxPatterns` already (nothing changes), 50311 when the matched set is at its cap
   * (the watch stays and the capped sync goes out, as Nacos does), 400 for a malformed pattern.
   * A new pattern scans its namespace a slice per event-loop turn before the sync is made.
   */
  async watch(connection: GrpcConnection, text: string, receivedKeys: readonly string[], initializing: boolean): Promise<void> {
    let state = this.patterns.get(text);
    if (!state) {
      const parsed = parseFuzzyPattern(text);
      if (!parsed) throw new GrpcRequestError(400, `groupKeyPattern ${JSON.stringify(text)} is not <namespace>>><groupPattern>>><servicePattern>`);
      if (this.patterns.size >= this.options.maxPatterns) {
        this.log.warn({ pattern: text, patterns: this.patterns.size }, 'fuzzy watch refused: pattern count at its limit');
        throw new GrpcRequestError(FUZZY_LIMIT.patterns.code, FUZZY_LIMIT.patterns.message);
      }
      const created: PatternState = { text, parsed, matched: new Set(), watchers: new Map(), filled: Promise.resolve() };
      // Changes while the scan runs apply to the set as they come (see serviceChanged); the scan adds the rest.
      created.filled = this.fillInSlices(created);
      state = created;
      this.patterns.set(text, state);
      let inNamespace = this.byNamespace.get(parsed.namespace);
      if (!inNamespace) {
        inNamespace = new Map();
        this.byNamespace.set(parsed.namespace, inNamespace);
      }
      inNamespace.set(text, state);
    }
    await state.filled;
    if (this.closed) return;
    if (!connection.isOpen) {
      // Gone while the scan ran: a pattern nobody came to watch frees its slot.
      if (state.watchers.size === 0) this.forget(state);
      return;
    }
    if (this.patterns.get(text) !== state) {
      // Every other watcher left while this one waited for the scan: watch it anew.
      await this.watch(connection, text, receivedKeys, initializing);
      return;
    }
    state.watchers.set(connection.id, connection);
    let watched = this.byConnection.get(connection.id);
    if (!watched) {
      watched = new Set();
      this.byConnection.set(connection.id, watched);
    }
    watched.add(text);
    this.sync(connection, state, receivedKeys, initializing);
    if (this.atCap(state)) throw new GrpcRequestError(FUZZY_LIMIT.services.code, FUZZY_LIMIT.services.message);
  }

  /** CANCEL_WATCH: removes the connection from the pattern; always succeeds. */
  cancel(connection: GrpcConnection, text: string): void {
    this.unwatch(connection.id, text);
  }

  /** Forgets a connection that is gone: its watches and what was waiting to be sent to it. */
  dropConnection(connection: GrpcConnection): void {
    for (const text of [...(this.byConnection.get(connection.id) ?? [])]) this.unwatch(connection.id, text);
    const box = this.outboxes.get(connection.id);
    if (box) clearTimeout(box.timer);
    this.outboxes.delete(connection.id);
  }

  stats(): FuzzyWatchStats {
    let watches = 0;
    for (const state of this.patterns.values()) watches += state.watchers.size;
    return { patterns: this.patterns.size, watches, ...this.counters };
  }

  private unwatch(connectionId: string, text: string): void {
    const state = this.patterns.get(text);
    state?.watchers.delete(connectionId);
    const watched = this.byConnection.get(connectionId);
    watched?.delete(text);
    if (watched?.size === 0) this.byConnection.delete(connectionId);
    if (!state || state.watchers.size > 0) return;
    this.forget(state);
  }

  private forget(state: PatternState): void {
    if (this.patterns.get(state.text) !== state) return;
    this.patterns.delete(state.text);
    const inNamespace = this.byNamespace.get(state.parsed.namespace);
    inNamespace?.delete(state.text);
    if (inNamespace?.size === 0) this.byNamespace.delete(state.parsed.namespace);
  }

  private atCap(state: PatternState): boolean {
    return state.matched.size >= this.options.maxServices;
  }

  /** {@link fill} for a new pattern, a slice of the namespace per event-loop turn. */
  private async fillInSlices(state: PatternState): Promise<void> {
    const { namespace } = state.parsed;
    for (const namespaceId of namespace === PUBLIC_NAMESPACE ? [namespace, ''] : [namespace]) {
      let scanned = 0;
      for (const service of this.store.servicesOf(namespaceId)) {
        if (this.atCap(state)) return;
        if (patternMatches(state.parsed, service.namespaceId, service.groupName, service.name)) {
          state.matched.add(fuzzyServiceKey(service.namespaceId, service.groupName, service.name));
        }
        scanned += 1;
        if (scanned % SCAN_SLICE === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      }
    }
  }

  /** Adds the namespace's matching services to the set, up to the cap (one pass over the namespace). */
  private fill(state: PatternState): void {
    const { namespace } = state.parsed;
    const scan = (namespaceId: string) => {
      for (const service of this.store.servicesOf(namespaceId)) {
        if (this.atCap(state)) return;
        if (patternMatches(state.parsed, service.namespaceId, service.groupName, service.name)) {
          state.matched.add(fuzzyServiceKey(service.namespaceId, service.groupName, service.name));
        }
      }
    };
    scan(namespace);
    // A service's blank namespace counts as public.
    if (namespace === PUBLIC_NAMESPACE) scan('');
  }

  /**
   * The diff of the matched set against what the client holds, in batches made as the connection
   * takes them (the keys are copied now, the requests built later); FINISH after an INIT.
   */
  private sync(connection: GrpcConnection, state: PatternState, receivedKeys: readonly string[], initializing: boolean): void {
    const received = new Set(receivedKeys);
    const adds: string[] = [];
    for (const key of state.matched) if (!received.has(key)) adds.push(key);
    const removes: string[] = [];
    // At the cap the matched set may be incomplete: a key it lacks is not known to be gone.
    if (!this.atCap(state)) for (const key of received) if (!state.matched.has(key)) removes.push(key);
    const syncType = initializing ? FUZZY_SYNC_TYPE.init : FUZZY_SYNC_TYPE.diff;
    const groupKeyPattern = state.text;
    const finish = () => this.enqueue(connection, SERVER_REQUEST.fuzzyWatchSync, { syncType: FUZZY_SYNC_TYPE.finish, groupKeyPattern, contexts: [], totalBatch: 1, currentBatch: 1 });
    const total = adds.length + removes.length;
    if (total === 0) {
      if (initializing) finish();
      return;
    }
    const totalBatch = Math.ceil(total / SYNC_BATCH_SIZE);
    let unacked = totalBatch;
    const acked = initializing
      ? () => {
          unacked -= 1;
          if (unacked === 0) finish();
        }
      : undefined;
    let at = 0;
    let currentBatch = 0;
    this.push(connection, {
      next: () => {
        if (at >= total) return undefined;
        const contexts: Array<{ serviceKey: string; changedType: string }> = [];
        for (const end = Math.min(total, at + SYNC_BATCH_SIZE); at < end; at++) {
          contexts.push(at < adds.length ? { serviceKey: adds[at] as string, changedType: FUZZY_CHANGE.add } : { serviceKey: removes[at - adds.length] as string, changedType: FUZZY_CHANGE.remove });
        }
        currentBatch += 1;
        return { type: SERVER_REQUEST.fuzzyWatchSync, fields: { syncType, groupKeyPattern, contexts, totalBatch, currentBatch, module: 'naming' }, attempt: 1, ...(acked ? { acked } : {}) };
      },
    });
  }

  /** A service got its first instance or lost its last: updates the matched sets of its namespace's patterns and notifies their watchers. */
  private serviceChanged(change: ServiceChange, changedType: string): void {
    if (this.closed) return;
    const at = change.groupedName.indexOf(GROUP_SEPARATOR);
    const group = change.groupedName.slice(0, at);
    const name = change.groupedName.slice(at + GROUP_SEPARATOR.length);
    const inNamespace = this.byNamespace.get(change.namespaceId === '' ? PUBLIC_NAMESPACE : change.namespaceId);
    if (!inNamespace) return;
    const key = fuzzyServiceKey(change.namespaceId, group, name);
    const matching: PatternState[] = [];
    let changed = false;
    for (const state of inNamespace.values()) {
      if (!patternMatches(state.parsed, change.namespaceId, group, name)) continue;
      matching.push(state);
      if (changedType === FUZZY_CHANGE.add) {
        if (state.matched.has(key) || this.atCap(state)) continue;
        state.matched.add(key);
        changed = true;
      } else if (state.matched.has(key)) {
        const wasAtCap = this.atCap(state);
        state.matched.delete(key);
        changed = true;
        if (wasAtCap) this.fill(state);
      }
    }
    if (!changed) return;
    const notified = new Set<string>();
    for (const state of matching) {
      for (const connection of state.watchers.values()) {
        if (notified.has(connection.id)) continue;
        notified.add(connection.id);
        this.notifyChange(connection, key, changedType);
      }
    }
  }

  /** Merges change notifies per connection and service key over the merge window, the last change winning. */
  private notifyChange(connection: GrpcConnection, key: string, changedType: string): void {
    const box = this.outbox(connection);
    box.changes.set(key, changedType);
    if (box.timer) return;
    box.timer = setTimeout(() => {
      box.timer = undefined;
      const changes = box.changes.entries();
      box.changes = new Map();
      this.push(connection, {
        next: () => {
          const entry = changes.next();
          if (entry.done) return undefined;
          const [serviceKey, changedType] = entry.value;
          return { type: SERVER_REQUEST.fuzzyWatchChange, fields: { syncType: FUZZY_SYNC_TYPE.changed, serviceKey, changedType, module: 'naming' }, attempt: 1 };
        },
      });
    }, this.options.mergeWindowMs);
    box.timer.unref();
  }

  private outbox(connection: GrpcConnection): Outbox {
    let box = this.outboxes.get(connection.id);
    if (!box) {
      box = { connection, changes: new Map(), timer: undefined, queue: [], inFlight: 0 };
      this.outboxes.set(connection.id, box);
    }
    return box;
  }

  private enqueue(connection: GrpcConnection, type: string, fields: Record<string, unknown>): void {
    this.push(connection, once({ type, fields: { ...fields, module: 'naming' }, attempt: 1 }));
  }

  private push(connection: GrpcConnection, job: Job): void {
    if (this.closed) return;
    const box = this.outbox(connection);
    box.queue.push(job);
    this.drain(box);
  }

  private drain(box: Outbox): void {
    while (!this.closed && box.inFlight < MAX_IN_FLIGHT && box.queue.length > 0) {
      const next = (box.queue[0] as Job).next();
      if (next) this.send(box, next);
      else box.queue.shift();
    }
  }

  private send(box: Outbox, out: Outgoing): void {
    const { connection } = box;
    if (this.outboxes.get(connection.id) !== box) return;
    box.inFlight += 1;
    if (out.attempt === 1) {
      if (out.type === SERVER_REQUEST.fuzzyWatchSync) this.counters.syncsSent += 1;
      else this.counters.changesSent += 1;
    }
    const settle = () => {
      box.inFlight -= 1;
      this.drain(box);
    };
    connection.request(out.type, out.fields, this.options.ackTimeoutMs).then(
      (answer) => {
        settle();
        if (isOk(answer.body)) out.acked?.();
        else this.retry(box, out, 'answered without success');
      },
      (err: unknown) => {
        settle();
        if (err instanceof ServerRequestError && err.code === 'closed') {
          this.counters.failed += 1;
          this.onDeadConnection(connection);
          return;
        }
        this.retry(box, out, err instanceof Error ? err.message : String(err));
      },
    );
  }

  private retry(box: Outbox, out: Outgoing, why: string): void {
    if (out.attempt >= this.options.maxAttempts || this.closed) {
      this.counters.failed += 1;
      this.log.debug({ connectionId: box.connection.id, type: out.type, why, attempts: out.attempt }, 'fuzzy watch request given up');
      return;
    }
    const timer = setTimeout(() => {
      this.retries.delete(timer);
      if (this.outboxes.get(box.connection.id) !== box) return;
      box.queue.push(once({ ...out, attempt: out.attempt + 1 }));
      this.drain(box);
    }, this.options.retryDelayMs);
    timer.unref();
    this.retries.add(timer);
  }
}

/** A job of one request. */
function once(out: Outgoing): Job {
  let sent = false;
  return {
    next: () => {
      if (sent) return undefined;
      sent = true;
      return out;
    },
  };
}
