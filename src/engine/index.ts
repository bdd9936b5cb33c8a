export { transform, diff, sameInstance, pathOf, type TransformContext, type TransformResult, type SyncPlan, type SkipReason } from './transform.js';
export { HeartbeatScheduler, type HeartbeatStats, type HeartbeatOptions } from './heartbeat-scheduler.js';
export { AdapterPool, ClusterUnavailableError, type AdapterFactory } from './adapter-pool.js';
export { Reconciler, type EngineStore, type ServiceSyncStatus, type ReconcileOutcome, type ReconcilerOptions } from './reconciler.js';
export { SyncEngine, taskKeyPrefix, type ReconcileSink, type SyncEngineOptions } from './sync-engine.js';
export type { TaskControl } from './control.js';
