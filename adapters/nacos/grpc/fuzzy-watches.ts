import type { Logger } from 'pino';
import { NacosRequestError } from '../nacos-request-error.js';
import { fuzzyPattern, parseFuzzyPattern, parseServiceKey, patternMatches, type FuzzyPattern } from './fuzzy-pattern.js';
import { FUZZY_CHANGE, FUZZY_LIMIT, FUZZY_SYNC_TYPE, FUZZY_WATCH_ABILITY, NACOS_CODE, REQUEST, SERVER_REQUEST, WATCH_TYPE } from './messages.js';

/** What a pattern's watchers are told. */
export type FuzzyWatchEvent =
  /** The pattern's service keys changed after its first INIT finished (which keys: {@link FuzzyKeyChanges}). */
  | 'changed'
  /** The keys are now complete: the INIT finished and the WATCH was accepted on the current connection. */
  | 'ready'
  /** The server will not watch this pattern (over a limit, or no fuzzy watch): list it another way. */
  | 'refused';

/**
 * The service keys one `changed` event is about, each with whether the pattern's set holds it now
 * (true: added, false: removed); only keys whose presence did change are in it.
 */
export type FuzzyKeyChanges = ReadonlyMap<string, boolean>;

/** Told of a pattern's events; `changes` comes with every `changed`. */
export type FuzzyWatchListener = (event: FuzzyWatchEvent, changes?: FuzzyKeyChanges) => void;

/** One caller's watch of a pattern. */
export interface FuzzyWatchHandle {
  readonly pattern: string;
  /** The service keys (`ns@@group@@name`) while {@link ready}, else undefined: a partial or unconfirmed set is never handed out. */
  keys(): ReadonlySet<string> | undefined;
  ready(): boolean;
  refused(): boolean;
  stop(): void;
}

/** What the watches need of the gRPC connection. */
export interface FuzzyWatchConnection {
  /** A naming request; rejects with NacosRequestError (its `nacosCode` the server's `errorCode`). */
  request(type: string, body: Record<string, unknown>): Promise<unknown>;
  ready(): Promise<void>;
  readonly isReady: boolean;
  readonly currentGeneration: number;
  readonly ability: Readonly<Record<string, boolean>>;
}

export interface FuzzyWatchesOptions {
  connection: FuzzyWatchConnection;
  log: Logger;
  /** Every pattern is watched again this often, repairing any drift (the Java client: 3 min). */
  resyncMs?: number;
  /** Pause before a failed WATCH is sent again (the Java client: 1 s). */
  retryMs?: number;
}

interface PatternWatch {
  text: string;
  namespaceId: string;
  parsed: FuzzyPattern;
  keys: Set<string>;
  /** FINISH of an INIT arrived; from then on re-WATCHes say `initializing: false`. */
  initialized: boolean;
  /** The connection generation on which the server last accepted the WATCH (0: none). */
  syncedGeneration: number;
  refused: boolean;
  wasReady: boolean;
  listeners: Set<FuzzyWatchListener>;
  retry: NodeJS.Timeout | undefined;
}

/**
 * The client side of Nacos 3.x fuzzy watch on one gRPC connection: per pattern the set of service
 * keys the server synced (INIT or DIFF contexts, change notifies: ADD adds, DELETE removes, so a
 * deleted service does leave the set), answered the way the Java client answers. A pattern's keys
 * are handed out only while complete: its INIT finished and the server accepted its WATCH on the
 * current connection. The server forgets everything on a reconnect, so every pattern is watched
 * again then, with the keys held and `initializing` as the Java client sends them, and again every
 * `resyncMs`; a changed set is reported as `changed`, with the keys that came and went (those of a
 * notify, or of a sync batch).
 *
 * A server without the `fuzzyWatch` ability, or one answering 50310 (too many patterns) or 50311
 * (too many services match), refuses the pattern for good: its watchers are told `refused`, it is
 * cancelled at the server, and one warning per reason names the Nacos property to raise.
 */
