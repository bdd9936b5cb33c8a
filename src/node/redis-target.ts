import { readFileSync } from 'node:fs';
import { isIPv4, isIPv6 } from 'node:net';
import type { ConnectionOptions } from 'node:tls';
import type { RedisOptions } from 'ioredis';
import { rememberSecrets } from '../log.js';
import { RedisConfigError } from './redis-config-error.js';

/** One `host:port` of a Redis URL (IPv6 without its brackets). */
export interface RedisHost {
  host: string;
  port: number;
}

/**
 * A `--redis` URL taken apart. Forms:
 * - `redis://[user:password@]host[:port][/db]`, `rediss://…` (TLS); port 6379 by default;
 * - `redis+sentinel://[user:password@]host1[:port],host2[:port]/<master>[/db]` (port 26379 by
 *   default), `rediss+sentinel://…` for TLS to the data nodes and the sentinels. Query parameters
 *   `sentinelUsername`, `sentinelPassword` (when the sentinels have their own ACL) and
 *   `sentinelTls=false` (sentinels without TLS under `rediss+sentinel`).
 *
 * IPv6 hosts go in brackets (`[::1]:6379`). User and password are percent-decoded (encode `@`, `:`,
 * `/`, `?` and `%` in them); user and password are the data nodes'.
 */
export interface RedisTarget {
  /** The URL as given, every password replaced by `***`: the only form that may be shown or logged. */
  masked: string;
  tls: boolean;
  username?: string | undefined;
  password?: string | undefined;
  db: number;
  /** The data node of `redis://` and `rediss://`. */
  node?: RedisHost | undefined;
  /** The sentinels and master name of `redis+sentinel://`. */
  sentinel?: {
    hosts: RedisHost[];
    masterName: string;
    username?: string | undefined;
    password?: string | undefined;
    tls: boolean;
  } | undefined;
}

/** Settings of every Redis connection of a process besides the URL: TLS files and the start bound. */
export interface RedisClientSettings {
  /** CA certificates that sign the servers' certificates (PEM; `--redis-ca`). Default: Node's CA list. */
  ca?: Buffer | undefined;
  /** Client certificate and key (PEM; `--redis-cert`, `--redis-key`), for servers that ask for one. */
  cert?: Buffer | undefined;
  key?: Buffer | undefined;
  /** Name checked against the server's certificate (and sent as SNI); default the host connected to. */
  servername?: string | undefined;
  /** How long the first connection may take to become ready before the process gives up (default 5000 ms). */
  connectTimeoutMs?: number | undefined;
}

/** How a connection behaves when Redis is slow or gone (see ioredis' options of the same names). */
export interface ConnectionSettings {
  /** null: commands wait for Redis to come back (queues, subscribers); a number: they fail after that many retries. */
  maxRetriesPerRequest: number | null;
  enableAutoPipelining?: boolean;
}

/** Default bound of the first connection, ms. */
export const DEFAULT_REDIS_CONNECT_TIMEOUT_MS = 5_000;

