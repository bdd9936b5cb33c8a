export { RegsyncMetrics, type DeploymentReadings, type RegsyncMetricsOptions } from './regsync-metrics.js';
export { startMetricsServer, type MetricsExposition, type MetricsServer } from './metrics-server.js';
export { TaskEventLog, compareIds, isStreamId, parseEntry, type TaskEventLogOptions, type TaskEventSubscription } from './task-events.js';
