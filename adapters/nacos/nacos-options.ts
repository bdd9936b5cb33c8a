import { isIP } from 'node:net';
import { MAX_WARMUP_SECONDS, parseWarmupSeconds, type ClusterSpec } from '../../src/model/index.js';
import { NacosConfigError } from './nacos-config-error.js';

/** The HTTP API dialects the adapter speaks. */
export type NacosApiVersion = 'v1' | 'v3';

/** What the adapter speaks to a cluster: Nacos SDK gRPC (2.x/3.x) or one of the HTTP dialects. */
export type NacosProtocol = 'grpc' | NacosApiVersion;

/**
 * Nacos settings read from `ClusterSpec.options`, every one with a default. Unknown keys are ignored
 * (other versions of regsync may know more), wrong types are refused.
 */
export interface NacosAdapterOptions {
  /**
   * `auto` (default) asks the server once: gRPC where a `ServerCheckRequest` on the gRPC port
   * answers (Nacos 2.x, 3.x: pushes over regsync's own connection, copies without heartbeats);
   * else v1 where it is served (Nacos 1.x: UDP push), v3 where v1 answers 404/410. `grpc`, `v1` and
   * `v3` force one.
   */
  apiVersion: 'auto' | NacosProtocol;
  /** The servers' gRPC port; default each endpoint's HTTP port + 1000 (Nacos' own offset). */
  grpcPort: number | undefined;
  /** Address the server pushes changes to; default: the local address of a TCP connection to the cluster. */
  clientIP: string | undefined;
  /** How often each watched service is re-listed (change detection without push, push subscription refresh). */
  pollIntervalMs: number;
  /**
   * Requests in flight against the cluster at most (a request holds its permit until this process
   * has read the answer, so a busy process needs more than the server serves at once).
   */
  maxConcurrency: number;
  /** Per request and endpoint attempt, from the moment a concurrency permit is held. */
  requestTimeoutMs: number;
  /** Page size of service lists. */
  servicePageSize: number;
  /**
   * How often each scope watched through `watchServices` (the scopes of `*` tasks) is listed, to
   * notice services appearing or vanishing before the next full sync. Default 10000 ms.
   */
  serviceListPollIntervalMs: number;
  /**
   * v1 only: once the server answers `lightBeatEnabled`, beats omit the instance body, as the Java
   * client does. A light beat for a lost instance answers `unknown` (the engine re-registers it with
   * every field) instead of the server re-creating it from the beat (enabled, weight defaults).
   * Default true; false always sends the full body.
   */
  lightBeats: boolean;
  /** Server context path. Default `/nacos`. */
  contextPath: string;
  /** `clientBeatInterval` assumed until the server tells one. Default 5000 ms. */
  heartbeatIntervalMs: number;
  /**
   * Seconds removals wait after the server was unreachable or dropped sharply (see
   * `KindDescriptor.warmupMs`). Default 30: the server's own instance deletion timeout. Ephemeral
   * instances beat every 5 s (unhealthy after 15 s, deleted after 30 s): a v1 client re-registers
   * at its first beat answered "unknown", a gRPC client at its reconnect, both well within it.
   */
  warmupSeconds: number;
}

/** What an empty `options` means; exported so that the API and docs can show the defaults. */
export const DEFAULT_NACOS_OPTIONS: NacosAdapterOptions = {
  apiVersion: 'auto',
  grpcPort: undefined,
  clientIP: undefined,
  pollIntervalMs: 5_000,
  maxConcurrency: 64,
  requestTimeoutMs: 5_000,
  servicePageSize: 500,
  serviceListPollIntervalMs: 10_000,
  lightBeats: true,
  contextPath: '/nacos',
  heartbeatIntervalMs: 5_000,
  warmupSeconds: 30,
};

/** One server of a cluster, resolved from a `host:port` (or `http(s)://host:port`) endpoint. */
export interface NacosEndpoint {
  /** `http://host:port`, what the connection pool is keyed by. */
  origin: string;
  /** Host name or address, IPv6 without brackets. */
  host: string;
  port: number;
  /** `host:port` as written in logs and errors. */
  label: string;
}

const DEFAULT_PORT = 8848;

