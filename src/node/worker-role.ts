import type { Logger } from 'pino';
import type { CmdbCache } from '../cmdb/cache.js';
import { createShardCoordinator, DEFAULT_LEASE_TTL_MS, type ShardCoordinator } from '../coord/index.js';
import type { ControlMessage } from '../engine/control-bus.js';
import type { SyncEngine } from '../engine/sync-engine.js';
import { ShardWorker, type ReconcileJobData } from '../queue/shard-queue.js';
import type { Connections } from './connections.js';
import type { Lifecycle } from './lifecycle.js';
import type { TransportStats } from '../model/adapter.js';
import type { NodeCore } from './core.js';
import { redisKeys } from '../util/redis-keys.js';

/** What the worker role takes from the process's settings. */
export interface WorkerSettings {
  prefix: string;
  logger: Logger;
  /** Every role of this process (recorded in its membership). */
  roles: readonly string[];
  leaseTtlMs?: number | undefined;
  /** How long a leader keeps its copies alive while Redis does not answer, ms; default three lease TTLs. */
  redisGraceMs?: number | undefined;
  /** Reconciles at once in this process, shared among the shards it serves (at least 4 each). Default 32. */
  concurrency?: number | undefined;
  cmdb?: { cache: CmdbCache; describe: string } | undefined;
}

/**
 * Starts the worker role: joins the deployment's workers, serves the shards rendezvous hashing
 * gives it (a BullMQ worker per shard queue, whose outcome may ask for a later reconcile), and for
 * the shards it leads watches the sources, beats the copies and runs the full syncs. Each part is
 * a step of `lifecycle`, so the process stops them in reverse: leases first (the other replicas
 * take over at once), then the engine, then the shard workers (running reconciles finish).
 */
export async function startWorkerRole(core: NodeCore, connections: Connections, settings: WorkerSettings, lifecycle: Lifecycle): Promise<ShardCoordinator> {
  const { engine, bus, metrics, liveSets, leadership, sets } = core;
  const log = settings.logger.child({ component: 'node', worker: bus.id });
  const workers = new Map<number, ShardWorker>();
  lifecycle.defer('shard workers', async () => {
    await Promise.all([...workers.values()].map((w) => w.close()));
    workers.clear();
  }, 15_000);
  const coordinator = await createShardCoordinator({
    redis: connections.store,
    subscriber: connections.connect({ maxRetriesPerRequest: null }),
    prefix: settings.prefix,
    id: bus.id,
    roles: [...settings.roles],
    shards: core.deployment.shards,
    replicas: core.deployment.replicas,
    leaseTtlMs: settings.leaseTtlMs,
    leaseGraceMs: settings.redisGraceMs ?? 3 * (settings.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS),
    logger: settings.logger,
    status: workerStatus(core, settings.cmdb),
  });
  leadership.attach(coordinator);
  metrics.knowShards(core.deployment.shards);
  coordinator.on('replicas', (served) => {
    serveShards(core, connections, settings, workers, served, log);
    // Every replica, leader or not, publishes its shards' sets on connection-bound destinations.
    void sets.serve(served).catch((err: unknown) => log.warn({ err }, 'cannot publish the sets of the shards served'));
  });
  followLeadership(core, coordinator, log);
  await liveSets.listen(
    connections.subscriber,
    (shard, key) => {
      sets.changed(shard, key);
      if (!leadership.leads(shard)) return;
      void liveSets
        .get(key, shard)
        .then((instances) => engine.restoreBeats(key, instances))
        .catch((err: unknown) => log.warn({ err, key }, 'cannot take over beats'));
    },
    log,
  );
  await bus.listen(connections.subscriber, bus.id, (message) => applyControl(engine, message));
  // The coordinator joined the workers when it was created: it leaves again if the engine cannot start.
  const startEngine = () => engine.start().catch(async (err: unknown) => {
    await coordinator.stop().catch(() => undefined);
    throw err;
  });
  await lifecycle.step('engine', startEngine, () => engine.stop(), 10_000);
  // Every worker looks for clusters that failed service syncs and probes them (one process per cluster and period).
  await lifecycle.step('recovery probes', async () => core.recovery.start(), () => core.recovery.stop(), 5_000);
  // Hand the led shards over first, so that the others start beating while this one winds down.
  await lifecycle.step('leases', () => coordinator.start(), () => coordinator.stop(), 10_000);
  if (settings.cmdb) {
    const cache = settings.cmdb.cache;
    const onLabelsChanged = (ips: string[]): void => {
      void engine.labelsChanged(ips).catch((err: unknown) => log.warn({ err }, 'cannot queue the re-labelling of copies; the next full sync does it'));
    };
    cache.on('change', onLabelsChanged);
    lifecycle.defer('CMDB changes', () => cache.off('change', onLabelsChanged));
  }
  return coordinator;
}

