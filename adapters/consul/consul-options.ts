import { DEFAULT_GROUP, DEFAULT_NAMESPACE, MAX_WARMUP_SECONDS, warmupOptionSpec, type ClusterSpec, type KindOptionSpec } from '../../src/model/index.js';
import { ConsulConfigError } from './consul-config-error.js';

/**
 * Consul settings read from `ClusterSpec.options`, every one with a default. The ACL token is the
 * cluster's `password` (kept encrypted at rest like every password); Consul has no user names.
 */
export interface ConsulAdapterOptions {
  /** Datacenter read (`?dc=`) and written (the registration's `Datacenter`). Absent: the agent's own. */
  datacenter: string | undefined;
  /** `https` for TLS; default `http`, or `https` when any TLS option is set. */
  scheme: 'http' | 'https';
  /** CA bundle (PEM file on the workers) that signs the agents' certificates; absent: the system's. */
  tlsCaFile: string | undefined;
  /** Client certificate and key (PEM files), for agents that verify incoming connections. */
  tlsCertFile: string | undefined;
  tlsKeyFile: string | undefined;
  /** Name checked in the agents' certificates; absent: the endpoint's host. */
  tlsServerName: string | undefined;
  /** Accept any certificate (tests, never production). Default false. */
  tlsSkipVerify: boolean;
  /** Consul Enterprise namespace, sent only when set (Consul CE refuses any). */
  consulNamespace: string | undefined;
  /** Consul Enterprise admin partition, sent only when set. */
  partition: string | undefined;
  /** Catalog node that holds the copies regsync writes (no agent owns it). Default `regsync`. */
  nodeName: string;
  /** Address of that node. Default `127.0.0.1`. */
  nodeAddress: string;
  /** Group of the service keys of this cluster's services (Consul has no groups). Default `DEFAULT_GROUP`. */
  group: string;
  /** Copy instances whose worst check is `warning` too (default false: only `passing`). */
  includeWarning: boolean;
  /** Reads answered by any server (`?stale`), not only the leader. Default false. */
  stale: boolean;
  /** Services never listed, read nor written. Default `['consul']` (Consul's own servers). */
  ignoreServices: string[];
  /** Per request, not blocking queries. Default 10 s. */
  requestTimeoutMs: number;
  /** How long a blocking query may wait for a change (`wait`). Default 60 s. */
  blockingWaitMs: number;
  /** Least time between two blocking queries of one service once its burst of 2 is spent. Default 250 ms. */
  blockingMinIntervalMs: number;
  /** Longest pause before a failed blocking query is retried (doubling from 100 ms). Default 30 s. */
  backoffMaxMs: number;
  /** Registrations and deregistrations one `apply` sends at once. Default 16. */
  writeConcurrency: number;
  /**
   * Blocking queries held open at once (each holds a connection; Consul allows 200 per client
   * address by default, `limits.http_max_conns_per_client`). Watches beyond it poll. Default 100.
   */
  maxBlockingQueries: number;
  /** How often a watch without a blocking query of its own reads its service. Default 5 s. */
  pollIntervalMs: number;
  /**
   * Seconds removals wait after the agent was unreachable or dropped sharply (see
   * `KindDescriptor.warmupMs`). Default 90: agents put their services back into a catalog that lost
   * them at their next anti-entropy sync, every minute in clusters of up to 128 nodes (longer in
   * larger ones), staggered by up to half of that.
   */
  warmupSeconds: number;
}

/** What an empty `options` means; exported so that docs and tests can show the defaults. */
export const DEFAULT_CONSUL_OPTIONS: ConsulAdapterOptions = {
  datacenter: undefined,
  scheme: 'http',
  tlsCaFile: undefined,
  tlsCertFile: undefined,
  tlsKeyFile: undefined,
  tlsServerName: undefined,
  tlsSkipVerify: false,
  consulNamespace: undefined,
  partition: undefined,
  nodeName: 'regsync',
  nodeAddress: '127.0.0.1',
  group: DEFAULT_GROUP,
  includeWarning: false,
  stale: false,
  ignoreServices: ['consul'],
  requestTimeoutMs: 10_000,
  blockingWaitMs: 60_000,
  blockingMinIntervalMs: 250,
  backoffMaxMs: 30_000,
  writeConcurrency: 16,
  maxBlockingQueries: 100,
  pollIntervalMs: 5_000,
  warmupSeconds: 90,
};

