export { RegsyncStore, type PutResult, type StoredSecret, type TaskSelector, type VersionedTask } from './regsync-store.js';
export { MissingServices } from './missing-services.js';
export { SourceWarmups, type SourceWarmupEvent } from './source-warmups.js';
export type { ServiceStatus } from '../model/service-status.js';
export { StoreError, type StoreErrorCode } from './store-error.js';
export { SCHEMA_MIGRATIONS, SCHEMA_VERSION, ensureSchema, type SchemaCheck, type SchemaMigration } from './schema.js';
export { SchemaVersionError } from './schema-version-error.js';
export { prepareStoredSecrets, type StoredSecretsReport } from './stored-secrets.js';
