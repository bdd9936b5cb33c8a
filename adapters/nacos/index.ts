export { nacosKind } from './nacos-kind.js';
export { NacosAdapter, createNacosAdapter, type NacosAdapterDeps, type NacosAdapterStats } from './nacos-adapter.js';
export {
  DEFAULT_NACOS_OPTIONS,
  parseNacosOptions,
  parseEndpoint,
  type NacosAdapterOptions,
  type NacosApiVersion,
  type NacosEndpoint,
} from './nacos-options.js';
export { NacosRequestError, type NacosRequestErrorCode, type NacosRequestErrorInit } from './nacos-request-error.js';
export { NacosAuthError } from './nacos-auth-error.js';
export { NacosApplyError, type NacosWriteFailure } from './nacos-apply-error.js';
export { NacosConfigError } from './nacos-config-error.js';
