export { replicasFor, shardOf, stableHash } from './rendezvous.js';
export {
  DEFAULT_REPLICAS,
  DEFAULT_SHARDS,
  DeploymentMismatchError,
  ensureDeployment,
  readDeployment,
  type Deployment,
  type DeploymentSettings,
} from './deployment.js';
export { defaultWorkerId, listWorkers, Membership, type MembershipOptions, type WorkerInfo } from './membership.js';
export {
  acquireLease,
  DEFAULT_LEASE_TTL_MS,
  LeaseManager,
  leaseKey,
  readLease,
  readLeases,
  releaseLease,
  renewLease,
  type LeaseManagerOptions,
  type LeaseRecord,
} from './lease.js';
export {
  ShardCoordinator,
  createShardCoordinator,
  type ShardCoordinatorOptions,
  type ShardSnapshot,
  type CreateShardCoordinatorOptions,
  type UnleadReason,
} from './shard-coordinator.js';
