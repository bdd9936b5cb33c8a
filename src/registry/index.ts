export { startRegistry, buildRegistryApp, type RegistryOptions, type RunningRegistry } from './registry-server.js';
export {
  NamingStore,
  NamingError,
  DEFAULT_EXPIRY,
  PUBLIC_NAMESPACE,
  DEFAULT_GROUP,
  DEFAULT_CLUSTER,
  type ExpiryOptions,
  type StoredInstance,
  type StoredService,
  type NamespaceInfo,
} from './naming-store.js';
export { UdpPusher, type PushStats, type Subscriber } from './udp-push.js';
export { RegistryAuth, parseUsers } from './auth.js';
