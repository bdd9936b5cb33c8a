import { ClusterConfigError, kindOptions, type ClusterSpec, type KindDescriptor } from '../../src/model/index.js';
import { createConsulAdapter } from './consul-adapter.js';
import { ConsulConfigError } from './consul-config-error.js';
import { CONSUL_OPTIONS, parseConsulCluster, parseConsulOptions } from './consul-options.js';

/** The checks the factory makes, without reading the TLS files (they live on the workers). */
function validate(spec: ClusterSpec): void {
  try {
    parseConsulCluster(spec);
  } catch (err) {
    if (err instanceof ConsulConfigError) throw new ClusterConfigError(spec.id, err.setting, err.detail, { cause: err });
    throw err;
  }
}

/** The Consul kind: the catalog and health HTTP API, copies on a catalog node of regsync's own. */
export const consulKind: KindDescriptor<'consul'> = {
  name: 'consul',
  label: 'Consul',
  defaultPort: 8500,
  endpointsRequired: true,
  nacosSyncType: 'CONSUL',
  // The ACL token is the password; there are no user names.
  usesCredentials: true,
  options: kindOptions(CONSUL_OPTIONS),
  validate,
  create: (spec, deps) => createConsulAdapter(spec, deps),
  warmupMs: (spec) => parseConsulOptions(spec).warmupSeconds * 1000,
  reportsRequestErrors: false,
};