/** What every option takes and does, for `GET /api/v1/kinds`; keyed by the options type, so that a new option without a type or description does not compile. */
export const CONSUL_OPTIONS: Readonly<Record<keyof ConsulAdapterOptions, KindOptionSpec>> = {
  datacenter: { type: 'string', description: "Datacenter read and written (default the agent's own)." },
  scheme: { type: 'string', description: 'http or https (default http; https when a TLS option is set).', choices: ['http', 'https'] },
  tlsCaFile: { type: 'string', description: "CA bundle (PEM file on the workers) of the agents' certificates (default the system's)." },
  tlsCertFile: { type: 'string', description: 'Client certificate (PEM file) for agents that verify clients.' },
  tlsKeyFile: { type: 'string', description: 'Key (PEM file) of tlsCertFile.' },
  tlsServerName: { type: 'string', description: "Name checked in the agents' certificates (default the endpoint's host)." },
  tlsSkipVerify: { type: 'boolean', description: 'Accept any certificate: tests only (default false).' },
  consulNamespace: { type: 'string', description: 'Consul Enterprise namespace, sent only when set.' },
  partition: { type: 'string', description: 'Consul Enterprise admin partition, sent only when set.' },
  nodeName: { type: 'string', description: 'Catalog node that holds the copies regsync writes (default regsync).' },
  nodeAddress: { type: 'string', description: 'Address of that node (default 127.0.0.1).' },
  group: { type: 'string', description: 'Group of the service keys of this cluster (default DEFAULT_GROUP).' },
  includeWarning: { type: 'boolean', description: 'Copy instances whose worst check is warning too (default false).' },
  stale: { type: 'boolean', description: 'Let any server answer reads (?stale), not only the leader (default false).' },
  ignoreServices: { type: 'list', description: 'Services never listed, read nor written (default consul).' },
  requestTimeoutMs: { type: 'integer', description: 'Per request, not blocking queries (default 10000).' },
  blockingWaitMs: { type: 'integer', description: 'Longest wait of a blocking query (default 60000).' },
  blockingMinIntervalMs: { type: 'integer', description: 'Least time between blocking queries of a service after a burst of 2 (default 250).' },
  backoffMaxMs: { type: 'integer', description: 'Longest pause before a failed blocking query is retried (default 30000).' },
  writeConcurrency: { type: 'integer', description: 'Registrations one apply sends at once (default 16).' },
  maxBlockingQueries: { type: 'integer', description: 'Blocking queries held open at once; watches beyond it poll (default 100; Consul allows 200 connections per client).' },
  pollIntervalMs: { type: 'integer', description: 'Period of the watches beyond maxBlockingQueries (default 5000).' },
  warmupSeconds: warmupOptionSpec("90: the agents' anti-entropy sync (every minute up to 128 nodes, staggered); raise it for larger clusters"),
};

/** A Consul endpoint: where to connect, and the name a certificate must carry. */
export interface ConsulEndpoint {
  host: string;
  port: number;
}

/** What a Consul cluster spec says, checked. */
export interface ConsulClusterConfig {
  options: ConsulAdapterOptions;
  endpoints: ConsulEndpoint[];
  /** The ACL token (the cluster's password); absent: the agent's default token. */
  token: string | undefined;
  /** The namespace of this cluster's service keys: the cluster's `namespace`, default `public`. */
  namespace: string;
}

const DEFAULT_PORT = 8500;
/** A Consul datacenter, namespace or partition name; a catalog node name. */
const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/;

/** Reads and checks a Consul cluster's endpoints, token and options; throws {@link ConsulConfigError} on the first bad one. */
export function parseConsulCluster(spec: Pick<ClusterSpec, 'id' | 'endpoints' | 'username' | 'password' | 'namespace' | 'options'>): ConsulClusterConfig {
  if (spec.username !== undefined && spec.username !== '') {
    throw new ConsulConfigError(spec.id, 'username', 'Consul has no user names: put the ACL token in password');
  }
  const endpoints = spec.endpoints.map((e) => parseEndpoint(spec.id, e));
  if (endpoints.length === 0) throw new ConsulConfigError(spec.id, 'endpoints', 'a consul cluster needs at least one host:port');
  return {
    options: parseConsulOptions(spec),
    endpoints,
    token: spec.password === undefined || spec.password === '' ? undefined : spec.password,
    namespace: spec.namespace ?? DEFAULT_NAMESPACE,
  };
}

