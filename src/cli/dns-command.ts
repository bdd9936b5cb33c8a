import type { Redis } from 'ioredis';
import { waitForRedis } from '../node/redis-ready.js';
import { openRedis } from '../node/connections.js';
import { RedisErrorLog } from '../node/redis-error-log.js';
import { DEFAULT_REDIS_CONNECT_TIMEOUT_MS, parseRedisUrl, type RedisClientSettings } from '../node/redis-target.js';
import { redisSettingsOf, type RedisCommandOptions } from './redis-options.js';
import type { Logger } from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { kindNamed } from '../../adapters/kinds.js';
import type { CmdbCache } from '../cmdb/cache.js';
import { readDnsSettingsFile, resolveDnsSettings, type DnsFlagSettings, type DnsSettings } from '../dns/dns-config.js';
import { startDns, type RunningDns } from '../dns/dns-service.js';
import { startMetricsServer, type MetricsServer } from '../metrics/index.js';
import type { RegistryAdapter } from '../model/adapter.js';
import type { ClusterSpec } from '../model/types.js';
import { RegsyncStore, ensureSchema, prepareStoredSecrets } from '../store/index.js';
import { SecretBox } from '../secrets/secret-box.js';
import { secretBoxOfCli, type SecretKeyCliOptions } from './secret-key-options.js';
import { redisKeys } from '../util/redis-keys.js';
import { startCmdbFromCli, type CmdbCliOptions } from './cmdb-options.js';
import { metricsTokenOf, parseListen } from './options.js';

/** `regsync dns` options as commander hands them over. */
export interface DnsCommandOptions extends CmdbCliOptions, DnsFlagSettings, SecretKeyCliOptions, RedisCommandOptions {
  redis: string;
  /** `--dns-config`: the DNS settings file. */
  dnsConfig?: string | undefined;
  /** The `dns:` section of the process's `--config` file (beneath `--dns-config` and the flags). */
  dnsSection?: Partial<DnsSettings> | undefined;
  /** The deployment's key prefix (default `regsync`). */
  prefix?: string | undefined;
  metricsListen?: string | undefined;
  metricsTokenFile?: string | undefined;
  /** `REGSYNC_METRICS_TOKEN`, as the command line passes it. */
  metricsTokenEnv?: string | undefined;
}

/** The settings of `--config` (or `--dns-config`) with the flags over them. */
export function dnsSettingsFrom(config: string | undefined, flags: DnsFlagSettings, base: Partial<DnsSettings> = {}): DnsSettings {
  return resolveDnsSettings({ ...base, ...(config === undefined ? {} : readDnsSettingsFile(config)) }, flags);
}

/** A cluster's adapter, read only, from its kind's factory. */
export function dnsAdapterFor(logger: Logger): (spec: ClusterSpec) => RegistryAdapter {
  return (spec) => {
    const kind = kindNamed(spec.kind);
    if (kind === undefined) throw new Error(`this build has no adapter for kind ${spec.kind}`);
    return kind.create(spec, { logger });
  };
}

/**
 * Starts a DNS interface on a deployment's Redis: clusters from the store, told of cluster changes
 * over the control channel (a connection of its own, cut on close).
 */
export async function startDnsOnRedis(options: {
  settings: DnsSettings;
  redisUrl: string;
  /** TLS files and the start bound of the connections (see `RedisClientSettings`). */
  redis?: RedisClientSettings | undefined;
  prefix?: string | undefined;
  store?: RegsyncStore | undefined;
  /** The secret keys of a store built here (checked at start as the node's); default none. */
  secrets?: SecretBox | undefined;
  registry: Registry;
  cmdb?: CmdbCache | undefined;
  logger: Logger;
}): Promise<RunningDns> {
  const prefix = options.prefix ?? 'regsync';
  const target = parseRedisUrl(options.redisUrl);
  const connections: Redis[] = [];
  const errors = new RedisErrorLog(options.logger, target, 'redis connection error (DNS)');
  const connect = () => {
    const redis = openRedis(target, options.redis ?? {}, { maxRetriesPerRequest: 3 }, errors, options.logger);
    connections.push(redis);
    return redis;
  };
  // Beside a node (`up`), the node's store, whose schema and secrets the node checked; on its own, a connection of its own.
  const own = options.store === undefined ? connect() : undefined;
  const store = options.store ?? new RegsyncStore(own as Redis, prefix, options.secrets);
  const subscriber = connect();
  const channel = redisKeys.controlChannel(prefix);
  try {
    await waitForRedis(subscriber, target, options.redis?.connectTimeoutMs ?? DEFAULT_REDIS_CONNECT_TIMEOUT_MS);
    await subscriber.subscribe(channel);
    if (own) {
      await ensureSchema(own, prefix, { logger: options.logger });
      await prepareStoredSecrets(store, options.secrets ?? SecretBox.none, options.logger);
    }
    const dns = await startDns({
      settings: options.settings,
      clusters: () => store.listClusters(),
      onClusterChange: (listener) => {
        const onMessage = (from: string, raw: string) => {
          if (from !== channel) return;
          try {
            if ((JSON.parse(raw) as { op?: string }).op === 'clusterChanged') listener();
          } catch {
            // Not ours to judge: the workers log unreadable control messages.
          }
        };
        subscriber.on('message', onMessage);
        return () => subscriber.off('message', onMessage);
      },
      adapter: dnsAdapterFor(options.logger),
      cmdb: options.cmdb,
      registry: options.registry,
      logger: options.logger,
    });
    return {
      get host() {
        return dns.host;
      },
      get port() {
        return dns.port;
      },
      catalogue: dns.catalogue,
      feed: dns.feed,
      server: dns.server,
      status: () => dns.status(),
      async close() {
        await dns.close();
        for (const c of connections) c.disconnect();
      },
    };
  } catch (err) {
    for (const c of connections) c.disconnect();
    throw err;
  }
}

/** A running `regsync dns`. */
export interface DnsCommandHandle {
  dns: RunningDns;
  metrics: MetricsServer | undefined;
  close(): Promise<void>;
}

/**
 * `regsync dns`: the DNS interface on its own, against a deployment's Redis (clusters as stored),
 * with its own CMDB and, with `--metrics-listen`, `GET /metrics`, `/healthz` and `/status`.
 */
export async function runDns(opts: DnsCommandOptions, logger: Logger): Promise<DnsCommandHandle> {
  const settings = dnsSettingsFrom(opts.dnsConfig, opts, opts.dnsSection);
  const secrets = secretBoxOfCli(opts);
  const metricsListen = opts.metricsListen === undefined ? undefined : parseListen(opts.metricsListen, '--metrics-listen');
  const metricsToken = metricsTokenOf(opts.metricsTokenFile, opts.metricsTokenEnv);
  const cmdb = await startCmdbFromCli(opts, logger);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  let dns: RunningDns | undefined;
  let metrics: MetricsServer | undefined;
  try {
    dns = await startDnsOnRedis({ settings, redisUrl: opts.redis, redis: redisSettingsOf(opts).redis, prefix: opts.prefix, secrets, registry, cmdb: cmdb?.cache, logger });
    const running = dns;
    if (metricsListen) metrics = await startMetricsServer(registry, metricsListen, logger, { '/status': () => running.status() }, metricsToken);
  } catch (err) {
    await dns?.close();
    await cmdb?.close();
    throw err;
  }
  const running = dns;
  return {
    dns: running,
    metrics,
    async close() {
      await metrics?.close();
      await running.close();
      await cmdb?.close();
    },
  };
}
