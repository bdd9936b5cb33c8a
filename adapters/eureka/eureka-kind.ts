import { ClusterConfigError, kindOptions, type ClusterSpec, type KindDescriptor } from '../../src/model/index.js';
import { createEurekaAdapter } from './eureka-adapter.js';
import { EurekaConfigError } from './eureka-config-error.js';
import { EUREKA_OPTIONS, parseEurekaCluster, parseEurekaOptions } from './eureka-options.js';

function validate(spec: ClusterSpec): void {
  try {
    parseEurekaCluster(spec);
  } catch (err) {
    if (err instanceof EurekaConfigError) throw new ClusterConfigError(spec.id, err.setting, err.detail, { cause: err });
    throw err;
  }
}

/** The Eureka kind: the REST API v2 of Netflix and Spring Cloud servers; copies renewed by the heartbeat proxy. */
export const eurekaKind: KindDescriptor<'eureka'> = {
  name: 'eureka',
  label: 'Eureka',
  defaultPort: 8761,
  endpointsRequired: true,
  // HTTP basic authentication, when the servers ask for it.
  usesCredentials: true,
  nacosSyncType: 'EUREKA',
  // nacos-sync stores a Eureka server as its service URL: the path is the context path.
  connectKeyUrl: (url) => ({
    // A URL's host keeps the brackets of an IPv6 address; no port is the scheme's own.
    endpoint: `${url.hostname}:${url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : url.port}`,
    options: {
      contextPath: url.pathname.replace(/\/+$/, '').replace(/\/apps$/, '') || '/',
      ...(url.protocol === 'https:' ? { scheme: 'https' } : {}),
    },
  }),
  options: kindOptions(EUREKA_OPTIONS),
  validate,
  create: (spec, deps) => createEurekaAdapter(spec, deps),
  warmupMs: (spec) => parseEurekaOptions(spec).warmupSeconds * 1000,
  reportsRequestErrors: false,
};