const SCHEMES: Record<string, { tls: boolean; sentinel: boolean }> = {
  'redis:': { tls: false, sentinel: false },
  'rediss:': { tls: true, sentinel: false },
  'redis+sentinel:': { tls: false, sentinel: true },
  'rediss+sentinel:': { tls: true, sentinel: true },
};
const HOSTNAME = /^(?=.{1,253}$)[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?(?:\.[A-Za-z0-9_](?:[A-Za-z0-9_-]*[A-Za-z0-9_])?)*\.?$/;
const SENTINEL_PARAMS = new Set(['sentinelUsername', 'sentinelPassword', 'sentinelTls']);
const FORMS = 'redis://[user:password@]host[:port][/db], rediss://…, redis+sentinel://[user:password@]host:port[,host:port…]/<master>[/db] or rediss+sentinel://…';

/**
 * Takes a `--redis` URL apart (see {@link RedisTarget} for the forms). Throws a
 * {@link RedisConfigError} naming the part at fault (scheme, host, port, db, master name, query
 * parameter), with passwords masked. Its passwords are remembered as secrets
 * (`rememberSecrets`), so that no log line shows them wherever a client library quotes them.
 */
export function parseRedisUrl(url: string): RedisTarget {
  const masked = maskRedisUrl(url);
  const bad = (part: string, detail: string): RedisConfigError => new RedisConfigError(part === '' ? '--redis' : `--redis ${part}`, `${detail} in ${masked}`);
  const schemeEnd = url.indexOf('://');
  const scheme = schemeEnd > 0 ? SCHEMES[`${url.slice(0, schemeEnd).toLowerCase()}:`] : undefined;
  if (scheme === undefined) throw new RedisConfigError('--redis', `${masked} is not a Redis URL; expected ${FORMS}`);
  const rest = url.slice(schemeEnd + 3);
  const authorityEnd = firstOf(rest, '/?#');
  const authority = rest.slice(0, authorityEnd);
  const hashAt = rest.indexOf('#');
  if (hashAt >= 0) throw bad('', 'a fragment (#…) has no meaning');
  const queryAt = rest.indexOf('?', authorityEnd);
  const path = rest.slice(authorityEnd, queryAt >= 0 ? queryAt : undefined);
  const query = new URLSearchParams(queryAt >= 0 ? rest.slice(queryAt + 1) : '');

  const at = authority.lastIndexOf('@');
  const { username, password } = at >= 0 ? userInfo(authority.slice(0, at), bad) : { username: undefined, password: undefined };
  const hostList = authority.slice(at + 1);
  if (hostList === '') throw bad('host', 'no host');
  const hostParts = hostList.split(',');
  if (!scheme.sentinel && hostParts.length > 1) throw bad('host', 'several hosts need redis+sentinel:// (a list of sentinels)');
  const hosts = hostParts.map((part) => parseHost(part, scheme.sentinel ? 26379 : 6379, bad));

  const segments = path === '' || path === '/' ? [] : path.slice(1).split('/');
  if (segments.length > 0 && segments[segments.length - 1] === '') segments.pop();
  let masterName: string | undefined;
  if (scheme.sentinel) {
    const name = segments.shift();
    if (name === undefined || name === '') throw bad('master name', 'no master name (redis+sentinel://host:26379/<master>)');
    masterName = decode(name, 'master name', bad);
    if (/\s/.test(masterName)) throw bad('master name', `master name ${JSON.stringify(masterName)} has white space`);
  }
  if (segments.length > 1) throw bad('path', `unexpected path ${JSON.stringify(path)}`);
  const db = segments.length === 1 ? parseDb(segments[0] as string, bad) : 0;

  for (const name of query.keys()) {
    if (!scheme.sentinel || !SENTINEL_PARAMS.has(name)) {
      throw bad(`query parameter ${name}`, scheme.sentinel ? `unknown query parameter ${JSON.stringify(name)} (known: ${[...SENTINEL_PARAMS].join(', ')})` : `unknown query parameter ${JSON.stringify(name)} (a redis:// URL takes none)`);
    }
  }
  rememberSecrets(password, query.get('sentinelPassword') ?? undefined);
  const target: RedisTarget = { masked, tls: scheme.tls, username, password, db };
  if (!scheme.sentinel) return { ...target, node: hosts[0] };
  const sentinelTls = query.get('sentinelTls');
  if (sentinelTls !== null && !['true', 'false'].includes(sentinelTls)) throw bad('query parameter sentinelTls', 'sentinelTls must be true or false');
  const sentinelPassword = query.get('sentinelPassword') ?? undefined;
  const sentinelUsername = query.get('sentinelUsername') ?? undefined;
  if (sentinelUsername !== undefined && sentinelPassword === undefined) throw bad('query parameter sentinelUsername', 'sentinelUsername needs sentinelPassword');
  return {
    ...target,
    sentinel: {
      hosts,
      masterName: masterName as string,
      username: sentinelUsername,
      password: sentinelPassword,
      tls: scheme.tls && sentinelTls !== 'false',
    },
  };
}

/**
 * The URL with every password (`user:***@`, `?sentinelPassword=***`) masked: what messages and
 * logs show. Works on any text, a malformed URL included, so that an error about it can name it.
 */
export function maskRedisUrl(url: string): string {
  const schemeEnd = url.indexOf('://');
  let out = url;
  if (schemeEnd >= 0) {
    const start = schemeEnd + 3;
    const rest = url.slice(start);
    const authority = rest.slice(0, firstOf(rest, '/?#'));
    const at = authority.lastIndexOf('@');
    if (at >= 0) {
      const info = authority.slice(0, at);
      const colon = info.indexOf(':');
      const user = colon >= 0 ? info.slice(0, colon) : info;
      out = `${url.slice(0, start)}${colon >= 0 ? `${user}:***` : user}@${rest.slice(at + 1)}`;
    }
  }
  return out.replace(/([?&]sentinelPassword=)[^&#]*/gi, '$1***');
}

/**
 * The ioredis options of one connection to `target`: a single node or a Sentinel-watched master
 * (which ioredis resolves again after every disconnect, so a failover only costs a reconnect), TLS
 * from `settings`, a reconnect on `READONLY` (a connection left on a demoted master), and reconnect
 * attempts at least every 500 ms.
 * `connectTimeout` is half the start bound, so that a TLS handshake nobody answers (a plain Redis
 * behind `rediss://`) fails within it.
 */
export function redisOptions(target: RedisTarget, settings: RedisClientSettings, connection: ConnectionSettings): RedisOptions {
  const tls = target.tls ? tlsOptions(settings) : undefined;
  const bound = settings.connectTimeoutMs ?? DEFAULT_REDIS_CONNECT_TIMEOUT_MS;
  const common: RedisOptions = {
    ...connection,
    username: target.username,
    password: target.password,
    db: target.db,
    connectTimeout: Math.max(200, Math.floor(bound / 2)),
    reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
    // Back within half a second of Redis (or a new primary) answering, whatever the outage's length.
    retryStrategy: (times: number) => Math.min(times * 50, 500),
  };
  if (target.sentinel) {
    const { sentinel } = target;
    return {
      ...common,
      sentinels: sentinel.hosts.map((h) => ({ host: h.host, port: h.port })),
      name: sentinel.masterName,
      role: 'master',
      sentinelUsername: sentinel.username,
      sentinelPassword: sentinel.password,
      ...(tls ? { tls, enableTLSForSentinelMode: true } : {}),
      ...(sentinel.tls ? { sentinelTLS: tlsOptions(settings) } : {}),
      sentinelRetryStrategy: (times: number) => Math.min(times * 50, 1_000),
    };
  }
  const node = target.node as RedisHost;
  return { ...common, host: node.host, port: node.port, ...(tls ? { tls } : {}) };
}

/** `--redis-*` flags as commander hands them over. */
export interface RedisCliOptions {
  redisCa?: string | undefined;
  redisCert?: string | undefined;
  redisKey?: string | undefined;
  redisTlsServername?: string | undefined;
  /** `--redis-connect-timeout`, ms. */
  redisConnectTimeout?: number | undefined;
}

/**
 * Reads the TLS files the flags name, once, at start. Throws a {@link RedisConfigError} naming the
 * flag and the path when one cannot be read, or when only one of `--redis-cert` and `--redis-key` is given.
 */
export function redisClientSettings(opts: RedisCliOptions): RedisClientSettings {
  if ((opts.redisCert === undefined) !== (opts.redisKey === undefined)) {
    const missing = opts.redisCert === undefined ? '--redis-cert' : '--redis-key';
    throw new RedisConfigError(missing, `${missing} is missing: a client certificate needs both --redis-cert and --redis-key`);
  }
  return {
    ca: readTlsFile('--redis-ca', opts.redisCa),
    cert: readTlsFile('--redis-cert', opts.redisCert),
    key: readTlsFile('--redis-key', opts.redisKey),
    servername: opts.redisTlsServername,
    connectTimeoutMs: opts.redisConnectTimeout,
  };
}

function readTlsFile(flag: string, path: string | undefined): Buffer | undefined {
  if (path === undefined) return undefined;
  try {
    return readFileSync(path);
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
    throw new RedisConfigError(flag, `cannot read ${path} (${reason})`, { cause: err });
  }
}

function tlsOptions(settings: RedisClientSettings): ConnectionOptions {
  return {
    ...(settings.ca ? { ca: settings.ca } : {}),
    ...(settings.cert ? { cert: settings.cert } : {}),
    ...(settings.key ? { key: settings.key } : {}),
    ...(settings.servername ? { servername: settings.servername } : {}),
  };
}

type Bad = (part: string, detail: string) => RedisConfigError;

function firstOf(text: string, chars: string): number {
  for (let i = 0; i < text.length; i += 1) if (chars.includes(text[i] as string)) return i;
  return text.length;
}

function userInfo(info: string, bad: Bad): { username: string | undefined; password: string | undefined } {
  const colon = info.indexOf(':');
  if (colon < 0) {
    if (info === '') return { username: undefined, password: undefined };
    throw bad('user', 'a user needs a password (user:password@), and a password alone is written :password@');
  }
  const username = decode(info.slice(0, colon), 'user', bad);
  const password = decode(info.slice(colon + 1), 'password', bad);
  return { username: username === '' ? undefined : username, password: password === '' ? undefined : password };
}

function decode(text: string, part: string, bad: Bad): string {
  try {
    return decodeURIComponent(text);
  } catch {
    throw bad(part, `the ${part} is not percent-encoded correctly`);
  }
}

function parseHost(text: string, defaultPort: number, bad: Bad): RedisHost {
  let host: string;
  let port: string | undefined;
  if (text.startsWith('[')) {
    const close = text.indexOf(']');
    host = close > 0 ? text.slice(1, close) : '';
    if (close < 0 || !isIPv6(host)) throw bad('host', `${JSON.stringify(text)} is not a bracketed IPv6 address`);
    const after = text.slice(close + 1);
    if (after !== '' && !after.startsWith(':')) throw bad('host', `unexpected ${JSON.stringify(after)} after ${text.slice(0, close + 1)}`);
    port = after === '' ? undefined : after.slice(1);
  } else {
    const colon = text.indexOf(':');
    if (colon >= 0 && text.indexOf(':', colon + 1) >= 0) throw bad('host', `${JSON.stringify(text)}: an IPv6 address goes in brackets, [${text}]`);
    host = colon >= 0 ? text.slice(0, colon) : text;
    port = colon >= 0 ? text.slice(colon + 1) : undefined;
    if (host === '') throw bad('host', `empty host in ${JSON.stringify(text)}`);
    if (!isIPv4(host) && !HOSTNAME.test(host)) throw bad('host', `${JSON.stringify(host)} is not a host name or address`);
  }
  if (port === undefined) return { host, port: defaultPort };
  const n = Number(port);
  if (!/^\d{1,5}$/.test(port) || n < 1 || n > 65535) throw bad('port', `port ${JSON.stringify(port)} of ${host} is not a number from 1 to 65535`);
  return { host, port: n };
}

function parseDb(text: string, bad: Bad): number {
  const n = Number(text);
  if (!/^\d{1,5}$/.test(text) || n > 65535) throw bad('db', `database ${JSON.stringify(text)} is not a number`);
  return n;
}
