import { MAX_WARMUP_SECONDS, parseWarmupSeconds, type ClusterSpec } from '../../src/model/index.js';
import { ZooKeeperConfigError } from './zookeeper-config-error.js';

/** How services are laid out in the tree: Dubbo provider URLs, or Curator / Spring Cloud service discovery. */
export type ZooKeeperLayoutName = 'dubbo' | 'curator';

/**
 * ZooKeeper settings read from `ClusterSpec.options`, every one with a default. Unknown keys are
 * ignored (other versions of regsync, and the engine's `aliases`, may use them), wrong types are refused.
 */
export interface ZooKeeperAdapterOptions {
  layout: ZooKeeperLayoutName;
  /** Base path: `/dubbo` for Dubbo, `/services` for Curator unless set. Normalised to a leading `/`, no trailing one. */
  root: string;
  /** Session timeout asked of the server (which clamps it to its 2 to 20 ticks). */
  sessionTimeoutMs: number;
  /** How long a call waits for a connection before it fails with `zookeeper-unavailable`. */
  connectTimeoutMs: number;
  /** How long a call waits for the server's answer once sent. */
  operationTimeoutMs: number;
  /** Upper bound of the random pause before another round of connection attempts. */
  spinDelayMs: number;
  /**
   * Seconds removals wait after the ensemble was unreachable or dropped sharply (see
   * `KindDescriptor.warmupMs`). Default: two session timeouts (60 s with the default 30 s): a
   * client whose session expired re-creates its ephemeral nodes once it reconnects, which it does
   * within a session timeout; Dubbo and Curator clients use 30 to 60 s.
   */
  warmupSeconds: number;
}

/** What an empty `options` means (the root depends on the layout; see {@link defaultRoot}). */
export const DEFAULT_ZOOKEEPER_OPTIONS: Omit<ZooKeeperAdapterOptions, 'root'> = {
  layout: 'dubbo',
  sessionTimeoutMs: 30_000,
  connectTimeoutMs: 10_000,
  operationTimeoutMs: 10_000,
  spinDelayMs: 1_000,
  warmupSeconds: 60,
};

/** The root a layout uses when `options.root` is absent: `/dubbo` or `/services`. */
export function defaultRoot(layout: ZooKeeperLayoutName): string {
  return layout === 'dubbo' ? '/dubbo' : '/services';
}

/** One server of a cluster. */
export interface ZooKeeperEndpoint {
  host: string;
  port: number;
  /** `host:port`, as the connection string wants it. */
  label: string;
}

const DEFAULT_PORT = 2181;

/** Reads and checks the ZooKeeper options of a cluster; throws {@link ZooKeeperConfigError} on the first bad one. */
export function parseZooKeeperOptions(spec: Pick<ClusterSpec, 'id' | 'options'>): ZooKeeperAdapterOptions {
  const raw = spec.options ?? {};
  const fail = (name: string, detail: string): never => {
    throw new ZooKeeperConfigError(spec.id, `options.${name}`, detail);
  };
  const positiveInt = (name: Exclude<keyof ZooKeeperAdapterOptions, 'layout' | 'root' | 'warmupSeconds'>, max: number): number => {
    const value = raw[name];
    if (value === undefined) return DEFAULT_ZOOKEEPER_OPTIONS[name];
    const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > max) {
      return fail(name, `expected an integer from 1 to ${max}, got ${JSON.stringify(value)}`);
    }
    return n;
  };

  const layout = raw.layout ?? DEFAULT_ZOOKEEPER_OPTIONS.layout;
  if (layout !== 'dubbo' && layout !== 'curator') fail('layout', `expected dubbo or curator, got ${JSON.stringify(layout)}`);
  const rootValue = raw.root ?? defaultRoot(layout as ZooKeeperLayoutName);
  if (typeof rootValue !== 'string') return fail('root', `expected a path such as /dubbo, got ${JSON.stringify(rootValue)}`);
  const root = `/${rootValue.replace(/^\/+/, '').replace(/\/+$/, '')}`;
  if (root === '/' || root.split('/').slice(1).some((segment) => segment === '' || segment === '.' || segment === '..')) {
    fail('root', `expected a path such as /dubbo (not / itself, no empty or relative segments), got ${JSON.stringify(rootValue)}`);
  }

  const sessionTimeoutMs = positiveInt('sessionTimeoutMs', 24 * 3_600_000);
  const warmupSeconds =
    parseWarmupSeconds(raw.warmupSeconds, Math.min(MAX_WARMUP_SECONDS, Math.ceil((2 * sessionTimeoutMs) / 1000))) ??
    fail('warmupSeconds', `expected an integer from 0 to ${MAX_WARMUP_SECONDS}, got ${JSON.stringify(raw.warmupSeconds)}`);
  return {
    layout: layout as ZooKeeperLayoutName,
    root,
    sessionTimeoutMs,
    connectTimeoutMs: positiveInt('connectTimeoutMs', 3_600_000),
    operationTimeoutMs: positiveInt('operationTimeoutMs', 3_600_000),
    spinDelayMs: positiveInt('spinDelayMs', 600_000),
    warmupSeconds,
  };
}

/**
 * Parses one endpoint: `host:port` or `host` (port 2181). Chroot paths are refused (`options.root`
 * says where the services are), and so are IPv6 literals, which the client library cannot parse
 * (use a host name that resolves to the address).
 */
export function parseZooKeeperEndpoint(clusterId: string, text: string): ZooKeeperEndpoint {
  const fail = (detail: string): never => {
    throw new ZooKeeperConfigError(clusterId, 'endpoints', `${JSON.stringify(text)} ${detail}`);
  };
  if (typeof text !== 'string') return fail('is not host:port');
  const trimmed = text.trim();
  if (trimmed.includes('/')) fail('must be host:port only (set options.root for a base path)');
  if (trimmed.startsWith('[')) fail('is an IPv6 literal, which the ZooKeeper client cannot use; give a host name');
  const match = /^([^:[\]\s,]+)(?::(\d{1,5}))?$/.exec(trimmed);
  if (!match) return fail('is not host:port');
  const host = match[1] as string;
  const port = match[2] === undefined ? DEFAULT_PORT : Number(match[2]);
  if (port < 1 || port > 65_535) fail('has a port outside 1-65535');
  return { host, port, label: `${host}:${port}` };
}
