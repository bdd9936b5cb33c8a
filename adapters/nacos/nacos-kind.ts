import { ClusterConfigError, kindOptions, warmupOptionSpec, type ClusterSpec, type KindDescriptor, type KindOptionSpec } from '../../src/model/index.js';
import { createNacosAdapter } from './nacos-adapter.js';
import { NacosConfigError } from './nacos-config-error.js';
import { parseEndpoint, parseNacosOptions, type NacosAdapterOptions } from './nacos-options.js';

/** Each option's type and what it does; keyed by the options type, so that a new option without them does not compile. */
const OPTIONS: Readonly<Record<keyof NacosAdapterOptions, KindOptionSpec>> = {
  apiVersion: { type: 'string', choices: ['auto', 'grpc', 'v1', 'v3'], description: 'Protocol: auto (default: gRPC where the gRPC port answers, else HTTP v1 where served, else v3), grpc, v1 or v3.' },
  grpcPort: { type: 'integer', description: 'gRPC port of the servers (default each endpoint\'s port + 1000).' },
  clientIP: { type: 'string', description: 'Address the server pushes changes to; default the local address of a connection to the cluster.' },
  pollIntervalMs: { type: 'integer', description: 'How often each watched service is re-listed (default 5000).' },
  maxConcurrency: { type: 'integer', description: 'Requests in flight against the cluster at most (default 64).' },
  requestTimeoutMs: { type: 'integer', description: 'Per request and endpoint attempt (default 5000).' },
  servicePageSize: { type: 'integer', description: 'Page size of service lists (default 500).' },
  serviceListPollIntervalMs: { type: 'integer', description: 'How often the service lists of `*` tasks are polled where nothing pushes them (Nacos 2.x, HTTP, over the fuzzy-watch limits), and the namespace list of a pushed namespace `*` scope is read (default 10000).' },
  lightBeats: { type: 'boolean', description: 'v1: beats without the instance body once the server allows it (default true).' },
  contextPath: { type: 'string', description: 'Server context path (default /nacos).' },
  heartbeatIntervalMs: { type: 'integer', description: 'Beat interval assumed until the server tells one (default 5000).' },
  warmupSeconds: warmupOptionSpec("30: the server's deletion timeout of ephemeral instances (beats every 5 s, unhealthy after 15 s, deleted after 30 s)"),
};

/**
 * The checks the adapter's constructor makes on endpoints and options, before anything connects.
 * Credentials are left to the constructor: a PUT may keep a stored password it never shows.
 */
function validate(spec: ClusterSpec): void {
  try {
    if (spec.endpoints.length === 0) throw new NacosConfigError(spec.id, 'endpoints', 'at least one host:port is needed');
    parseNacosOptions(spec);
    for (const endpoint of spec.endpoints) parseEndpoint(spec.id, endpoint);
  } catch (err) {
    if (err instanceof NacosConfigError) throw new ClusterConfigError(spec.id, err.setting, err.detail, { cause: err });
    throw err;
  }
}

/** The Nacos kind: SDK gRPC (2.x/3.x: pushes, connection-bound copies) or HTTP API v1/v3 (UDP push where served, heartbeats). */
export const nacosKind: KindDescriptor<'nacos'> = {
  name: 'nacos',
  label: 'Nacos',
  defaultPort: 8848,
  usesCredentials: true,
  endpointsRequired: true,
  nacosSyncType: 'NACOS',
  options: kindOptions(OPTIONS),
  validate,
  create: (spec, deps) => createNacosAdapter(spec, deps),
  warmupMs: (spec) => parseNacosOptions(spec).warmupSeconds * 1000,
  reportsRequestErrors: true,
};
