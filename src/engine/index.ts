export { transform, diff, sameInstance, pathOf, type TransformContext, type TransformResult, type SyncPlan, type SkipReason } from './transform.js';
export { HeartbeatScheduler, type HeartbeatStats, type HeartbeatOptions } from './heartbeat-scheduler.js';
export { AdapterPool, ClusterUnavailableError, type AdapterFactory } from './adapter-pool.js';
export { Reconciler, type EngineStore, type ReconcileOutcome, type ReconcilerOptions } from './reconciler.js';
export { emptySourceGuard, instanceLimitGuard, massDeletionGuard, type EmptySourceVerdict, type MassDeletionSettings, type MassDeletionVerdict, type PlannedRemoval } from './guards.js';
export { SyncEngine, taskKeyPrefix, type MissingServiceMarks, type ReconcileSink, type SyncEngineOptions } from './sync-engine.js';
export type { TaskControl } from './control.js';
