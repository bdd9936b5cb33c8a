import type { Logger } from 'pino';
import { KINDS, kindNamed } from '../../adapters/kinds.js';
import { shardOf, type Deployment, type ShardCoordinator } from '../coord/index.js';
import { AdapterPool, type AdapterFactory } from '../engine/adapter-pool.js';
import { ClusterRecovery } from '../engine/cluster-recovery.js';
import { ControlBus } from '../engine/control-bus.js';
import { FailedSyncs } from '../engine/failed-syncs.js';
import { HeartbeatScheduler } from '../engine/heartbeat-scheduler.js';
import { LiveSets } from '../engine/live-sets.js';
import { SetPublisher } from '../engine/set-publisher.js';
import { combineObservers } from '../engine/observer.js';
import { SourceAddresses } from '../engine/source-addresses.js';
import { SyncEngine } from '../engine/sync-engine.js';
import { countingRequestErrors } from '../metrics/adapter-errors.js';
import { RegsyncMetrics, TaskEventLog } from '../metrics/index.js';
import { ShardQueues } from '../queue/shard-queue.js';
import { MissingServices, RegsyncStore, SourceWarmups } from '../store/index.js';
import { ClusterErrorHistory } from '../store/cluster-history.js';
import type { CmdbCache } from '../cmdb/cache.js';
import type { Connections } from './connections.js';
import { redisKeys } from '../util/redis-keys.js';
import type { ClusterSpec, TaskSpec } from '../model/types.js';
import type { SecretBox } from '../secrets/secret-box.js';

/** What {@link buildCore} takes from the process's settings. */
export interface CoreSettings {
  prefix: string;
  logger: Logger;
  workerId?: string | undefined;
  confirmEmptyMs?: number | undefined;
  changeDelayMs?: number | undefined;
  adapters?: Readonly<Record<string, AdapterFactory>> | undefined;
  cmdb?: { cache: CmdbCache; describe: string } | undefined;
  /** How often a worker looks for clusters with failed service syncs and probes them (default 2000 ms; see `ClusterRecovery`). */
  recoveryProbeMs?: number | undefined;
  /** The workers' lease TTL (default 5000): a lost shard's connection-bound sets stay published three times as long. */
  leaseTtlMs?: number | undefined;
  /** Encrypts and decrypts the clusters' secrets in the store (default none: stored as given). */
  secrets?: SecretBox | undefined;
}

/**
 * Which shards this process leads, as its shard coordinator says once the worker role attached
 * one; until then (and in a process without the worker role) none. Leading here means keeping the
 * shard's copies alive (`ShardCoordinator.keepsAlive`): it lasts through the lease grace while
 * Redis does not answer, so that a failover does not let copies expire.
 */
export class Leadership {
  private coordinator: ShardCoordinator | undefined;

  attach(coordinator: ShardCoordinator): void {
    this.coordinator = coordinator;
  }

  readonly leads = (shard: number): boolean => this.coordinator?.keepsAlive(shard) ?? false;
  /** Whether the shard's lease is valid by its local deadline (no grace): for registering lost copies again. */
  readonly holdsLease = (shard: number): boolean => this.coordinator?.isLeading(shard) ?? false;
  readonly soleReplica = (shard: number): boolean => this.coordinator?.soleReplica(shard) ?? false;
}

/** The parts every role of a process shares: built at once, started by the roles. */
export interface NodeCore {
  /** The deployment's shards and replicas; an API-only process replaces it as the workers store it. */
  deployment: Deployment;
  shardOfKey: (key: string) => number;
  store: RegsyncStore;
  metrics: RegsyncMetrics;
  events: TaskEventLog;
  /** Failed registry requests per cluster and minute, added to Redis by every process (flushed by `startNode`). */
  clusterErrors: ClusterErrorHistory;
  adapters: AdapterPool;
  heartbeats: HeartbeatScheduler;
  queues: ShardQueues;
  liveSets: LiveSets;
  /** Publishes the live sets of connection-bound destinations in the shards this process is a replica of. */
  sets: SetPublisher;
  bus: ControlBus;
  leadership: Leadership;
  engine: SyncEngine;
  /** Runs the service syncs that could not reach a cluster again once it answers (the worker role starts its probes). */
  recovery: ClusterRecovery;
}

/**
 * Builds the shared parts of a process, in dependency order and without I/O: the store, metrics
 * and the task event log (which follow the engine through its observer: the engine knows
 * neither), one adapter factory per kind, the queues, and the engine with its reconciler.
 */
