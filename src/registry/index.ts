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
  type PublishedInput,
  type NamespaceInfo,
  type ServiceSettings,
} from './naming-store.js';
export {
  parseLabelExpression,
  parseSelector,
  selectProviders,
  SelectorError,
  NONE_SELECTOR,
  type LabelSource,
  type SelectorProvider,
  type ServiceSelector,
} from './label-selector.js';
export { UdpPusher, type PushStats, type Subscriber } from './udp-push.js';
export { RegistryAuth, parseUsers } from './auth.js';
export {
  startGrpcServer,
  type GrpcServerOptions,
  type GrpcServerContext,
  type GrpcServerStats,
  type RunningGrpcServer,
} from './grpc/grpc-server.js';
export { GrpcConnection, type ConnectionSetup } from './grpc/connection.js';
