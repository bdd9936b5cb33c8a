export { RegsyncStore, type PutResult, type StoredSecret, type TaskSelector, type VersionedTask } from './regsync-store.js';
export { MissingServices } from './missing-services.js';
export type { ServiceStatus } from '../model/service-status.js';
export { StoreError, type StoreErrorCode } from './store-error.js';
export { prepareStoredSecrets, type StoredSecretsReport } from './stored-secrets.js';
