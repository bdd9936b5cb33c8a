export { consulKind } from './consul-kind.js';
export { ConsulAdapter, createConsulAdapter, type ConsulAdapterDeps } from './consul-adapter.js';
export { CONSUL_OPTIONS, DEFAULT_CONSUL_OPTIONS, parseConsulCluster, parseConsulOptions, type ConsulAdapterOptions, type ConsulClusterConfig } from './consul-options.js';
export { EXTERNAL_SOURCE, FIELD_META, MARK_META, TAGS_KEY, copyServiceId, decodeMetaKey, encodeMetaKey, instanceOfEntry, registrationOf } from './consul-meta.js';
export { ConsulRequestError, type ConsulRequestErrorCode } from './consul-request-error.js';
export { ConsulApplyError, type ConsulWriteFailure } from './consul-apply-error.js';
export { ConsulConfigError } from './consul-config-error.js';