export class FuzzyWatches {
  private readonly patterns = new Map<string, PatternWatch>();
  private readonly warned = new Set<string>();
  private readonly resyncTimer: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly opts: FuzzyWatchesOptions) {
    this.resyncTimer = setInterval(() => this.resyncAll(), opts.resyncMs ?? 180_000);
    this.resyncTimer.unref();
  }

  /** Patterns watched now. */
  get size(): number {
    return this.patterns.size;
  }

  /** Watches every service of `group` (or `*`: every group) in a namespace (`public` for the public one). */
  watch(namespaceId: string, group: string, listener: FuzzyWatchListener): FuzzyWatchHandle {
    const text = fuzzyPattern(namespaceId, group, '*');
    let watch = this.patterns.get(text);
    if (!watch) {
      watch = {
        text,
        namespaceId: namespaceId === '' ? 'public' : namespaceId,
        parsed: parseFuzzyPattern(text) as FuzzyPattern,
        keys: new Set(),
        initialized: false,
        syncedGeneration: 0,
        refused: this.closed,
        wasReady: false,
        listeners: new Set(),
        retry: undefined,
      };
      this.patterns.set(text, watch);
      if (!this.closed) void this.send(watch);
    }
    const own = watch;
    const entry: FuzzyWatchListener = (event, changes) => listener(event, changes);
    own.listeners.add(entry);
    return {
      pattern: text,
      keys: () => (this.isReady(own) ? own.keys : undefined),
      ready: () => this.isReady(own),
      refused: () => own.refused,
      stop: () => this.unwatch(own, entry),
    };
  }

  /** A fuzzy-watch request the server wrote on the stream; answered with success by the connection once this returns. */
  handle(type: string, body: Record<string, unknown>): void {
    if (type === SERVER_REQUEST.fuzzyWatchSync) this.synced(body);
    else if (type === SERVER_REQUEST.fuzzyWatchChange) this.changed(body);
  }

  /** A connection after the first is up: the server knows none of the patterns any more. */
  connected(generation: number): void {
    if (generation === 1 || this.closed) return;
    for (const watch of this.patterns.values()) {
      if (watch.refused) continue;
      // Told `ready` again once this connection confirmed the pattern.
      watch.wasReady = false;
      void this.send(watch);
    }
  }

  close(): void {
    this.closed = true;
    clearInterval(this.resyncTimer);
    for (const watch of this.patterns.values()) clearTimeout(watch.retry);
    this.patterns.clear();
  }

  private isReady(watch: PatternWatch): boolean {
    const { connection } = this.opts;
    return !watch.refused && watch.initialized && connection.isReady && watch.syncedGeneration === connection.currentGeneration;
  }

  private unwatch(watch: PatternWatch, entry: FuzzyWatchListener): void {
    if (!watch.listeners.delete(entry) || watch.listeners.size > 0) return;
    clearTimeout(watch.retry);
    if (this.patterns.get(watch.text) !== watch) return;
    this.patterns.delete(watch.text);
    if (!watch.refused) this.cancel(watch);
  }

  private resyncAll(): void {
    for (const watch of this.patterns.values()) if (!watch.refused) void this.send(watch);
  }

  /** Sends WATCH with what is held; on success the pattern counts as synced on the connection it went over. */
  private async send(watch: PatternWatch): Promise<void> {
    const { connection, log } = this.opts;
    clearTimeout(watch.retry);
    watch.retry = undefined;
    try {
      await connection.ready();
      if (this.patterns.get(watch.text) !== watch || watch.refused) return;
      if (connection.ability[FUZZY_WATCH_ABILITY] !== true) {
        this.refuse(watch, 'ability', 'the server does not offer fuzzy watch (Nacos before 3.0)');
        return;
      }
      const generation = connection.currentGeneration;
      await connection.request(REQUEST.fuzzyWatch, {
        headers: {},
        namespace: watch.namespaceId,
        groupKeyPattern: watch.text,
        receivedGroupKeys: [...watch.keys],
        watchType: WATCH_TYPE.watch,
        initializing: !watch.initialized,
        module: 'naming',
      });
      if (this.patterns.get(watch.text) !== watch || watch.refused) return;
      if (generation === connection.currentGeneration) watch.syncedGeneration = generation;
      this.checkReady(watch);
    } catch (err) {
      if (this.patterns.get(watch.text) !== watch || watch.refused || this.closed) return;
      const code = err instanceof NacosRequestError ? err.nacosCode : undefined;
      if (code === FUZZY_LIMIT.patterns.code) return this.refuse(watch, String(code), `the server holds its most fuzzy-watch patterns (50310); raise ${FUZZY_LIMIT.patterns.property}`);
      if (code === FUZZY_LIMIT.services.code) return this.refuse(watch, String(code), `more services match than the server lets one pattern hold (50311); raise ${FUZZY_LIMIT.services.property}`);
      if (code === NACOS_CODE.noHandler) return this.refuse(watch, 'ability', 'the server has no NamingFuzzyWatchRequest handler');
      log.debug({ err, pattern: watch.text }, 'nacos fuzzy watch not sent; trying again');
      watch.retry = setTimeout(() => void this.send(watch), this.opts.retryMs ?? 1_000);
      watch.retry.unref();
    }
  }

  private cancel(watch: PatternWatch): void {
    if (this.closed || !this.opts.connection.isReady) return;
    const body = { headers: {}, namespace: watch.namespaceId, groupKeyPattern: watch.text, receivedGroupKeys: [], watchType: WATCH_TYPE.cancel, initializing: false, module: 'naming' };
    this.opts.connection.request(REQUEST.fuzzyWatch, body).catch((err: unknown) => this.opts.log.debug({ err, pattern: watch.text }, 'nacos fuzzy watch cancel failed'));
  }

  private refuse(watch: PatternWatch, reason: string, why: string): void {
    watch.refused = true;
    watch.keys.clear();
    if (!this.warned.has(reason)) {
      this.warned.add(reason);
      this.opts.log.warn({ pattern: watch.text }, `nacos fuzzy watch refused: ${why}; listing services by polling instead`);
    }
    if (reason !== 'ability') this.cancel(watch);
    this.emit(watch, 'refused');
  }

  private synced(body: Record<string, unknown>): void {
    const watch = typeof body.groupKeyPattern === 'string' ? this.patterns.get(body.groupKeyPattern) : undefined;
    if (!watch || watch.refused) return;
    if (body.syncType === FUZZY_SYNC_TYPE.finish) {
      watch.initialized = true;
      this.checkReady(watch);
      return;
    }
    if (body.syncType !== FUZZY_SYNC_TYPE.init && body.syncType !== FUZZY_SYNC_TYPE.diff) return;
    const changes = new Map<string, boolean>();
    for (const context of Array.isArray(body.contexts) ? (body.contexts as unknown[]) : []) {
      if (typeof context !== 'object' || context === null) continue;
      const { serviceKey, changedType } = context as Record<string, unknown>;
      if (typeof serviceKey === 'string' && this.apply(watch, serviceKey, changedType)) changes.set(serviceKey, watch.keys.has(serviceKey));
    }
    if (changes.size > 0 && watch.initialized) this.emit(watch, 'changed', changes);
  }

  private changed(body: Record<string, unknown>): void {
    const key = typeof body.serviceKey === 'string' ? body.serviceKey : undefined;
    const parts = key === undefined ? undefined : parseServiceKey(key);
    if (!key || !parts) return;
    for (const watch of this.patterns.values()) {
      if (watch.refused || !patternMatches(watch.parsed, parts.namespace, parts.group, parts.name)) continue;
      if (this.apply(watch, key, body.changedType) && watch.initialized) this.emit(watch, 'changed', new Map([[key, watch.keys.has(key)]]));
    }
  }

  /** ADD adds, DELETE removes; answers whether the set changed. */
  private apply(watch: PatternWatch, key: string, changedType: unknown): boolean {
    if (changedType === FUZZY_CHANGE.remove) return watch.keys.delete(key);
    if (changedType !== FUZZY_CHANGE.add || watch.keys.has(key)) return false;
    watch.keys.add(key);
    return true;
  }

  private checkReady(watch: PatternWatch): void {
    const ready = this.isReady(watch);
    if (ready && !watch.wasReady) {
      watch.wasReady = true;
      this.emit(watch, 'ready');
    } else if (!ready) watch.wasReady = false;
  }

  private emit(watch: PatternWatch, event: FuzzyWatchEvent, changes?: FuzzyKeyChanges): void {
    for (const listener of [...watch.listeners]) {
      if (!watch.listeners.has(listener)) continue;
      try {
        listener(event, changes);
      } catch (err) {
        this.opts.log.error({ err, pattern: watch.text }, 'a listener of a nacos fuzzy watch threw');
      }
    }
  }
}