/** Reads and checks the Nacos options of a cluster; throws {@link NacosConfigError} on the first bad one. */
export function parseNacosOptions(spec: Pick<ClusterSpec, 'id' | 'options'>): NacosAdapterOptions {
  const raw = spec.options ?? {};
  const fail = (name: string, detail: string): never => {
    throw new NacosConfigError(spec.id, `options.${name}`, detail);
  };
  const positiveInt = (name: keyof NacosAdapterOptions, max: number): number => {
    const value = raw[name];
    if (value === undefined) return DEFAULT_NACOS_OPTIONS[name] as number;
    const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > max) {
      return fail(name, `expected an integer from 1 to ${max}, got ${JSON.stringify(value)}`);
    }
    return n;
  };

  const apiVersion = raw.apiVersion ?? DEFAULT_NACOS_OPTIONS.apiVersion;
  if (apiVersion !== 'auto' && apiVersion !== 'grpc' && apiVersion !== 'v1' && apiVersion !== 'v3') {
    fail('apiVersion', `expected auto, grpc, v1 or v3, got ${JSON.stringify(apiVersion)}`);
  }
  const clientIP = raw.clientIP;
  if (clientIP !== undefined && (typeof clientIP !== 'string' || isIP(clientIP) === 0)) {
    fail('clientIP', `expected an IP address, got ${JSON.stringify(clientIP)}`);
  }
  const lightBeats = raw.lightBeats ?? DEFAULT_NACOS_OPTIONS.lightBeats;
  if (typeof lightBeats !== 'boolean') fail('lightBeats', `expected true or false, got ${JSON.stringify(lightBeats)}`);
  const contextPath = raw.contextPath ?? DEFAULT_NACOS_OPTIONS.contextPath;
  if (typeof contextPath !== 'string' || !/^(\/[A-Za-z0-9._~-]+)*$/.test(contextPath.replace(/\/$/, ''))) {
    fail('contextPath', `expected a path such as /nacos, got ${JSON.stringify(contextPath)}`);
  }

  return {
    apiVersion: apiVersion as NacosAdapterOptions['apiVersion'],
    grpcPort: raw.grpcPort === undefined ? undefined : positiveInt('grpcPort', 65_535),
    clientIP: clientIP as string | undefined,
    pollIntervalMs: positiveInt('pollIntervalMs', 24 * 3_600_000),
    maxConcurrency: positiveInt('maxConcurrency', 10_000),
    requestTimeoutMs: positiveInt('requestTimeoutMs', 600_000),
    servicePageSize: positiveInt('servicePageSize', 10_000),
    serviceListPollIntervalMs: positiveInt('serviceListPollIntervalMs', 24 * 3_600_000),
    lightBeats: lightBeats as boolean,
    contextPath: (contextPath as string).replace(/\/$/, ''),
    heartbeatIntervalMs: positiveInt('heartbeatIntervalMs', 3_600_000),
    warmupSeconds: parseWarmupSeconds(raw.warmupSeconds, DEFAULT_NACOS_OPTIONS.warmupSeconds) ?? fail('warmupSeconds', `expected an integer from 0 to ${MAX_WARMUP_SECONDS}, got ${JSON.stringify(raw.warmupSeconds)}`),
  };
}

/**
 * Parses one endpoint: `host:port`, `[v6]:port`, `host` (port 8848), or `http(s)://host[:port]`.
 * Paths are refused: the server's context path is `options.contextPath`.
 */
export function parseEndpoint(clusterId: string, text: string): NacosEndpoint {
  const trimmed = text.trim();
  const hasScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(trimmed);
  let url: URL;
  try {
    url = new URL(hasScheme ? trimmed : `http://${trimmed}`);
  } catch {
    throw new NacosConfigError(clusterId, 'endpoints', `"${text}" is not host:port`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new NacosConfigError(clusterId, 'endpoints', `"${text}": only http and https are supported`);
  }
  if ((url.pathname !== '/' && url.pathname !== '') || url.search !== '' || url.username !== '' || url.hostname === '') {
    throw new NacosConfigError(clusterId, 'endpoints', `"${text}" must be host:port only (set options.contextPath for a path)`);
  }
  const port = url.port !== '' ? Number(url.port) : hasScheme ? (url.protocol === 'https:' ? 443 : 80) : DEFAULT_PORT;
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const hostPart = host.includes(':') ? `[${host}]` : host;
  return { origin: `${url.protocol}//${hostPart}:${port}`, host, port, label: `${hostPart}:${port}` };
}