function parseEndpoint(clusterId: string, text: string): ConsulEndpoint {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s/]+))(?::(\d{1,5}))?$/.exec(text.trim());
  const port = m?.[3] === undefined ? DEFAULT_PORT : Number(m[3]);
  if (m === null || port < 1 || port > 65535) {
    throw new ConsulConfigError(clusterId, 'endpoints', `expected host:port (port 1-65535; default ${DEFAULT_PORT}), got ${JSON.stringify(text.slice(0, 100))}`);
  }
  return { host: (m[1] ?? m[2]) as string, port };
}

/** Reads and checks the Consul options of a cluster. */
export function parseConsulOptions(spec: Pick<ClusterSpec, 'id' | 'options'>): ConsulAdapterOptions {
  const raw = spec.options ?? {};
  const d = DEFAULT_CONSUL_OPTIONS;
  const fail = (name: string, detail: string): never => {
    throw new ConsulConfigError(spec.id, `options.${name}`, detail);
  };
  const int = (name: keyof ConsulAdapterOptions, min: number, max: number): number => {
    const value = raw[name];
    if (value === undefined) return d[name] as number;
    const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) return fail(name, `expected an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
    return n;
  };
  const bool = (name: keyof ConsulAdapterOptions): boolean => {
    const value = raw[name] ?? d[name];
    if (typeof value !== 'boolean') return fail(name, `expected true or false, got ${JSON.stringify(value)}`);
    return value;
  };
  const text = (name: keyof ConsulAdapterOptions, pattern?: RegExp): string | undefined => {
    const value = raw[name];
    if (value === undefined) return d[name] as string | undefined;
    if (typeof value !== 'string' || value === '' || value.length > 4096) return fail(name, `expected a non-empty string, got ${JSON.stringify(value)?.slice(0, 100)}`);
    if (pattern !== undefined && !pattern.test(value)) return fail(name, `expected letters, digits, '.', '_' or '-' (at most 128), got ${JSON.stringify(value.slice(0, 100))}`);
    return value;
  };
  const scheme = raw.scheme ?? (['tlsCaFile', 'tlsCertFile', 'tlsKeyFile', 'tlsServerName'].some((k) => raw[k] !== undefined) || raw.tlsSkipVerify === true ? 'https' : 'http');
  if (scheme !== 'http' && scheme !== 'https') fail('scheme', `expected http or https, got ${JSON.stringify(scheme)}`);
  const ignore = raw.ignoreServices ?? d.ignoreServices;
  if (!Array.isArray(ignore) || ignore.length > 1000 || !ignore.every((n) => typeof n === 'string' && n !== '' && n.length <= 512)) {
    fail('ignoreServices', `expected a list of service names, got ${JSON.stringify(ignore)?.slice(0, 100)}`);
  }
  const options: ConsulAdapterOptions = {
    datacenter: text('datacenter', NAME),
    scheme: scheme as 'http' | 'https',
    tlsCaFile: text('tlsCaFile'),
    tlsCertFile: text('tlsCertFile'),
    tlsKeyFile: text('tlsKeyFile'),
    tlsServerName: text('tlsServerName'),
    tlsSkipVerify: bool('tlsSkipVerify'),
    consulNamespace: text('consulNamespace', NAME),
    partition: text('partition', NAME),
    nodeName: text('nodeName', NAME) as string,
    nodeAddress: text('nodeAddress') as string,
    group: text('group') as string,
    includeWarning: bool('includeWarning'),
    stale: bool('stale'),
    ignoreServices: [...(ignore as string[])],
    requestTimeoutMs: int('requestTimeoutMs', 1, 600_000),
    blockingWaitMs: int('blockingWaitMs', 1_000, 600_000),
    blockingMinIntervalMs: int('blockingMinIntervalMs', 0, 3_600_000),
    backoffMaxMs: int('backoffMaxMs', 100, 3_600_000),
    writeConcurrency: int('writeConcurrency', 1, 256),
    maxBlockingQueries: int('maxBlockingQueries', 0, 10_000),
    pollIntervalMs: int('pollIntervalMs', 100, 3_600_000),
    warmupSeconds: int('warmupSeconds', 0, MAX_WARMUP_SECONDS),
  };
  if ((options.tlsCertFile === undefined) !== (options.tlsKeyFile === undefined)) fail(options.tlsCertFile === undefined ? 'tlsCertFile' : 'tlsKeyFile', 'tlsCertFile and tlsKeyFile go together');
  if (options.scheme === 'http' && (options.tlsCaFile ?? options.tlsCertFile ?? options.tlsServerName) !== undefined) fail('scheme', 'TLS options need scheme https');
  return options;
}
