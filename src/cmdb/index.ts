export {
  IP_ENTITY_TYPE,
  type CmdbEntities,
  type CmdbEntity,
  type CmdbEvent,
  type CmdbEventType,
  type CmdbLabel,
  type CmdbProblem,
  type CmdbProvider,
} from './provider.js';
export { CmdbFileError, parseCmdbFile, type CmdbFileContent } from './document.js';
export { SnapshotCmdbProvider, type SnapshotCmdbProviderOptions, type SnapshotInstall } from './snapshot-provider.js';
export { FileCmdbProvider, type FileCmdbProviderOptions } from './file-provider.js';
export { HttpCmdbProvider, checkCmdbHeaders, parseCmdbUrl, redactUrl, type HttpCmdbProviderOptions } from './http-provider.js';
export { CmdbPluginError, type CmdbPluginErrorCode } from './plugin-error.js';
export {
  CMDB_PROVIDER_METHODS,
  PluginCmdbProvider,
  loadCmdbPlugin,
  resolvePluginModule,
  type CmdbPluginContext,
  type CreateCmdbProvider,
  type LoadCmdbPluginOptions,
} from './plugin-provider.js';
export { CmdbConfigError } from './config-error.js';
export {
  describeCmdbConfig,
  parseCmdbConfig,
  readCmdbConfig,
  startCmdb,
  validateCmdbConfig,
  type CmdbCacheSettings,
  type CmdbConfig,
  type CmdbFileConfig,
  type CmdbHttpConfig,
  type CmdbPluginConfig,
  type RunningCmdb,
} from './config.js';
export { CmdbCache, type CmdbCacheOptions, type CmdbCacheStatus } from './cache.js';