export function buildCore(settings: CoreSettings, connections: Connections, deployment: Deployment): NodeCore {
  const { prefix, logger } = settings;
  const redis = connections.store;
  const current = { deployment };
  const shardOfKey = (key: string): number => shardOf(key, current.deployment.shards);
  const store = new RegsyncStore(redis, prefix, settings.secrets);
  const metrics = new RegsyncMetrics({ logger });
  const events = new TaskEventLog({ redis, prefix, logger, connect: () => connections.connect({ maxRetriesPerRequest: null }) });
  const queues = new ShardQueues({ connection: connections.queue, prefix: redisKeys.queues(prefix), changeDelayMs: settings.changeDelayMs }, shardOfKey);
  const recovery = new ClusterRecovery({ failed: new FailedSyncs(redis, prefix), queue: queues, logger, probeIntervalMs: settings.recoveryProbeMs });
  const observer = combineObservers(metrics, events.observer, recovery.observer);
  const clusterErrors = new ClusterErrorHistory(redis, prefix);
  const adapters = new AdapterPool((id) => store.getCluster(id), { ...kindFactories(metrics, clusterErrors), ...settings.adapters }, logger);
  metrics.watchConnections(() => adapters.built());
  const leadership = new Leadership();
  // Checked at every beat: a leader past its lease's local deadline (and grace) sends none, even before it hears so.
  const heartbeats = new HeartbeatScheduler({ logger, observer, mayBeat: (key) => leadership.leads(shardOfKey(key)), mayRegister: (key) => leadership.holdsLease(shardOfKey(key)) });
  const liveSets = new LiveSets(redis, prefix);
  // A replacement for a dead worker may be given shards before the dead one's membership lapses (a lease TTL).
  const handoverGraceMs = 3 * (settings.leaseTtlMs ?? 5_000);
  const sets: SetPublisher = new SetPublisher({ liveSets, adapters, shardOf: shardOfKey, logger, handoverGraceMs, activeTask: (taskId): TaskSpec | undefined => engine.activeTask(taskId) });
  // Which addresses each service sync reads matters only for CMDB changes.
  const sourceAddresses = settings.cmdb ? new SourceAddresses() : undefined;
  const engine = new SyncEngine({
    store,
    adapters,
    queue: queues,
    heartbeats,
    logger,
    shardOf: shardOfKey,
    leads: leadership.leads,
    readsHere: leadership.soleReplica,
    liveSets,
    sets,
    missing: new MissingServices(redis, prefix),
    reconcile: { cmdb: settings.cmdb?.cache, observer, warmups: new SourceWarmups(redis, prefix), warmupOf },
    ...(sourceAddresses ? { sourceAddresses } : {}),
    ...(settings.confirmEmptyMs !== undefined ? { confirmMs: settings.confirmEmptyMs } : {}),
  });
  const bus = new ControlBus(redis, prefix, logger.child({ component: 'control' }), settings.workerId);
  return {
    get deployment() {
      return current.deployment;
    },
    set deployment(next: Deployment) {
      current.deployment = next;
    },
    shardOfKey,
    store,
    metrics,
    events,
    clusterErrors,
    adapters,
    heartbeats,
    queues,
    liveSets,
    sets,
    bus,
    leadership,
    engine,
    recovery,
  };
}

/** A source cluster's warm-up (ms), by its kind (see `KindDescriptor.warmupMs`); 0 for a kind or options this build cannot read. */
function warmupOf(spec: ClusterSpec): number {
  try {
    return kindNamed(spec.kind)?.warmupMs(spec) ?? 0;
  } catch {
    return 0;
  }
}

/** One factory per kind, each counting its failed requests (in the metrics and the cluster's error history): through the kind's own hook, else by wrapping its calls. */
function kindFactories(metrics: RegsyncMetrics, clusterErrors: ClusterErrorHistory): Record<string, AdapterFactory> {
  return Object.fromEntries(
    KINDS.map((kind): [string, AdapterFactory] => [
      kind.name,
      (spec, deps) => {
        const onRequestError = (code: string): void => {
          metrics.adapterRequestError(spec.id, code);
          clusterErrors.count(spec.id, code);
        };
        return kind.reportsRequestErrors ? kind.create(spec, { ...deps, onRequestError }) : countingRequestErrors(kind.create(spec, deps), onRequestError);
      },
    ]),
  );
}
