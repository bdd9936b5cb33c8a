export { RegsyncMetrics, type DeploymentReadings, type RegsyncMetricsOptions } from './regsync-metrics.js';
export { startMetricsServer, type MetricsExposition, type MetricsServer } from './metrics-server.js';
export { TaskEventLog, compareIds, isStreamId, parseEntry, type TaskEventLogOptions, type TaskEventSubscription } from './task-events.js';
export {
  CLUSTER_STATES,
  SERVICE_SYNC_STATES,
  clusterDisplayName,
  clusterStateOf,
  deploymentOverview,
  serviceSyncState,
  taskDisplayName,
  type ClusterOverview,
  type ClusterState,
  type DeploymentOverview,
  type OverviewInput,
  type ServiceSyncState,
  type TaskOverview,
} from './deployment-overview.js';
