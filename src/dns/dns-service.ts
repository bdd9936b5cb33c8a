import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { silentLogger } from '../log.js';
import type { ClusterSpec } from '../model/types.js';
import type { CmdbCache } from '../cmdb/cache.js';
import { DnsCatalogue, type DnsCollision, type DnsCatalogueStats } from './catalogue.js';
import type { DnsSettings } from './dns-config.js';
import { DnsMetrics } from './dns-metrics.js';
import { startDnsServer, type DnsServer, type DnsServerStats } from './dns-server.js';
import { DnsFeed, type DnsAdapterFactory, type DnsFeedClusterStatus } from './feed.js';
import { SiteSelector } from './site.js';

/** What a DNS server needs from the process it runs in. */
export interface DnsServiceDeps {
  settings: DnsSettings;
  /** Every stored cluster (the feed keeps those `settings.clusters` names, or all). */
  clusters: () => Promise<ClusterSpec[]>;
  /** Calls `listener` when a cluster was added, changed or removed; answers how to stop. */
  onClusterChange?: ((listener: () => void) => () => void) | undefined;
  adapter: DnsAdapterFactory;
  /** Labels of addresses for same-site answers; without it every asker gets every instance. */
  cmdb?: CmdbCache | undefined;
  /** Where the DNS metrics go (the process's registry). */
  registry: Registry;
  logger?: Logger | undefined;
}

/** A chosen cluster that is not stored. */
export interface DnsMissingCluster {
  id: string;
  state: 'missing';
}

/** What `GET /api/v1/dns` (and the standalone server's `/status`) shows. */
export interface DnsStatus {
  zone: string;
  listen: string;
  /** Upstreams names outside the zone go to; empty: REFUSED. */
  upstreams: string[];
  sameSite: { cmdb: boolean; labels: string[]; trustedResolvers: string[]; protectThreshold: number };
  clusters: Array<DnsFeedClusterStatus | DnsMissingCluster>;
  catalogue: DnsCatalogueStats;
  /** At most 100, first by name. */
  collisions: DnsCollision[];
  server: DnsServerStats;
}

/** A running DNS interface: the index, its feed from the registries, the server. */
export interface RunningDns {
  readonly host: string;
  readonly port: number;
  readonly catalogue: DnsCatalogue;
  readonly feed: DnsFeed;
  readonly server: DnsServer;
  status(): Promise<DnsStatus>;
  close(): Promise<void>;
}

/**
 * Starts regsync's DNS interface: a catalogue of every service of the chosen clusters, fed through
 * the adapters' watches, answered on UDP and TCP with same-site selection when a CMDB is given.
 * The first read of every cluster completes before the server binds, so the first answers are
 * complete; a cluster that cannot be read then is served as soon as it can.
 */
export async function startDns(deps: DnsServiceDeps): Promise<RunningDns> {
  const { settings } = deps;
  const log = (deps.logger ?? silentLogger()).child({ component: 'dns' });
  const catalogue = new DnsCatalogue({ zone: settings.zone, ttlSeconds: settings.ttlSeconds, ttl: settings.ttl, aliases: settings.aliases, logger: log });
  const chosen = settings.clusters === undefined ? undefined : new Set(settings.clusters);
  let missing: string[] = [];
  const clusters = async (): Promise<ClusterSpec[]> => {
    const all = await deps.clusters();
    if (chosen === undefined) return all;
    const found = all.filter((c) => chosen.has(c.id));
    const gone = [...chosen].filter((id) => !found.some((c) => c.id === id));
    if (gone.join() !== missing.join() && gone.length > 0) log.warn({ clusters: gone }, 'clusters chosen for DNS are not defined: nothing is served from them');
    missing = gone;
    return found;
  };
  const feed = new DnsFeed({ catalogue, clusters, adapter: deps.adapter, refreshMs: settings.refreshMs, logger: log });
  const site = deps.cmdb
    ? new SiteSelector({
        cmdb: deps.cmdb,
        labels: settings.site.labels,
        trustedResolvers: settings.site.trustedResolvers,
        loopbackAs: settings.site.loopbackAs,
        protectThreshold: settings.site.protectThreshold,
      })
    : undefined;
  const stopWatching = deps.onClusterChange?.(() => feed.clusterChanged());
  let server: DnsServer;
  try {
    await feed.start();
    const metrics = new DnsMetrics(deps.registry, { catalogue, feed });
    server = await startDnsServer({
      host: settings.listen.host,
      port: settings.listen.port,
      zone: catalogue,
      logger: log,
      udpSizeLimit: settings.udpSizeLimit,
      rateLimit: settings.rateLimit,
      observer: metrics,
      responder: { negativeTtlSeconds: settings.negativeTtlSeconds, ...(site ? { site } : {}) },
      ...(settings.upstreams.length > 0 ? { forward: { upstreams: settings.upstreams, timeoutMs: settings.forwardTimeoutMs } } : {}),
    });
  } catch (err) {
    stopWatching?.();
    site?.close();
    await feed.close();
    throw err;
  }
  const listen = `${settings.listen.host.includes(':') ? `[${settings.listen.host}]` : settings.listen.host}:${server.port}`;
  log.info({ listen, zone: settings.zone, clusters: feed.status().map((c) => c.id), upstreams: settings.upstreams, sameSite: site !== undefined }, 'DNS interface serving');
  return {
    host: server.host,
    port: server.port,
    catalogue,
    feed,
    server,
    async status() {
      return {
        zone: catalogue.zone,
        listen,
        upstreams: settings.upstreams,
        sameSite: { cmdb: site !== undefined, labels: settings.site.labels, trustedResolvers: settings.site.trustedResolvers, protectThreshold: settings.site.protectThreshold },
        clusters: [...feed.status(), ...missing.map((id): DnsMissingCluster => ({ id, state: 'missing' }))],
        catalogue: catalogue.stats(),
        collisions: catalogue
          .collisions()
          .sort((a, b) => a.name.localeCompare(b.name))
          .slice(0, 100),
        server: server.stats(),
      };
    },
    async close() {
      stopWatching?.();
      await server.close();
      site?.close();
      await feed.close();
    },
  };
}
