import { readFileSync } from 'node:fs';
import { InvalidArgumentError } from 'commander';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { startNode, type NodeOptions, type RegsyncNode } from '../node.js';
import { loadApiTokens } from '../api/index.js';
import type { RunningCmdb } from '../cmdb/index.js';
import { startCmdbFromCli, type CmdbCliOptions } from './cmdb-options.js';
import { metricsTokenOf, parseListen } from './options.js';
import { secretBoxOfCli, type SecretKeyCliOptions } from './secret-key-options.js';
import { parseRedisUrl, redisOptions, type RedisClientSettings } from '../node/redis-target.js';

export { parseListen } from './options.js';
import { startLocalRedis, type LocalRedis } from './local-redis.js';
import { lockDataDir, type DataDirLock } from './data-dir-lock.js';
import { dnsSettingsFrom, startDnsOnRedis } from './dns-command.js';
import type { RunningDns } from '../dns/dns-service.js';
import type { DnsSettings } from '../dns/dns-config.js';
import { redisSettingsOf, type RedisCommandOptions } from './redis-options.js';

export interface UpOptions extends ShardOptions, ApiSecurityCliOptions, UpDnsOptions {
  listen: string;
  redis?: string | undefined;
  dataDir: string;
  /**
   * Start from a clean state (the demo): the local redis-server's data is removed first, or, with
   * `redis`, every key under the prefix.
   */
  fresh?: boolean | undefined;
}

/** The DNS server `regsync up` runs beside the node when `--dns-listen` or `--dns-config` is given. */
export interface UpDnsOptions {
  dnsListen?: string | undefined;
  /** Settings as a parsed `dns` section (beneath `--dns-config` and the flags); the demo's. */
  dnsSection?: Partial<DnsSettings> | undefined;
  dnsConfig?: string | undefined;
  dnsZone?: string | undefined;
  dnsClusters?: string | undefined;
  dnsUpstream?: string | undefined;
}

/** Options every worker-running command takes. */
export interface ShardOptions extends CmdbCliOptions, SecretKeyCliOptions, RedisCommandOptions {
  /** The deployment's key prefix in Redis (default `regsync`). */
  prefix?: string | undefined;
  shards?: number | undefined;
  replicas?: number | undefined;
  workerId?: string | undefined;
  leaseTtlMs?: number | undefined;
}

/** The REST API's security options (`regsync up`, `regsync api`). */
export interface ApiSecurityCliOptions {
  /** `--api-tokens-file`: a YAML/JSON list of `{name, scope, token}`. */
  apiTokensFile?: string | undefined;
  /** The `REGSYNC_API_TOKENS` list; the command line passes the environment's (the demo passes none). */
  apiTokensEnv?: string | undefined;
  /** `--rate-limit`: requests per minute from one client address; 0: no limit; absent: the default (600). */
  rateLimit?: number | undefined;
  /** `--tls-cert` and `--tls-key`: PEM files; both or neither. */
  tlsCert?: string | undefined;
  tlsKey?: string | undefined;
}

/**
 * The API's tokens and rate limit from the command line options. Throws an `ApiTokensError` naming
 * the file or variable and the entry (never a token value) when they cannot be used: called before
 * anything starts, so a bad file stops the command at once.
 */
export function apiSecurityOf(opts: ApiSecurityCliOptions): Pick<NodeOptions, 'apiTokens' | 'apiRateLimit' | 'apiTls'> {
  const apiTokens = loadApiTokens({ file: opts.apiTokensFile, env: opts.apiTokensEnv });
  const apiRateLimit = opts.rateLimit === undefined ? undefined : opts.rateLimit === 0 ? false : { max: opts.rateLimit, timeWindowMs: 60_000 };
  if ((opts.tlsCert === undefined) !== (opts.tlsKey === undefined)) throw new Error('--tls-cert and --tls-key go together: give both (PEM files) for HTTPS, or neither');
  const apiTls = opts.tlsCert !== undefined && opts.tlsKey !== undefined ? { cert: readPem(opts.tlsCert, '--tls-cert'), key: readPem(opts.tlsKey, '--tls-key') } : undefined;
  return { apiTokens, apiRateLimit, apiTls };
}

/** A PEM file given on the command line; the error names the flag and the path, never the content. */
function readPem(path: string, flag: string): Buffer {
  let data: Buffer;
  try {
    data = readFileSync(path);
  } catch (err) {
    throw new Error(`${flag} ${path}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (err as Error).message}`, { cause: err });
  }
  if (!data.includes('-----BEGIN ')) throw new Error(`${flag} ${path}: not a PEM file (no -----BEGIN line)`);
  return data;
}


/** Parses `--rate-limit`: a whole number of requests per minute, 0 for none. */
export function parseRateLimit(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value.trim()) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('expected requests per minute: a whole number, 0 for no limit');
  return n;
}


/** A running `regsync up`: the node and, when regsync started one, its local Redis. */
export interface UpHandle {
  node: RegsyncNode;
  /** The local redis-server (without `--redis`), on its data dir, which this process holds locked. */
  localRedis: LocalRedis | undefined;
  /** The DNS server, when asked for. */
  dns: RunningDns | undefined;
  close(): Promise<void>;
}

