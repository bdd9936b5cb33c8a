import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import type { RegistryAdapter, Unsubscribe, WatchEvent } from '../model/adapter.js';
import { serviceKeyString, type ClusterSpec, type Instance, type ServiceKey } from '../model/types.js';
import type { DnsCatalogue } from './catalogue.js';

/** Builds the adapter of one cluster (a kind's factory, as the engine's adapter pool uses them). */
export type DnsAdapterFactory = (spec: ClusterSpec) => RegistryAdapter;

/** Where the feed reads from. */
export interface DnsFeedOptions {
  catalogue: DnsCatalogue;
  /** The clusters to serve, read again at every refresh (the store's, filtered by `--clusters`). */
  clusters: () => Promise<ClusterSpec[]>;
  /** An adapter for a cluster; the feed owns it and closes it. Throws for a kind it cannot serve. */
  adapter: DnsAdapterFactory;
  /** Re-list period per cluster, ms (default 10,000): also how soon an outage the watches do not report shows as stale. */
  refreshMs?: number | undefined;
  /** Retry period of a cluster that cannot be read, ms (default 2,000). */
  retryMs?: number | undefined;
  /** Every this many refreshes, every service is read again even when its watch saw nothing (default 10). */
  fullReadEvery?: number | undefined;
  /** Reads in flight at once, over all clusters (default 16). */
  readConcurrency?: number | undefined;
  logger?: Logger | undefined;
  now?: () => number;
}

/** A cluster as the feed sees it, for the status route. */
export interface DnsFeedClusterStatus {
  id: string;
  kind: string;
  /**
   * `starting`: not read yet; `fresh`: the last refresh listed the services and every read since
   * succeeded; `stale`: a list or read failed, answers come from the last good reads; `failed`:
   * no adapter (bad settings or an unknown kind), nothing is served from it.
   */
  state: 'starting' | 'fresh' | 'stale' | 'failed';
  services: number;
  /** Since when it has been stale (ms since the epoch). */
  staleSince?: number | undefined;
  lastError?: string | undefined;
  /** The last time its services were listed (ms since the epoch). */
  lastListAt?: number | undefined;
}

interface Tracked {
  key: ServiceKey;
  stop: Unsubscribe;
  reading: boolean;
  again: boolean;
  /** Read at least once without error. */
  read: boolean;
}

interface ClusterFeed {
  spec: ClusterSpec;
  specJson: string;
  adapter: RegistryAdapter | undefined;
  services: Map<string, Tracked>;
  stopList: Unsubscribe | undefined;
  state: DnsFeedClusterStatus['state'];
  failingSince: number | undefined;
  lastError: string | undefined;
  lastListAt: number | undefined;
  /** Read failures since the last refresh started. */
  readFailures: number;
  refreshes: number;
  timer: NodeJS.Timeout | undefined;
  running: Promise<void> | undefined;
  rerun: boolean;
  closed: boolean;
}

const SCOPE_ALL = { namespace: '*', group: '*' } as const;

/**
 * Keeps a {@link DnsCatalogue} in step with the registries, read only: every service of every
 * chosen cluster (`*` in every namespace and group), through the adapters' own watches (pushes,
 * ZooKeeper watches, Kubernetes informers, or the adapter's polls), so any kind that implements the
 * adapter contract is served.
 *
 * - A watch event reads that one service again (a watch's `firstRead` is used as the read); reads
 *   of one service never overlap, and changes during a read lead to one more read.
 * - Every `refreshMs` each cluster is listed again (services that appeared are watched, those that
 *   vanished leave the catalogue) and the services not read successfully yet are read; every
 *   `fullReadEvery` refreshes all of them are, to repair anything a watch missed.
 * - A failed list or read marks the cluster stale in the catalogue (serve stale: its services keep
 *   their last good instances, and the answers say so in metrics); the cluster is retried every
 *   `retryMs` and is fresh again after a refresh whose list and reads all succeed. Nothing is
 *   removed from the catalogue because a read failed.
 * - A cluster whose settings changed gets a new adapter (its services are kept while they are read
 *   again); a cluster no longer chosen leaves the catalogue.
 */
export class DnsFeed {
  private readonly catalogue: DnsCatalogue;
  private readonly refreshMs: number;
  private readonly retryMs: number;
  private readonly fullReadEvery: number;
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly feeds = new Map<string, ClusterFeed>();
  private readonly limit: ReadLimit;
  private closed = false;
  private discovery: NodeJS.Timeout | undefined;

  constructor(private readonly options: DnsFeedOptions) {
    this.catalogue = options.catalogue;
    this.refreshMs = positive('refreshMs', options.refreshMs ?? 10_000);
    this.retryMs = positive('retryMs', options.retryMs ?? 2_000);
    this.fullReadEvery = positive('fullReadEvery', options.fullReadEvery ?? 10);
    this.limit = new ReadLimit(positive('readConcurrency', options.readConcurrency ?? 16));
    this.log = (options.logger ?? silentLogger()).child({ component: 'dns-feed' });
    this.now = options.now ?? Date.now;
  }

