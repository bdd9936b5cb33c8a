import { EventEmitter } from 'node:events';
import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { IP_ENTITY_TYPE, type CmdbProblem, type CmdbProvider } from './provider.js';

/** Options of {@link CmdbCache}. */
export interface CmdbCacheOptions {
  provider: CmdbProvider;
  /** Period of full refreshes (`allEntities()`), in ms; default 60 000. */
  refreshMs?: number;
  /** Period of event polls (`events(since)`), in ms; default 5000. */
  eventPollMs?: number;
  /** A refresh or poll that takes longer fails, in ms; default 10 000. */
  timeoutMs?: number;
  /** How many entities an event poll re-reads at once; default 16. */
  readConcurrency?: number;
  logger?: Logger;
}

/** What {@link CmdbCache.status} reports. */
export interface CmdbCacheStatus {
  /** The last refresh or poll succeeded and the provider reports no problem. */
  ok: boolean;
  /**
   * The provider's current problem if it reports one, else the cache's most recent failed refresh or
   * poll (kept after recovery, for diagnosis; `ok` tells whether it is still current).
   */
  lastError: (CmdbProblem & { source: 'provider' | 'cache' }) | undefined;
  /** Epoch ms of the last successful full refresh. */
  lastRefreshAt: number | undefined;
  /** Epoch ms of the last successful event poll. */
  lastEventPollAt: number | undefined;
  /** How many IPs have labels in the cache. */
  entities: number;
}

type Labels = Readonly<Record<string, string>>;

const NO_LABELS: Labels = Object.freeze({});

function sameLabels(a: Labels, b: Labels): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

async function withTimeout<T>(work: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`CMDB ${what} timed out after ${ms} ms`)), ms);
    timer.unref();
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The labels of IP entities (type `ip`) of a {@link CmdbProvider}, held in memory so that lookups
 * ({@link labelsOf}) are synchronous and never wait for the provider.
 *
 * Like Nacos's own CMDB reader it does a full refresh (`allEntities()`) every `refreshMs` and polls
 * `events(since)` every `eventPollMs`, re-reading only the entities the events name (whatever the
 * event type: the re-read is the truth, and an entity that is gone is dropped). `since` is the start
 * time of the previous successful poll or refresh, so nothing between two polls is missed. Refreshes
 * and polls never overlap; each runs under `timeoutMs`.
 *
 * A failing provider (rejection or timeout) never empties the cache: the last good labels stay, the
 * failure shows in {@link status} and is retried at the next period (a failed poll keeps its `since`).
 *
 * Emits `change` with the sorted IPs whose labels changed (added, altered or removed) after each
 * refresh or poll that changed something, so the engine can reconcile only those IPs' services.
 *
 * The cache does not own the provider: {@link stop} does not close it. Timers are unref'd.
 */
export class CmdbCache extends EventEmitter<{ change: [ips: string[]] }> {
  readonly refreshMs: number;
  readonly eventPollMs: number;
  readonly timeoutMs: number;
  private readonly provider: CmdbProvider;
  private readonly readConcurrency: number;
  private readonly logger: Logger;
  private labels = new Map<string, Labels>();
  private chain: Promise<unknown> = Promise.resolve();
  private refreshTimer: NodeJS.Timeout | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private state: 'new' | 'started' | 'stopped' = 'new';
  private eventSince: number | undefined;
  private lastOk = true;
  private ownError: CmdbProblem | undefined;
  private lastRefreshAt: number | undefined;
  private lastEventPollAt: number | undefined;

