export { RegsyncStore, type PutResult, type TaskSelector, type VersionedTask } from './regsync-store.js';
export type { ServiceStatus } from './service-status.js';
export { StoreError, type StoreErrorCode } from './store-error.js';
