/**
 * Every Redis key and channel name regsync uses, built here and nowhere else, each under the
 * deployment's prefix (default `regsync`), so that several deployments (or tests) can share one
 * Redis and an operator can find every key of one in a single list:
 *
 * | key | type | what |
 * |---|---|---|
 * | `<p>:clusters`, `<p>:cluster:<id>` | set, string | cluster ids; one cluster's JSON |
 * | `<p>:tasks`, `<p>:task:<id>` | set, string | task ids; one task's JSON |
 * | `<p>:task-selectors`, `<p>:task-selector-of` | hash | selector -> task id, task id -> selector |
 * | `<p>:task-status:<task>` | hash | one service status per service |
 * | `<p>:task-error:<task>` | string | the task-level error |
 * | `<p>:task-missing:<task>` | hash | service sync key -> since when a `*` task's source misses it |
 * | `<p>:task-guard:<task>` | hash | one service's guard memory (first empty read, copy counts of the window) |
 * | `<p>:release:<task>:<service>` | string | an operator's release of a held mass deletion (1 h) |
 * | `<p>:deployment` | string | shards and replicas, fixed at the first start |
 * | `<p>:schema`, `<p>:schema-lock` | string | the version of the state's layout; held while a process migrates it |
 * | `<p>:source-warmup:<cluster>` | string | a source cluster's warm-up: since when it has been unreachable, or when its warm-up started and ends (JSON) |
 * | `<p>:cluster-reach:<id>` | string | `up` or `down`: whether the last reconcile that used the cluster reached it (for its `cluster` events) |
 * | `<p>:failed-syncs:<id>`, `<p>:cluster-down:<id>` | set, string | service sync keys whose reconcile could not reach the cluster; set while a reconcile (not a recovery) failed so since the last drain |
 * | `<p>:failed-clusters`, `<p>:recovery-probe:<id>` | set, string | clusters with failed service syncs; held by the process that probes one for a period |
 * | `<p>:workers`, `<p>:worker:<id>` | zset, string | live workers by last heartbeat; one worker's record |
 * | `<p>:workers:events` | channel | workers joining and leaving |
 * | `<p>:lease:<shard>`, `<p>:lease-token:<shard>`, `<p>:lease-since:<shard>` | string | a shard's leader, its token counter, when the token was handed out |
 * | `<p>:live:<shard>` | hash | service sync key -> the ephemeral copies its leader beats |
 * | `<p>:live` | channel | a reconcile elsewhere changed a live set |
 * | `<p>:control`, `<p>:ack:<nonce>` | channel, list | task and cluster changes told to every process; their acknowledgements |
 * | `<p>:removing:<task>` | string | held while a process removes a task's copies; the others run the task again when it lapses |
 * | `<p>:events`, `<p>:events:task:<task>` | stream | task events of the deployment, and of one task |
 * | `<p>:history:<task>`, `<p>:history-period` | list, string | a task's samples of the last hour (copies, max lag); the last period sampled |
 * | `<p>:cluster-errors:<cluster>:<minute>` | hash | error code -> failed requests to the cluster in that minute (unix minute), of every process; expires an hour after it |
 * | `<p>:bull:...` | (BullMQ) | the shard queues, one per shard (`shard-<n>`) |
 *
 * Ids and tasks are used as given (the API allows only DNS-label ids); service parts are encoded
 * by the callers (`encodeURIComponent`), so no name can reach into another key.
 */
export const redisKeys = {
  clusters: (p: string) => `${p}:clusters`,
  cluster: (p: string, id: string) => `${p}:cluster:${id}`,
  tasks: (p: string) => `${p}:tasks`,
  task: (p: string, id: string) => `${p}:task:${id}`,
  taskSelectors: (p: string) => `${p}:task-selectors`,
  taskSelectorOf: (p: string) => `${p}:task-selector-of`,
  taskStatus: (p: string, taskId: string) => `${p}:task-status:${taskId}`,
  taskError: (p: string, taskId: string) => `${p}:task-error:${taskId}`,
  taskMissing: (p: string, taskId: string) => `${p}:task-missing:${taskId}`,
  taskGuard: (p: string, taskId: string) => `${p}:task-guard:${taskId}`,
  release: (p: string, taskId: string, serviceField: string) => `${p}:release:${taskId}:${serviceField}`,
  deployment: (p: string) => `${p}:deployment`,
  schema: (p: string) => `${p}:schema`,
  schemaLock: (p: string) => `${p}:schema-lock`,
  clusterReach: (p: string, id: string) => `${p}:cluster-reach:${id}`,
  failedSyncs: (p: string, id: string) => `${p}:failed-syncs:${id}`,
  clusterDown: (p: string, id: string) => `${p}:cluster-down:${id}`,
  failedClusters: (p: string) => `${p}:failed-clusters`,
  recoveryProbe: (p: string, id: string) => `${p}:recovery-probe:${id}`,
  sourceWarmup: (p: string, clusterId: string) => `${p}:source-warmup:${clusterId}`,
  workers: (p: string) => `${p}:workers`,
  workerEvents: (p: string) => `${p}:workers:events`,
  worker: (p: string, id: string) => `${p}:worker:${id}`,
  lease: (p: string, shard: number) => `${p}:lease:${shard}`,
  leaseToken: (p: string, shard: number) => `${p}:lease-token:${shard}`,
  leaseSince: (p: string, shard: number) => `${p}:lease-since:${shard}`,
  liveSet: (p: string, shard: number) => `${p}:live:${shard}`,
  liveChannel: (p: string) => `${p}:live`,
  controlChannel: (p: string) => `${p}:control`,
  ack: (p: string, nonce: string) => `${p}:ack:${nonce}`,
  removing: (p: string, taskId: string) => `${p}:removing:${taskId}`,
  events: (p: string) => `${p}:events`,
  taskEvents: (p: string, taskId: string) => `${p}:events:task:${encodeURIComponent(taskId)}`,
  taskHistory: (p: string, taskId: string) => `${p}:history:${taskId}`,
  historyPeriod: (p: string) => `${p}:history-period`,
  clusterErrors: (p: string, clusterId: string, minute: number) => `${p}:cluster-errors:${clusterId}:${minute}`,
  /** The prefix BullMQ puts before its own keys of the shard queues. */
  queues: (p: string) => `${p}:bull`,
} as const;
