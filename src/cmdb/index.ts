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
export {
  CmdbFileError,
  FileCmdbProvider,
  parseCmdbFile,
  type CmdbFileContent,
  type FileCmdbProviderOptions,
} from './file-provider.js';
export { CmdbCache, type CmdbCacheOptions, type CmdbCacheStatus } from './cache.js';
