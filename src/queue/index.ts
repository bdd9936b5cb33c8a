export { ShardQueue, ShardWorker, shardQueueName, RECONCILE_JOB, type ReconcileJobData, type ShardQueueOptions } from './shard-queue.js';
