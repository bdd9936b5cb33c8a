import { DEFAULT_GROUP, DEFAULT_NAMESPACE, MAX_WARMUP_SECONDS, warmupOptionSpec, type ClusterSpec, type KindOptionSpec } from '../../src/model/index.js';
import { EurekaConfigError } from './eureka-config-error.js';

/** Eureka settings read from `ClusterSpec.options`, every one with a default. */
export interface EurekaAdapterOptions {
  /** Path of the REST API: `/eureka` (Spring Cloud, default) or `/eureka/v2` (Netflix). */
  contextPath: string;
  /** `http` (default) or `https`. */
  scheme: 'http' | 'https';
  /** Group of this cluster's service keys (Eureka has none). Default `DEFAULT_GROUP`. */
  group: string;
  /** How often the registry's changes are fetched (`/apps/delta`), as Eureka clients do. Default 30 s. */
  pollIntervalMs: number;
  /** A full fetch (`/apps`) at least every this many polls, whatever the deltas say. Default 20. */
  fullFetchEvery: number;
  /**
   * How long list reads may lag behind this process's writes (the server's read-only response
   * cache, 30 s by default, plus its refresh): for that long a read shows what was written. Default 35 s.
   */
  readCacheMs: number;
  /** Lease renewal interval written on copies, and how often they are renewed. Default 30 s. */
  renewalIntervalS: number;
  /** Lease duration written on copies. Default 90 s. */
  leaseDurationS: number;
  /** `dataCenterInfo.name` written on copies: `MyOwn` (default), `Netflix`. */
  dataCenterName: 'MyOwn' | 'Netflix';
  /** Per request. Default 10 s. */
  requestTimeoutMs: number;
  /** Registrations and cancels one `apply` sends at once. Default 16. */
  writeConcurrency: number;
  /**
   * Seconds removals wait after the server was unreachable or dropped sharply (see
   * `KindDescriptor.warmupMs`). Default 60: two renew intervals of Eureka clients (30 s each), by
   * which every live client has renewed, and re-registered where the server answered 404.
   */
  warmupSeconds: number;
}

export const DEFAULT_EUREKA_OPTIONS: EurekaAdapterOptions = {
  contextPath: '/eureka',
  scheme: 'http',
  group: DEFAULT_GROUP,
  pollIntervalMs: 30_000,
  fullFetchEvery: 20,
  readCacheMs: 35_000,
  renewalIntervalS: 30,
  leaseDurationS: 90,
  dataCenterName: 'MyOwn',
  requestTimeoutMs: 10_000,
  writeConcurrency: 16,
  warmupSeconds: 60,
};

/** What every option takes and does, for `GET /api/v1/kinds`. */
export const EUREKA_OPTIONS: Readonly<Record<keyof EurekaAdapterOptions, KindOptionSpec>> = {
  contextPath: { type: 'string', description: 'Path of the REST API: /eureka (Spring Cloud, default) or /eureka/v2 (Netflix).' },
  scheme: { type: 'string', description: 'http (default) or https.', choices: ['http', 'https'] },
  group: { type: 'string', description: 'Group of this cluster\'s service keys (default DEFAULT_GROUP).' },
  pollIntervalMs: { type: 'integer', description: 'How often changes are fetched from /apps/delta (default 30000).' },
  fullFetchEvery: { type: 'integer', description: 'A full fetch of /apps at least every this many polls (default 20).' },
  readCacheMs: { type: 'integer', description: "How long reads may lag behind this process's writes: the server's response cache (default 35000)." },
  renewalIntervalS: { type: 'integer', description: 'Lease renewal interval of copies, and how often they are renewed (default 30).' },
  leaseDurationS: { type: 'integer', description: 'Lease duration of copies (default 90).' },
  dataCenterName: { type: 'string', description: 'dataCenterInfo.name of copies (default MyOwn).', choices: ['MyOwn', 'Netflix'] },
  requestTimeoutMs: { type: 'integer', description: 'Per request (default 10000).' },
  writeConcurrency: { type: 'integer', description: 'Registrations one apply sends at once (default 16).' },
  warmupSeconds: warmupOptionSpec('60: two renew intervals of Eureka clients (30 s)'),
};

/** A Eureka endpoint. */
export interface EurekaEndpoint {
  host: string;
  port: number;
}