  /** Reads the clusters and every service once (failures are reported by {@link status}, not thrown), then keeps watching. */
  async start(): Promise<void> {
    await this.discover();
    await Promise.all([...this.feeds.values()].map((feed) => feed.running));
  }

  /** Reads the cluster list again now (a cluster was added, changed or removed). */
  clusterChanged(): void {
    void this.discover();
  }

  status(): DnsFeedClusterStatus[] {
    return [...this.feeds.values()]
      .map((f) => ({
        id: f.spec.id,
        kind: f.spec.kind,
        state: f.state,
        services: f.services.size,
        ...(f.failingSince !== undefined ? { staleSince: f.failingSince } : {}),
        ...(f.lastError !== undefined ? { lastError: f.lastError } : {}),
        ...(f.lastListAt !== undefined ? { lastListAt: f.lastListAt } : {}),
      }))
      .sort((a, b) => a.id.localeCompare(b.id));
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.discovery);
    await Promise.all([...this.feeds.values()].map((feed) => this.drop(feed, false)));
  }

  private async discover(): Promise<void> {
    if (this.closed) return;
    clearTimeout(this.discovery);
    let specs: ClusterSpec[];
    try {
      specs = await this.options.clusters();
    } catch (err) {
      this.log.warn({ err }, 'cannot read the clusters to serve over DNS; trying again');
      this.discovery = unrefTimer(() => void this.discover(), this.retryMs);
      return;
    }
    if (this.closed) return;
    const wanted = new Map(specs.map((s) => [s.id, s]));
    for (const [id, feed] of this.feeds) {
      const spec = wanted.get(id);
      if (spec === undefined) {
        this.feeds.delete(id);
        this.log.info({ cluster: id }, 'cluster no longer served over DNS');
        await this.drop(feed, true);
      } else if (JSON.stringify(spec) !== feed.specJson) {
        this.log.info({ cluster: id }, 'cluster settings changed: reading it through a new adapter');
        this.replaceAdapter(feed, spec);
      }
    }
    for (const [id, spec] of wanted) {
      if (this.feeds.has(id)) continue;
      const feed: ClusterFeed = {
        spec,
        specJson: JSON.stringify(spec),
        adapter: undefined,
        services: new Map(),
        stopList: undefined,
        state: 'starting',
        failingSince: undefined,
        lastError: undefined,
        lastListAt: undefined,
        readFailures: 0,
        refreshes: 0,
        timer: undefined,
        running: undefined,
        rerun: false,
        closed: false,
      };
      this.feeds.set(id, feed);
      this.refresh(feed);
    }
    this.discovery = unrefTimer(() => void this.discover(), this.refreshMs);
  }

  /** Runs one refresh of the cluster, or one more after the one under way. */
  private refresh(feed: ClusterFeed): void {
    if (feed.closed) return;
    if (feed.running) {
      feed.rerun = true;
      return;
    }
    clearTimeout(feed.timer);
    feed.running = this.refreshOnce(feed)
      .catch((err: unknown) => this.log.error({ err, cluster: feed.spec.id }, 'DNS feed refresh failed'))
      .finally(() => {
        feed.running = undefined;
        if (feed.closed) return;
        if (feed.rerun) {
          feed.rerun = false;
          this.refresh(feed);
          return;
        }
        feed.timer = unrefTimer(() => this.refresh(feed), feed.failingSince === undefined && feed.state !== 'failed' ? this.refreshMs : this.retryMs);
      });
  }

  private async refreshOnce(feed: ClusterFeed): Promise<void> {
    const adapter = this.adapterOf(feed);
    if (adapter === undefined) return;
    feed.readFailures = 0;
    feed.refreshes += 1;
    let keys: ServiceKey[];
    try {
      keys = await adapter.listServices(SCOPE_ALL);
    } catch (err) {
      this.failed(feed, `cannot list services: ${errorText(err)}`);
      return;
    }
    if (feed.closed || feed.adapter !== adapter) return;
    feed.lastListAt = this.now();
    const listed = new Map(keys.map((k) => [serviceKeyString(k), k]));
    for (const [id, tracked] of feed.services) {
      if (listed.has(id)) continue;
      tracked.stop();
      feed.services.delete(id);
      this.catalogue.remove(feed.spec.id, tracked.key);
    }
    const full = feed.refreshes % this.fullReadEvery === 0;
    const reads: Array<Promise<void>> = [];
    for (const [id, key] of listed) {
      let tracked = feed.services.get(id);
      if (tracked === undefined) {
        tracked = this.track(feed, adapter, key);
        feed.services.set(id, tracked);
      }
      if (full || !tracked.read) reads.push(this.read(feed, adapter, tracked));
    }
    await Promise.all(reads);
    if (feed.closed || feed.adapter !== adapter) return;
    if (feed.readFailures === 0) this.fresh(feed);
  }

  private track(feed: ClusterFeed, adapter: RegistryAdapter, key: ServiceKey): Tracked {
    const tracked: Tracked = { key, stop: () => {}, reading: false, again: false, read: false };
    tracked.stop = adapter.watch(key, (event?: WatchEvent) => {
      if (feed.closed || feed.adapter !== adapter || feed.services.get(serviceKeyString(key)) !== tracked) return;
      if (event?.firstRead && !tracked.reading) {
        this.put(feed, tracked, event.firstRead);
        return;
      }
      void this.read(feed, adapter, tracked);
    });
    return tracked;
  }

  /** Reads one service (never two reads of it at once: a read asked for meanwhile runs after). */
  private async read(feed: ClusterFeed, adapter: RegistryAdapter, tracked: Tracked): Promise<void> {
    if (tracked.reading) {
      tracked.again = true;
      return;
    }
    tracked.reading = true;
    try {
      do {
        tracked.again = false;
        let instances: Instance[];
        try {
          instances = await this.limit.run(() => adapter.listInstances(tracked.key));
        } catch (err) {
          feed.readFailures += 1;
          this.failed(feed, `cannot read ${serviceKeyString(tracked.key)}: ${errorText(err)}`);
          return;
        }
        if (feed.closed || feed.adapter !== adapter || feed.services.get(serviceKeyString(tracked.key)) !== tracked) return;
        this.put(feed, tracked, instances);
      } while (tracked.again);
    } finally {
      tracked.reading = false;
    }
  }

  private put(feed: ClusterFeed, tracked: Tracked, instances: readonly Instance[]): void {
    tracked.read = true;
    this.catalogue.put(feed.spec.id, tracked.key, withClusterLabels(instances, feed.spec.labels));
  }

  private failed(feed: ClusterFeed, message: string): void {
    if (feed.failingSince === undefined) {
      feed.failingSince = this.now();
      this.log.warn({ cluster: feed.spec.id, error: message }, 'registry cannot be read: DNS serves its last good answers (stale)');
      this.catalogue.markStale(feed.spec.id, feed.failingSince);
      if (!feed.running) this.refresh(feed);
    }
    feed.state = 'stale';
    feed.lastError = message;
  }

  private fresh(feed: ClusterFeed): void {
    if (feed.failingSince !== undefined) this.log.info({ cluster: feed.spec.id, staleMs: this.now() - feed.failingSince }, 'registry read again: DNS answers are fresh');
    feed.failingSince = undefined;
    feed.state = 'fresh';
    this.catalogue.markFresh(feed.spec.id);
  }

  private adapterOf(feed: ClusterFeed): RegistryAdapter | undefined {
    if (feed.adapter) return feed.adapter;
    try {
      feed.adapter = this.options.adapter(feed.spec);
    } catch (err) {
      feed.state = 'failed';
      feed.lastError = errorText(err);
      this.log.error({ cluster: feed.spec.id, err }, 'cannot serve cluster over DNS: no adapter');
      return undefined;
    }
    const adapter = feed.adapter;
    feed.stopList = adapter.watchServices?.(SCOPE_ALL, () => {
      if (feed.adapter === adapter) this.refresh(feed);
    });
    return adapter;
  }

  /** New settings: a new adapter, the same services (kept in the catalogue until read again). */
  private replaceAdapter(feed: ClusterFeed, spec: ClusterSpec): void {
    const old = feed.adapter;
    for (const tracked of feed.services.values()) {
      tracked.stop();
      tracked.read = false;
    }
    feed.services.clear();
    feed.stopList?.();
    feed.stopList = undefined;
    feed.adapter = undefined;
    feed.spec = spec;
    feed.specJson = JSON.stringify(spec);
    if (feed.state === 'failed') feed.state = 'starting';
    if (old) void old.close().catch((err: unknown) => this.log.warn({ err, cluster: spec.id }, 'closing the replaced adapter failed'));
    this.refresh(feed);
  }

  private async drop(feed: ClusterFeed, removeServices: boolean): Promise<void> {
    feed.closed = true;
    clearTimeout(feed.timer);
    for (const tracked of feed.services.values()) {
      tracked.stop();
      if (removeServices) this.catalogue.remove(feed.spec.id, tracked.key);
    }
    feed.services.clear();
    feed.stopList?.();
    if (removeServices) this.catalogue.markFresh(feed.spec.id);
    await feed.running;
    await feed.adapter?.close().catch((err: unknown) => this.log.warn({ err, cluster: feed.spec.id }, 'closing a DNS feed adapter failed'));
  }
}

/** Instances with the cluster's labels (site, region) added where their own metadata has none. */
function withClusterLabels(instances: readonly Instance[], labels: Readonly<Record<string, string>>): readonly Instance[] {
  const keys = Object.keys(labels);
  if (keys.length === 0) return instances;
  return instances.map((i) => (keys.every((k) => i.metadata[k] !== undefined) ? i : { ...i, metadata: { ...labels, ...i.metadata } }));
}

/** At most `permits` reads at once; the rest wait in order. */
class ReadLimit {
  private active = 0;
  private readonly waiting: Array<() => void> = [];
  constructor(private readonly permits: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.active >= this.permits) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.active += 1;
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.active -= 1;
    }
  }
}

function unrefTimer(fn: () => void, ms: number): NodeJS.Timeout {
  const t = setTimeout(fn, ms);
  t.unref();
  return t;
}

function positive(name: string, value: number): number {
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be a positive integer, got ${value}`);
  return value;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
