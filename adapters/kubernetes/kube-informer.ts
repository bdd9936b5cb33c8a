import type { Logger } from 'pino';
import type { KubeClient, KubeList, WatchEventType } from './kube-client.js';
import type { KubeMeta } from './kube-objects.js';
import { KubernetesRequestError } from './kubernetes-request-error.js';

/** A change the informer saw; `previous` is what it held before (absent for an addition). */
export interface InformerEvent<T> {
  type: 'added' | 'modified' | 'deleted';
  object: T;
  previous: T | undefined;
}

export interface InformerOptions<T> {
  clusterId: string;
  /** For logs and errors: `services`, `endpointslices in default`. */
  name: string;
  client: KubeClient;
  /** Collection path watched, e.g. `/api/v1/services`. */
  path: string;
  list: () => Promise<KubeList<T>>;
  labelSelector?: string | undefined;
  watchTimeoutSeconds: number;
  /** Bound on the wait for a watch's response headers (the stream itself has no bound). */
  requestTimeoutMs: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  log: Logger;
  /** A second index kept over the objects (EndpointSlices by Service): `namespace/…` or undefined. */
  indexKey?: (object: T) => string | undefined;
  onEvent: (event: InformerEvent<T>) => void;
  /** Called when the watch works again after it failed (events may have been missed meanwhile... or not: callers re-check). */
  onRecovered?: () => void;
}

/** Counters, for tests and diagnostics. */
export interface InformerStats {
  /** Full lists received. */
  lists: number;
  /** Watch requests made. */
  watches: number;
  /** Full lists received after the first one (after 410 Gone). */
  relists: number;
  bookmarks: number;
  failures: number;
  /** The resourceVersion the next watch resumes from. */
  resourceVersion: string;
}

type Waiter = { resolve: () => void; reject: (err: unknown) => void };

/**
 * One list-and-watch of a collection, kept in memory, that never gives up: the Kubernetes
 * "reflector", written over the client's typed list calls and its `Watch` stream instead of its
 * `makeInformer`, because the 1.4 informer never asks for bookmarks (`allowWatchBookmarks` is not
 * sent), has no bound on a watch (its 30 s timeout signal is overwritten), does not say when the
 * first list is done, swallows non-410 ERROR events, and can open a new watch after `stop()`.
 *
 * - Lists, then watches from the list's resourceVersion with `allowWatchBookmarks` and
 *   `timeoutSeconds`; a watch the server ends is resumed at once from the last resourceVersion
 *   seen (bookmarks move it on even when no event matched).
 * - 410 Gone (an HTTP 410 on the watch request or an ERROR event with a Status of code 410): relist;
 *   the held objects are replaced by the new list only once it arrived, and the differences are
 *   emitted as events, so nothing is ever reported deleted before a full list said so.
 * - Any other failure: retried with exponential backoff (`backoffInitialMs` doubling up to
 *   `backoffMaxMs`, with jitter), resuming from the last resourceVersion; meanwhile
 *   {@link healthy} is false. A watch that the server closes at once without a word, again and
 *   again, is slowed down the same way.
 */
export class KubeInformer<T extends { metadata?: KubeMeta }> {
  private readonly objects = new Map<string, Map<string, T>>();
  private readonly index = new Map<string, Map<string, T>>();
  private resourceVersion = '';
  private synced = false;
  private failing: KubernetesRequestError | undefined;
  private stopped = false;
  private running: Promise<void> | undefined;
  private current: AbortController | undefined;
  /** Ends the watch in progress, even before the server answered. */
  private cancel: (() => void) | undefined;
  private wake: (() => void) | undefined;
  private readonly waiters = new Set<Waiter>();
  private readonly counters = { lists: 0, watches: 0, relists: 0, bookmarks: 0, failures: 0 };

  constructor(private readonly opts: InformerOptions<T>) {}

  /** Starts listing and watching; idempotent. */
  start(): void {
    if (this.running || this.stopped) return;
    this.running = this.loop().catch((err: unknown) => this.opts.log.error({ err, informer: this.opts.name }, 'informer loop crashed'));
  }

  /** Has the first full list arrived, and is the watch not failing? */
  get healthy(): boolean {
    return this.synced && !this.failing && !this.stopped;
  }

