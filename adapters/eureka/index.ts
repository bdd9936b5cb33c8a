export { eurekaKind } from './eureka-kind.js';
export { EurekaAdapter, createEurekaAdapter, type EurekaAdapterDeps } from './eureka-adapter.js';
export { DEFAULT_EUREKA_OPTIONS, EUREKA_OPTIONS, parseEurekaCluster, parseEurekaOptions, type EurekaAdapterOptions, type EurekaClusterConfig } from './eureka-options.js';
export { FIELD_META, SECURE_PORT_KEY, copyInstanceId, infoOf, instanceOfInfo, reconcileHashOf, serviceNameOf } from './eureka-meta.js';
export { EurekaFeed } from './eureka-feed.js';
export { EurekaRequestError, type EurekaRequestErrorCode } from './eureka-request-error.js';
export { EurekaApplyError, type EurekaWriteFailure } from './eureka-apply-error.js';
export { EurekaConfigError } from './eureka-config-error.js';