  constructor(opts: CmdbCacheOptions) {
    super();
    this.provider = opts.provider;
    this.refreshMs = opts.refreshMs ?? 60_000;
    this.eventPollMs = opts.eventPollMs ?? 5000;
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.readConcurrency = opts.readConcurrency ?? 16;
    for (const [name, value] of Object.entries({ refreshMs: this.refreshMs, eventPollMs: this.eventPollMs, timeoutMs: this.timeoutMs, readConcurrency: this.readConcurrency })) {
      if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${value}`);
    }
    this.logger = (opts.logger ?? silentLogger()).child({ component: 'cmdb-cache' });
  }

  /**
   * Does a first full refresh (a failure is reported by {@link status}, not thrown: the daemon runs
   * without labels until the provider answers) and starts the periodic refreshes and polls.
   */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`CmdbCache already ${this.state}`);
    this.state = 'started';
    await this.refresh();
    this.scheduleRefresh();
    this.schedulePoll();
  }

  /** Stops the timers and waits for a refresh or poll in progress; the labels stay readable. Idempotent. */
  async stop(): Promise<void> {
    this.state = 'stopped';
    clearTimeout(this.refreshTimer);
    clearTimeout(this.pollTimer);
    await this.chain;
  }

  /** The labels of an IP as last seen (empty when it has none); frozen, never waits. */
  labelsOf(ip: string): Labels {
    return this.labels.get(ip) ?? NO_LABELS;
  }

  /** Every IP with labels and its labels, as last seen. */
  snapshot(): Map<string, Labels> {
    return new Map(this.labels);
  }

  status(): CmdbCacheStatus {
    const providerProblem = this.provider.lastError?.();
    return {
      ok: this.lastOk && providerProblem === undefined,
      lastError:
        providerProblem !== undefined
          ? { ...providerProblem, source: 'provider' }
          : this.ownError !== undefined
            ? { ...this.ownError, source: 'cache' }
            : undefined,
      lastRefreshAt: this.lastRefreshAt,
      lastEventPollAt: this.lastEventPollAt,
      entities: this.labels.size,
    };
  }

  /** A full refresh now (after any refresh or poll in progress); resolves whether it succeeded. */
  refresh(): Promise<boolean> {
    return this.serialized(async () => {
      const started = Date.now();
      const all = await withTimeout(this.provider.allEntities(), this.timeoutMs, 'full refresh');
      const next = new Map<string, Labels>();
      for (const entity of all.get(IP_ENTITY_TYPE)?.values() ?? []) {
        if (Object.keys(entity.labels).length > 0) next.set(entity.name, Object.freeze({ ...entity.labels }));
      }
      const changed: string[] = [];
      for (const [ip, labels] of next) {
        const old = this.labels.get(ip);
        if (old === undefined || !sameLabels(old, labels)) changed.push(ip);
      }
      for (const ip of this.labels.keys()) if (!next.has(ip)) changed.push(ip);
      this.labels = next;
      this.lastRefreshAt = Date.now();
      // Everything before the refresh started is in it; events from then on still need polling.
      this.eventSince = started;
      return changed;
    }, 'full refresh');
  }

  /** An event poll now (after any refresh or poll in progress); resolves whether it succeeded. */
  pollEvents(): Promise<boolean> {
    return this.serialized(async () => {
      const started = Date.now();
      const since = this.eventSince ?? started;
      const work = async (): Promise<Map<string, Labels | undefined>> => {
        const events = await this.provider.events(since);
        const ips = [...new Set(events.filter((e) => e.entityType === IP_ENTITY_TYPE).map((e) => e.entityName))];
        const read = new Map<string, Labels | undefined>();
        for (let i = 0; i < ips.length; i += this.readConcurrency) {
          const batch = ips.slice(i, i + this.readConcurrency);
          const entities = await Promise.all(batch.map((ip) => this.provider.entity(ip, IP_ENTITY_TYPE)));
          batch.forEach((ip, j) => {
            const labels = entities[j]?.labels;
            read.set(ip, labels === undefined || Object.keys(labels).length === 0 ? undefined : Object.freeze({ ...labels }));
          });
        }
        return read;
      };
      // All or nothing: a poll that fails half-way is repeated whole, with the same `since`.
      const read = await withTimeout(work(), this.timeoutMs, 'event poll');
      const changed: string[] = [];
      for (const [ip, labels] of read) {
        const old = this.labels.get(ip);
        if (labels === undefined) {
          if (old !== undefined) {
            this.labels.delete(ip);
            changed.push(ip);
          }
        } else if (old === undefined || !sameLabels(old, labels)) {
          this.labels.set(ip, labels);
          changed.push(ip);
        }
      }
      this.lastEventPollAt = Date.now();
      this.eventSince = started;
      return changed;
    }, 'event poll');
  }

  private serialized(op: () => Promise<string[]>, what: string): Promise<boolean> {
    const run = this.chain.then(async () => {
      try {
        const changed = await op();
        this.lastOk = true;
        if (changed.length > 0) {
          changed.sort();
          this.logger.info({ changed: changed.length }, `CMDB labels changed (${what})`);
          this.emit('change', changed);
        }
        return true;
      } catch (error) {
        this.lastOk = false;
        this.ownError = { message: `${what} failed: ${(error as Error)?.message ?? String(error)}`, at: Date.now() };
        this.logger.warn({ err: error }, `CMDB ${what} failed; keeping the last good labels`);
        return false;
      }
    });
    this.chain = run;
    return run;
  }

  private scheduleRefresh(): void {
    if (this.state !== 'started') return;
    this.refreshTimer = setTimeout(() => void this.refresh().finally(() => this.scheduleRefresh()), this.refreshMs);
    this.refreshTimer.unref();
  }

  private schedulePoll(): void {
    if (this.state !== 'started') return;
    this.pollTimer = setTimeout(() => void this.pollEvents().finally(() => this.schedulePoll()), this.eventPollMs);
    this.pollTimer.unref();
  }
}