/**
 * `regsync up`: API and worker in one process. Without `--redis` (or `REGSYNC_REDIS_URL`) it starts
 * and supervises a local redis-server with its data under `--data-dir`.
 */
export async function runUp(opts: UpOptions, logger: Logger): Promise<UpHandle> {
  const listen = parseListen(opts.listen);
  const security = apiSecurityOf(opts);
  const secrets = secretBoxOfCli(opts);
  const dnsSettings = opts.dnsListen !== undefined || opts.dnsConfig !== undefined
    ? dnsSettingsFrom(opts.dnsConfig, { listen: opts.dnsListen, zone: opts.dnsZone, clusters: opts.dnsClusters, upstream: opts.dnsUpstream }, opts.dnsSection)
    : undefined;
  if (dnsSettings === undefined && [opts.dnsZone, opts.dnsClusters, opts.dnsUpstream].some((v) => v !== undefined)) {
    throw new Error('--dns-zone, --dns-clusters and --dns-upstream need a DNS server: add --dns-listen <host:port> or --dns-config <file>');
  }
  const redisUrl = opts.redis ?? (process.env.REGSYNC_REDIS_URL || undefined);
  const redis = redisSettingsOf(opts);
  const cmdb = await startCmdbFromCli(opts, logger);
  let localRedis: LocalRedis | undefined;
  let lock: DataDirLock | undefined;
  let node: RegsyncNode | undefined;
  let dns: RunningDns | undefined;
  try {
    // One process per data dir: two would share one redis-server's files.
    lock = redisUrl ? undefined : lockDataDir(opts.dataDir);
    localRedis = redisUrl ? undefined : await startLocalRedis(opts.dataDir, logger, { fresh: opts.fresh });
    const url = redisUrl ?? (localRedis as LocalRedis).url;
    if (opts.fresh && redisUrl) await removePrefix(url, redis.redis ?? {}, opts.prefix ?? 'regsync');
    node = await startWorkerNode({ redisUrl: url, listen, ...security, ...redis, secrets, dns: { status: () => dns?.status() } }, opts, cmdb, logger);
    if (dnsSettings) dns = await startDnsOnRedis({ settings: dnsSettings, redisUrl: url, redis: redis.redis, prefix: opts.prefix, store: node.store, registry: node.metrics.registry, cmdb: cmdb?.cache, logger });
  } catch (err) {
    await node?.close();
    await localRedis?.stop();
    lock?.release();
    await cmdb?.close();
    throw err;
  }
  const started = node;
  return {
    node: started,
    localRedis,
    dns,
    async close() {
      await dns?.close();
      await started.close();
      await cmdb?.close();
      await localRedis?.stop();
      lock?.release();
    },
  };
}

/** Deletes every key under `prefix` (a fresh demo on a Redis of the user's: only the demo's own prefix). */
async function removePrefix(url: string, settings: RedisClientSettings, prefix: string): Promise<void> {
  const redis = new Redis(redisOptions(parseRedisUrl(url), settings, { maxRetriesPerRequest: 1 }));
  redis.on('error', () => {});
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 500);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
}

/**
 * `regsync worker`: a sync worker without the REST API (with `--metrics-listen`, a listener serving
 * only `/metrics` and `/healthz`); closing it also closes its CMDB.
 */
export async function runWorker(
  opts: ShardOptions & { redis: string; metricsListen?: string | undefined; metricsTokenFile?: string | undefined; metricsTokenEnv?: string | undefined },
  logger: Logger,
): Promise<{ node: RegsyncNode; close(): Promise<void> }> {
  const metricsListen = opts.metricsListen === undefined ? undefined : parseListen(opts.metricsListen, '--metrics-listen');
  const metricsToken = metricsTokenOf(opts.metricsTokenFile, opts.metricsTokenEnv);
  const secrets = secretBoxOfCli(opts);
  const cmdb = await startCmdbFromCli(opts, logger);
  let node: RegsyncNode;
  try {
    node = await startWorkerNode({ redisUrl: opts.redis, roles: ['worker'], metricsListen, metricsToken, secrets, ...redisSettingsOf(opts) }, opts, cmdb, logger);
  } catch (err) {
    await cmdb?.close();
    throw err;
  }
  return {
    node,
    async close() {
      await node.close();
      await cmdb?.close();
    },
  };
}

function startWorkerNode(
  base: Pick<NodeOptions, 'redisUrl' | 'redis' | 'redisGraceMs' | 'listen' | 'roles' | 'metricsListen' | 'metricsToken' | 'apiTokens' | 'apiRateLimit' | 'apiTls' | 'dns' | 'secrets'>,
  opts: ShardOptions,
  cmdb: RunningCmdb | undefined,
  logger: Logger,
): Promise<RegsyncNode> {
  return startNode({
    ...base,
    logger,
    prefix: opts.prefix,
    shards: opts.shards,
    replicas: opts.replicas,
    workerId: opts.workerId,
    leaseTtlMs: opts.leaseTtlMs,
    cmdb: cmdb && { cache: cmdb.cache, describe: cmdb.describe },
  });
}

/** Stops `handle` on SIGINT/SIGTERM (a second signal while stopping is ignored) and exits. */
export function stopOnSignal(close: () => Promise<void>, logger: Logger): void {
  let closing = false;
  const stop = (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, 'shutting down');
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}
