import { ClusterConfigError, kindOptions, warmupOptionSpec, type ClusterSpec, type KindDescriptor, type KindOptionSpec } from '../../src/model/index.js';
import { createZooKeeperAdapter } from './zookeeper-adapter.js';
import { ZooKeeperConfigError } from './zookeeper-config-error.js';
import { parseZooKeeperEndpoint, parseZooKeeperOptions, type ZooKeeperAdapterOptions } from './zookeeper-options.js';

/** Each option's type and what it does; keyed by the options type, so that a new option without them does not compile. */
const OPTIONS: Readonly<Record<keyof ZooKeeperAdapterOptions, KindOptionSpec>> = {
  layout: { type: 'string', choices: ['dubbo', 'curator'], description: 'How services are laid out: dubbo (default, provider URLs) or curator (Spring Cloud service discovery).' },
  root: { type: 'string', description: 'Base path (default /dubbo, or /services for curator).' },
  sessionTimeoutMs: { type: 'integer', description: 'Session timeout asked of the server (default 30000).' },
  connectTimeoutMs: { type: 'integer', description: 'How long a call waits for a connection (default 10000).' },
  operationTimeoutMs: { type: 'integer', description: "How long a call waits for the server's answer (default 10000)." },
  spinDelayMs: { type: 'integer', description: 'Longest random pause between rounds of connection attempts (default 1000).' },
  warmupSeconds: warmupOptionSpec('two session timeouts (60 with the default sessionTimeoutMs): clients re-create their ephemeral nodes within a session timeout of reconnecting'),
};

/**
 * The checks the adapter's constructor makes on endpoints and options, before anything connects.
 * Credentials are left to the constructor: a PUT may keep a stored password it never shows.
 */
function validate(spec: ClusterSpec): void {
  try {
    if (spec.endpoints.length === 0) throw new ZooKeeperConfigError(spec.id, 'endpoints', 'at least one host:port is needed');
    parseZooKeeperOptions(spec);
    for (const endpoint of spec.endpoints) parseZooKeeperEndpoint(spec.id, endpoint);
  } catch (err) {
    if (err instanceof ZooKeeperConfigError) throw new ClusterConfigError(spec.id, err.setting, err.detail, { cause: err });
    throw err;
  }
}

/** The ZooKeeper kind: Dubbo provider URLs or Curator service instances, one session per cluster. */
export const zookeeperKind: KindDescriptor<'zookeeper'> = {
  name: 'zookeeper',
  label: 'ZooKeeper',
  defaultPort: 2181,
  usesCredentials: true,
  endpointsRequired: true,
  nacosSyncType: 'ZK',
  options: kindOptions(OPTIONS),
  validate,
  create: (spec, deps) => createZooKeeperAdapter(spec, deps),
  warmupMs: (spec) => parseZooKeeperOptions(spec).warmupSeconds * 1000,
  reportsRequestErrors: false,
};