/** Takes a shard over when this worker comes to lead it (beats first, then watches), and lets it go when it stops. */
function followLeadership(core: NodeCore, coordinator: ShardCoordinator, log: Logger): void {
  const { engine, metrics, liveSets } = core;
  coordinator.on('lead', (shard, token) => {
    log.info({ shard, token }, 'leading shard');
    metrics.shardLeader(shard, true);
    void (async () => {
      for (const [key, instances] of await liveSets.load(shard)) await engine.restoreBeats(key, instances);
      await engine.leadShard(shard);
    })().catch((err: unknown) => log.warn({ err, shard }, 'taking over a shard failed; its next full sync repairs it'));
  });
  coordinator.on('unlead', (shard, reason) => {
    log.info({ shard, reason }, 'no longer leading shard');
    metrics.shardLeader(shard, false);
    engine.unleadShard(shard);
  });
}

/** Runs a shard worker for every shard served and none for the others; reconciles are shared among them. */
function serveShards(core: NodeCore, connections: Connections, settings: WorkerSettings, workers: Map<number, ShardWorker>, served: readonly number[], log: Logger): void {
  const want = new Set(served);
  for (const [shard, worker] of workers) {
    if (want.has(shard)) continue;
    workers.delete(shard);
    void worker.close().catch((err: unknown) => log.warn({ err, shard }, 'cannot close a shard worker'));
  }
  const perShard = Math.max(4, Math.ceil((settings.concurrency ?? 32) / Math.max(1, want.size)));
  for (const shard of want) {
    const running = workers.get(shard);
    if (running) {
      running.worker.concurrency = perShard;
      continue;
    }
    const connection = connections.connect({ maxRetriesPerRequest: null });
    workers.set(shard, new ShardWorker({ connection, prefix: redisKeys.queues(settings.prefix), shard, concurrency: perShard }, (data) => reconcileJob(core, data), settings.logger));
  }
  log.info({ shards: served }, 'serving shards');
}

/**
 * One queue job: a reconcile, and the later one it asks for (a guard waiting for its confirming
 * read). The recovery knows why it runs (a failed recovery marks no cluster down), and forgets a
 * recovered service sync whose task no longer runs.
 */
async function reconcileJob(core: NodeCore, data: ReconcileJobData): Promise<void> {
  const outcome = await core.recovery.run(data.key, data.reason, () => core.engine.reconciler.reconcile(data.key, data.since));
  if (outcome.kind === 'inactive' && (data.reason === 'recovery' || data.reason === 'probe')) core.recovery.forget(data.key);
  if (outcome.requeueAfterMs !== undefined) await core.queues.enqueue(data.key, 'confirm', outcome.requeueAfterMs);
}

/**
 * What this worker's membership record carries besides its identity, as an opaque record: its
 * CMDB's state, and its connections to registries that keep one (Nacos gRPC), by cluster.
 */
function workerStatus(core: NodeCore, cmdb: { cache: CmdbCache; describe: string } | undefined) {
  return () => {
    const connections: Record<string, TransportStats> = {};
    for (const [cluster, adapter] of core.adapters.built()) {
      const stats = adapter.transportStats?.();
      if (stats) connections[cluster] = stats;
    }
    return {
      ...(cmdb ? { cmdb: { provider: cmdb.describe, ...cmdb.cache.status() } } : {}),
      ...(Object.keys(connections).length > 0 ? { connections } : {}),
    };
  };
}

/** Applies a control message from another process to this process's engine. */
async function applyControl(engine: SyncEngine, message: ControlMessage): Promise<void> {
  switch (message.op) {
    case 'taskChanged':
      return engine.taskChanged(message.id);
    case 'resync':
      return engine.resync(message.id);
    case 'clusterChanged':
      return engine.clusterChanged(message.id);
    case 'removeTask':
      return engine.stopTask(message.id);
    case 'removalLapsed':
      return engine.resumeIfStopped(message.id);
  }
}
