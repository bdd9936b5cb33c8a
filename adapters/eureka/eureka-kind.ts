import { ClusterConfigError, kindOptions, type ClusterSpec, type KindDescriptor } from '../../src/model/index.js';
import { createEurekaAdapter } from './eureka-adapter.js';
import { EurekaConfigError } from './eureka-config-error.js';
import { EUREKA_OPTIONS, parseEurekaCluster } from './eureka-options.js';

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
  options: kindOptions(EUREKA_OPTIONS),
  validate,
  create: (spec, deps) => createEurekaAdapter(spec, deps),
  reportsRequestErrors: false,
};