/** What a Eureka cluster spec says, checked. */
export interface EurekaClusterConfig {
  options: EurekaAdapterOptions;
  endpoints: EurekaEndpoint[];
  /** HTTP basic credentials, when the servers ask for them. */
  credentials: { username: string; password: string } | undefined;
  /** The namespace of this cluster's service keys: the cluster's `namespace`, default `public`. */
  namespace: string;
}

const DEFAULT_PORT = 8761;

/** Reads and checks a Eureka cluster; throws {@link EurekaConfigError} on the first bad setting. */
export function parseEurekaCluster(spec: Pick<ClusterSpec, 'id' | 'endpoints' | 'username' | 'password' | 'namespace' | 'options'>): EurekaClusterConfig {
  const endpoints = spec.endpoints.map((text) => {
    const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]\s/]+))(?::(\d{1,5}))?$/.exec(text.trim());
    const port = m?.[3] === undefined ? DEFAULT_PORT : Number(m[3]);
    if (m === null || port < 1 || port > 65535) {
      throw new EurekaConfigError(spec.id, 'endpoints', `expected host:port (default port ${DEFAULT_PORT}; the path goes in options.contextPath), got ${JSON.stringify(text.slice(0, 100))}`);
    }
    return { host: (m[1] ?? m[2]) as string, port };
  });
  if (endpoints.length === 0) throw new EurekaConfigError(spec.id, 'endpoints', 'a eureka cluster needs at least one host:port');
  const hasUser = spec.username !== undefined && spec.username !== '';
  const hasPassword = spec.password !== undefined && spec.password !== '';
  if (hasPassword && !hasUser) throw new EurekaConfigError(spec.id, 'password', 'basic authentication needs a username too');
  return {
    options: parseEurekaOptions(spec),
    endpoints,
    credentials: hasUser ? { username: spec.username as string, password: spec.password ?? '' } : undefined,
    namespace: spec.namespace ?? DEFAULT_NAMESPACE,
  };
}

/** Reads and checks the Eureka options of a cluster. */
export function parseEurekaOptions(spec: Pick<ClusterSpec, 'id' | 'options'>): EurekaAdapterOptions {
  const raw = spec.options ?? {};
  const d = DEFAULT_EUREKA_OPTIONS;
  const fail = (name: string, detail: string): never => {
    throw new EurekaConfigError(spec.id, `options.${name}`, detail);
  };
  const int = (name: keyof EurekaAdapterOptions, min: number, max: number): number => {
    const value = raw[name];
    if (value === undefined) return d[name] as number;
    const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) return fail(name, `expected an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
    return n;
  };
  const oneOf = <T extends string>(name: keyof EurekaAdapterOptions, values: readonly T[]): T => {
    const value = raw[name] ?? d[name];
    if (typeof value !== 'string' || !(values as readonly string[]).includes(value)) return fail(name, `expected one of ${values.join(', ')}, got ${JSON.stringify(value)}`);
    return value as T;
  };
  const contextPath = raw.contextPath ?? d.contextPath;
  if (typeof contextPath !== 'string' || !/^(\/[A-Za-z0-9._~-]+)*\/?$/.test(contextPath) || contextPath.length > 200) {
    fail('contextPath', `expected a path such as /eureka or /eureka/v2, got ${JSON.stringify(contextPath)?.slice(0, 100)}`);
  }
  const group = raw.group ?? d.group;
  if (typeof group !== 'string' || group === '' || group.length > 128) fail('group', `expected a non-empty string, got ${JSON.stringify(group)?.slice(0, 100)}`);
  const options: EurekaAdapterOptions = {
    contextPath: (contextPath as string).replace(/\/+$/, ''),
    scheme: oneOf('scheme', ['http', 'https']),
    group: group as string,
    pollIntervalMs: int('pollIntervalMs', 100, 3_600_000),
    fullFetchEvery: int('fullFetchEvery', 1, 100_000),
    readCacheMs: int('readCacheMs', 0, 3_600_000),
    renewalIntervalS: int('renewalIntervalS', 1, 3_600),
    leaseDurationS: int('leaseDurationS', 1, 86_400),
    dataCenterName: oneOf('dataCenterName', ['MyOwn', 'Netflix']),
    requestTimeoutMs: int('requestTimeoutMs', 1, 600_000),
    writeConcurrency: int('writeConcurrency', 1, 256),
    warmupSeconds: int('warmupSeconds', 0, MAX_WARMUP_SECONDS),
  };
  if (options.leaseDurationS <= options.renewalIntervalS) fail('leaseDurationS', 'must be longer than renewalIntervalS');
  return options;
}