  /** Resolves once the first full list is held; rejects at once while failing before it, or after `timeoutMs`. */
  whenSynced(timeoutMs: number): Promise<void> {
    if (this.stopped) return Promise.reject(this.closedError());
    if (this.synced) return this.failing ? Promise.reject(this.notReady(this.failing)) : Promise.resolve();
    if (this.failing) return Promise.reject(this.notReady(this.failing));
    this.start();
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiters.delete(waiter);
        reject(this.notReady(undefined, `no full list within ${timeoutMs} ms`));
      }, timeoutMs);
      timer.unref();
      const waiter: Waiter = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.waiters.add(waiter);
    });
  }

  /** The objects held, of one namespace or all. */
  list(namespace?: string): T[] {
    if (namespace !== undefined) return [...(this.objects.get(namespace)?.values() ?? [])];
    return [...this.objects.values()].flatMap((m) => [...m.values()]);
  }

  get(namespace: string, name: string): T | undefined {
    return this.objects.get(namespace)?.get(name);
  }

  /** The objects under one key of the second index. */
  byIndex(key: string): T[] {
    return [...(this.index.get(key)?.values() ?? [])];
  }

  stats(): InformerStats {
    return { ...this.counters, resourceVersion: this.resourceVersion };
  }

  /** Stops the watch for good; pending waits reject. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.current?.abort();
    this.cancel?.();
    this.wake?.();
    for (const w of this.waiters) w.reject(this.closedError());
    this.waiters.clear();
    await this.running;
  }

  private async loop(): Promise<void> {
    let failures = 0;
    let quickEnds = 0;
    while (!this.stopped) {
      try {
        if (this.resourceVersion === '') await this.relist();
        if (this.stopped) break;
        const outcome = await this.watchOnce(() => {
          // Connected: the watch works (again).
          failures = 0;
          if (this.failing) {
            this.failing = undefined;
            this.opts.log.info({ informer: this.opts.name }, 'kubernetes watch recovered');
            this.safely(() => this.opts.onRecovered?.());
          }
        });
        if (outcome === 'expired') {
          quickEnds = 0;
          continue;
        }
        quickEnds = outcome === 'quiet' ? quickEnds + 1 : 0;
        if (quickEnds > 1) await this.sleep(this.backoff(quickEnds - 1));
      } catch (err) {
        if (this.stopped) break;
        failures += 1;
        this.counters.failures += 1;
        const error = err instanceof KubernetesRequestError ? err : this.opts.client.toError('watch', this.opts.name, err);
        const wasFailing = this.failing !== undefined;
        this.failing = error;
        if (!this.synced) for (const w of this.waiters) w.reject(this.notReady(error));
        if (!this.synced) this.waiters.clear();
        const delay = this.backoff(failures);
        this.opts.log[wasFailing ? 'debug' : 'warn']({ err: error, informer: this.opts.name, retryInMs: delay }, 'kubernetes list/watch failed; retrying');
        await this.sleep(delay);
      }
    }
  }

  /** Lists the collection and replaces what is held, emitting the differences. */
  private async relist(): Promise<void> {
    const answer = await this.opts.list();
    if (this.stopped) return;
    this.counters.lists += 1;
    if (this.synced) this.counters.relists += 1;
    const old = new Map<string, T>();
    for (const ns of this.objects.values()) for (const o of ns.values()) old.set(keyOf(o), o);
    this.objects.clear();
    this.index.clear();
    const events: Array<InformerEvent<T>> = [];
    for (const o of answer.items) {
      const k = keyOf(o);
      this.put(o);
      const previous = old.get(k);
      old.delete(k);
      if (!previous) events.push({ type: 'added', object: o, previous });
      else if (previous.metadata?.resourceVersion !== o.metadata?.resourceVersion) events.push({ type: 'modified', object: o, previous });
    }
    for (const gone of old.values()) events.push({ type: 'deleted', object: gone, previous: gone });
    this.resourceVersion = answer.resourceVersion;
    const first = !this.synced;
    this.synced = true;
    if (first) {
      for (const w of this.waiters) w.resolve();
      this.waiters.clear();
    }
    // The first list is the baseline (readers read after it); later lists report what they changed.
    if (!first) for (const e of events) this.safely(() => this.opts.onEvent(e));
  }

  /**
   * One watch stream, until it ends. `expired`: 410, relist next; `ended`: resume; `quiet`: the
   * server closed it at once without sending anything. Rejects when it failed.
   */
  private watchOnce(connected: () => void): Promise<'expired' | 'ended' | 'quiet'> {
    this.counters.watches += 1;
    return new Promise((resolve, reject) => {
      let settled = false;
      let events = 0;
      let expired = false;
      let failure: KubernetesRequestError | undefined;
      let idle: NodeJS.Timeout | undefined;
      let controller: AbortController | undefined;
      const started = Date.now();
      const finish = (err: unknown) => {
        if (settled) return;
        settled = true;
        this.cancel = undefined;
        if (idle) clearTimeout(idle);
        clearTimeout(headers);
        controller?.abort();
        if (this.current === controller) this.current = undefined;
        if (this.stopped) return resolve('ended');
        if (expired) {
          this.resourceVersion = '';
          return resolve('expired');
        }
        if (failure) return reject(failure);
        const status = (err as { statusCode?: unknown } | null)?.statusCode;
        if (status === 410) {
          this.resourceVersion = '';
          return resolve('expired');
        }
        if (err) return reject(this.opts.client.toError('watch', this.opts.name, err));
        resolve(events === 0 && Date.now() - started < 1_000 ? 'quiet' : 'ended');
      };
      // A stream the server keeps open past its own timeout with no word is assumed dead.
      const idleLimitMs = (this.opts.watchTimeoutSeconds + 30) * 1000;
      const touch = () => {
        if (idle) clearTimeout(idle);
        idle = setTimeout(() => finish(null), idleLimitMs);
        idle.unref();
      };
      const onEvent = (type: WatchEventType, raw: unknown) => {
        if (settled || this.stopped) return;
        touch();
        const object = raw as T & { code?: number; message?: string; reason?: string };
        switch (type) {
          case 'ADDED':
          case 'MODIFIED':
          case 'DELETED':
            events += 1;
            this.applyEvent(type, object);
            return;
          case 'BOOKMARK':
            this.counters.bookmarks += 1;
            if (object.metadata?.resourceVersion) this.resourceVersion = object.metadata.resourceVersion;
            return;
          case 'ERROR':
            if (object.code === 410) expired = true;
            else {
              failure = new KubernetesRequestError({
                code: 'kubernetes-http-error',
                clusterId: this.opts.clusterId,
                verb: 'watch',
                target: this.opts.name,
                status: object.code,
                reason: object.reason,
                detail: `ERROR event: ${object.code ?? '?'} ${object.reason ?? ''} ${object.message ?? ''}`.trim(),
              });
            }
            finish(null);
            return;
        }
      };
      const query: Record<string, string | number | boolean> = {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        timeoutSeconds: this.opts.watchTimeoutSeconds,
      };
      if (this.opts.labelSelector !== undefined) query.labelSelector = this.opts.labelSelector;
      const headers = setTimeout(() => {
        failure = new KubernetesRequestError({
          code: 'kubernetes-timeout',
          clusterId: this.opts.clusterId,
          verb: 'watch',
          target: this.opts.name,
          detail: `no answer within ${this.opts.requestTimeoutMs} ms`,
        });
        finish(null);
      }, this.opts.requestTimeoutMs);
      headers.unref();
      this.cancel = () => finish(null);
      this.opts.client.watch(this.opts.path, query, onEvent, finish).then(
        (c) => {
          controller = c;
          if (settled || this.stopped) {
            c.abort();
            return;
          }
          clearTimeout(headers);
          this.current = c;
          touch();
          connected();
        },
        (err: unknown) => finish(err ?? new Error('watch failed')),
      );
    });
  }

  private applyEvent(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: T): void {
    if (object.metadata?.resourceVersion) this.resourceVersion = object.metadata.resourceVersion;
    const ns = object.metadata?.namespace ?? '';
    const name = object.metadata?.name ?? '';
    const previous = this.objects.get(ns)?.get(name);
    if (type === 'DELETED') {
      if (!previous) return;
      this.remove(previous);
      this.safely(() => this.opts.onEvent({ type: 'deleted', object, previous }));
      return;
    }
    if (previous) this.remove(previous);
    this.put(object);
    this.safely(() => this.opts.onEvent({ type: previous ? 'modified' : 'added', object, previous }));
  }

  private put(o: T): void {
    const ns = o.metadata?.namespace ?? '';
    let names = this.objects.get(ns);
    if (!names) {
      names = new Map();
      this.objects.set(ns, names);
    }
    names.set(o.metadata?.name ?? '', o);
    const ik = this.opts.indexKey?.(o);
    if (ik !== undefined) {
      let bucket = this.index.get(ik);
      if (!bucket) {
        bucket = new Map();
        this.index.set(ik, bucket);
      }
      bucket.set(keyOf(o), o);
    }
  }

  private remove(o: T): void {
    const ns = o.metadata?.namespace ?? '';
    const names = this.objects.get(ns);
    names?.delete(o.metadata?.name ?? '');
    if (names?.size === 0) this.objects.delete(ns);
    const ik = this.opts.indexKey?.(o);
    if (ik !== undefined) {
      const bucket = this.index.get(ik);
      bucket?.delete(keyOf(o));
      if (bucket?.size === 0) this.index.delete(ik);
    }
  }

  private backoff(attempt: number): number {
    const base = Math.min(this.opts.backoffMaxMs, this.opts.backoffInitialMs * 2 ** Math.min(attempt - 1, 20));
    return Math.round(base / 2 + Math.random() * (base / 2));
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      timer.unref();
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = () => {
        this.wake = undefined;
        done();
      };
    });
  }

  private safely(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.opts.log.warn({ err, informer: this.opts.name }, 'informer listener threw');
    }
  }

  private notReady(cause: KubernetesRequestError | undefined, detail?: string): KubernetesRequestError {
    return new KubernetesRequestError({
      code: 'kubernetes-not-ready',
      clusterId: this.opts.clusterId,
      verb: 'read',
      target: this.opts.name,
      status: cause?.status,
      reason: cause?.reason,
      detail: detail ?? `the list and watch is failing (${cause?.message ?? 'unknown error'})`,
      cause,
    });
  }

  private closedError(): KubernetesRequestError {
    return new KubernetesRequestError({ code: 'kubernetes-closed', clusterId: this.opts.clusterId, verb: 'read', target: this.opts.name, detail: 'the adapter is closed' });
  }
}

function keyOf(o: { metadata?: KubeMeta }): string {
  return `${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;
}
