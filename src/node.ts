import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { createKubernetesAdapter } from '../adapters/kubernetes/index.js';
import { createNacosAdapter } from '../adapters/nacos/index.js';
import { countingRequestErrors } from './metrics/adapter-errors.js';
import { createZooKeeperAdapter } from '../adapters/zookeeper/index.js';
import { buildApiApp } from './api/index.js';
import type { ApiToken } from './api/auth-tokens.js';
import type { RateLimitSettings } from './api/rate-limit.js';
import type { CmdbCache } from './cmdb/cache.js';
import { DeploymentView } from './coord/deployment-view.js';
import {
  createShardCoordinator,
  DEFAULT_REPLICAS,
  DEFAULT_SHARDS,
  ensureDeployment,
  listWorkers,
  readDeployment,
  shardOf,
  type Deployment,
  type ShardCoordinator,
} from './coord/index.js';
import { AdapterPool, type AdapterFactory } from './engine/adapter-pool.js';
import { ControlBus, type ControlMessage } from './engine/control-bus.js';
import { HeartbeatScheduler } from './engine/heartbeat-scheduler.js';
import { combineObservers } from './engine/observer.js';
import { LiveSets } from './engine/live-sets.js';
import { SourceAddresses } from './engine/source-addresses.js';
import { Reconciler } from './engine/reconciler.js';
import { SyncEngine } from './engine/sync-engine.js';
import type { ClusterKind } from './model/types.js';
import type { TaskControl } from './engine/control.js';
import { RegsyncMetrics, startMetricsServer, TaskEventLog, type MetricsServer } from './metrics/index.js';
import { ShardQueues, ShardWorker } from './queue/shard-queue.js';
import { RegsyncStore } from './store/index.js';
import { within } from './util/within.js';

/** What one regsync process runs. */
export type NodeRole = 'api' | 'worker';

/** Settings of one regsync process. */
export interface NodeOptions {
  redisUrl: string;
  /** Default both: `regsync up`. `regsync worker` runs only `worker`, `regsync api` only `api`. */
  roles?: readonly NodeRole[];
  /** Where the REST API listens (role `api`). */
  listen?: { host: string; port: number } | undefined;
  /** Tokens the REST API requires (read or admin); none: it is open, and says so in the log. */
  apiTokens?: readonly ApiToken[] | undefined;
  /** Requests per client address the REST API takes (default 600 a minute); `false`: no limit. */
  apiRateLimit?: RateLimitSettings | false | undefined;
  /** Prefix of every Redis key (store, coordination and queues). Default `regsync`. */
  prefix?: string;
  logger: Logger;
  /** Shards and replicas of the deployment; fixed at its first start (undefined: as stored, else 8 and 2). */
  shards?: number | undefined;
  replicas?: number | undefined;
  /** This worker's id (default `<hostname>-<pid>-<random>`). */
  workerId?: string | undefined;
  /** Lease of a shard's leadership, ms (default 5000). */
  leaseTtlMs?: number | undefined;
  /** Reconciles running at once in this process, shared among the shards it serves (at least 4 each). Default 32. */
  concurrency?: number;
  /** See {@link ReconcilerOptions.confirmEmptyMs}. */
  confirmEmptyMs?: number;
  /** Delay that coalesces a burst of changes into one reconcile. Default 0 (the queue's de-duplication coalesces bursts). */
  changeDelayMs?: number;
  /** Extra or replacement adapter factories (tests, plug-ins). */
  adapters?: Partial<Record<ClusterKind, AdapterFactory>>;
  /**
   * The CMDB whose labels copies carry (see the task options `labels` and `labelsOverride`); started
   * and closed by the caller. Its changes reconcile the service syncs of the IPs they name.
   */
  cmdb?: { cache: CmdbCache; describe: string } | undefined;
  /**
   * Where a listener serving only `GET /metrics` and `GET /healthz` runs (`regsync worker
   * --metrics-listen`); default none. A process with the API serves `/metrics` on the API port anyway.
   */
  metricsListen?: { host: string; port: number } | undefined;
}

/** A running regsync process. */
export interface RegsyncNode {
  /** `http://host:port` of the API, when it listens. */
  url: string | undefined;
  /** This process's worker id (also with the `api` role alone: it names the sender of control messages). */
  id: string;
  deployment: Deployment;
  engine: SyncEngine;
  heartbeats: HeartbeatScheduler;
  queues: ShardQueues;
  store: RegsyncStore;
  app: FastifyInstance | undefined;
  /** The shard coordinator (role `worker`). */
  coordinator: ShardCoordinator | undefined;
  /** This process's Prometheus metrics (served by the API's `/metrics` and the metrics listener). */
  metrics: RegsyncMetrics;
  /** `http://host:port` of the metrics listener, when {@link NodeOptions.metricsListen} asked for one. */
  metricsUrl: string | undefined;
  /** The deployment's task event log (written by reconciles and API changes, read by the event routes). */
  events: TaskEventLog;
  /**
   * Graceful stop: hands the led shards over (leases released), lets running reconciles finish,
   * stops beats and closes connections.
   */
  close(): Promise<void>;
}

/**
 * Starts a regsync process against one Redis. Role `worker`: joins the deployment's workers, serves
 * the shards rendezvous hashing gives it (a BullMQ worker per shard queue), and for the shards it
 * leads watches the sources, beats the copies and runs the full syncs. Role `api`: the REST API,
 * which stores every change and tells every process over Redis (see {@link ControlBus}).
 */
export async function startNode(options: NodeOptions): Promise<RegsyncNode> {
  const prefix = options.prefix ?? 'regsync';
  const logger = options.logger;
  const roles = new Set(options.roles ?? ['api', 'worker']);
  const connections: Redis[] = [];
  const connect = (opts: { maxRetriesPerRequest: number | null; enableAutoPipelining?: boolean }): Redis => {
    const redis = new Redis(options.redisUrl, opts);
    redis.on('error', (err) => logger.warn({ err }, 'redis connection error'));
    connections.push(redis);
    return redis;
  };
  // Auto-pipelining: the store calls of concurrent reconciles (status writes, live sets) share round trips.
  const storeRedis = connect({ maxRetriesPerRequest: 3, enableAutoPipelining: true });
  const queueRedis = connect({ maxRetriesPerRequest: null });
  const subscriber = connect({ maxRetriesPerRequest: null });
  const closeConnections = () => {
    for (const r of connections) r.disconnect();
  };

  // Workers create the deployment (first start) or check theirs against it; an API process only
  // reads it, and reads it again for every `/api/v1/shards` (the workers may start after it).
  let deployment: Deployment;
  try {
    deployment = roles.has('worker')
      ? await ensureDeployment(storeRedis, prefix, { shards: options.shards, replicas: options.replicas })
      : ((await readDeployment(storeRedis, prefix)) ?? { shards: DEFAULT_SHARDS, replicas: DEFAULT_REPLICAS, createdAt: '' });
  } catch (err) {
    closeConnections();
    throw err;
  }
  const shardOfKey = (key: string): number => shardOf(key, deployment.shards);

  const store = new RegsyncStore(storeRedis, prefix);
  // Metrics and events follow the engine through its observer; the engine knows neither.
  const metrics = new RegsyncMetrics({ logger });
  const events = new TaskEventLog({ redis: storeRedis, prefix, logger, connect: () => connect({ maxRetriesPerRequest: null }) });
  const observer = combineObservers(metrics, events.observer);
  const nacos: AdapterFactory = (spec, deps) =>
    createNacosAdapter(spec, { ...deps, onRequestError: (code) => metrics.adapterRequestError(spec.id, code) });
  const zookeeper: AdapterFactory = (spec, deps) => countingRequestErrors(createZooKeeperAdapter(spec, deps), (kind) => metrics.adapterRequestError(spec.id, kind));
  const kubernetes: AdapterFactory = (spec, deps) => countingRequestErrors(createKubernetesAdapter(spec, deps), (kind) => metrics.adapterRequestError(spec.id, kind));
  const adapters = new AdapterPool((id) => store.getCluster(id), { nacos, zookeeper, kubernetes, ...options.adapters }, logger);
  const heartbeats = new HeartbeatScheduler({ logger, observer });
  // Bound before this process joins anything: an address in use stops it with nothing to undo.
  let metricsServer: MetricsServer | undefined;
  if (options.metricsListen) {
    try {
      metricsServer = await startMetricsServer(metrics, options.metricsListen, logger);
    } catch (err) {
      closeConnections();
      throw err;
    }
    logger.info({ url: metricsServer.url }, 'metrics listening');
  }
  const queues = new ShardQueues({ connection: queueRedis, prefix: `${prefix}:bull`, changeDelayMs: options.changeDelayMs }, shardOfKey);
  const liveSets = new LiveSets(storeRedis, prefix);
  // Which addresses each service sync reads matters only for CMDB changes.
  const sourceAddresses = options.cmdb ? new SourceAddresses() : undefined;

  const cmdb = options.cmdb;
  const onLabelsChanged = (ips: string[]): void => {
    void engine.labelsChanged(ips).catch((err: unknown) => logger.warn({ err }, 'cannot queue the re-labelling of copies; the next full sync does it'));
  };

  let coordinator: ShardCoordinator | undefined;
  const leads = (shard: number): boolean => coordinator?.isLeading(shard) ?? false;
  const reconciler: Reconciler = new Reconciler({
    store,
    adapters,
    heartbeats,
    logger,
    // Called only once reconciles run, after the engine below exists.
    activeTask: (taskId) => engine.activeTask(taskId),
    requeue: (key, delayMs) => queues.enqueue(key, 'confirm', delayMs),
    shardOf: shardOfKey,
    leads,
    liveSets,
    cmdb: options.cmdb?.cache,
    sourceAddresses,
    stillListed: (key) => engine.stillListed(key),
    observer,
    ...(options.confirmEmptyMs !== undefined ? { confirmEmptyMs: options.confirmEmptyMs } : {}),
  });
  const engine: SyncEngine = new SyncEngine({
    store,
    adapters,
    queue: queues,
    heartbeats,
    reconciler,
    logger,
    shardOf: shardOfKey,
    leads,
    readsHere: (shard) => coordinator?.soleReplica(shard) ?? false,
    liveSets,
    ...(sourceAddresses ? { sourceAddresses } : {}),
    ...(options.confirmEmptyMs !== undefined ? { confirmMs: options.confirmEmptyMs } : {}),
  });
  const bus = new ControlBus(storeRedis, prefix, logger.child({ component: 'control' }), options.workerId);
  const workers = new Map<number, ShardWorker>();
  const log = logger.child({ component: 'node', worker: bus.id });

  try {
    if (roles.has('worker')) {
      const created = await createShardCoordinator({
        redis: storeRedis,
        subscriber: connect({ maxRetriesPerRequest: null }),
        prefix,
        id: bus.id,
        roles: [...roles],
        shards: deployment.shards,
        replicas: deployment.replicas,
        leaseTtlMs: options.leaseTtlMs,
        logger,
        ...(cmdb ? { status: () => ({ cmdb: { provider: cmdb.describe, ...cmdb.cache.status() } }) } : {}),
      });
      coordinator = created;
      metrics.knowShards(deployment.shards);
      created.on('replicas', (served) => {
        const want = new Set(served);
        for (const [shard, worker] of workers) {
          if (want.has(shard)) continue;
          workers.delete(shard);
          void worker.close().catch((err: unknown) => log.warn({ err, shard }, 'cannot close a shard worker'));
        }
        const perShard = Math.max(4, Math.ceil((options.concurrency ?? 32) / Math.max(1, want.size)));
        for (const shard of want) {
          const running = workers.get(shard);
          if (running) {
            running.worker.concurrency = perShard;
            continue;
          }
          workers.set(
            shard,
            new ShardWorker(
              { connection: connect({ maxRetriesPerRequest: null }), prefix: `${prefix}:bull`, shard, concurrency: perShard },
              async (data) => {
                await reconciler.reconcile(data.key, data.since);
              },
              logger,
            ),
          );
        }
        log.info({ shards: served }, 'serving shards');
      });
      created.on('lead', (shard, token) => {
        log.info({ shard, token }, 'leading shard');
        metrics.shardLeader(shard, true);
        void (async () => {
          for (const [key, instances] of await liveSets.load(shard)) await engine.restoreBeats(key, instances);
          await engine.leadShard(shard);
        })().catch((err: unknown) => log.warn({ err, shard }, 'taking over a shard failed; its next full sync repairs it'));
      });
      created.on('unlead', (shard, reason) => {
        log.info({ shard, reason }, 'no longer leading shard');
        metrics.shardLeader(shard, false);
        engine.unleadShard(shard);
      });
      await liveSets.listen(subscriber, (shard, key) => {
        if (!leads(shard)) return;
        void liveSets
          .get(key, shard)
          .then((instances) => engine.restoreBeats(key, instances))
          .catch((err: unknown) => log.warn({ err, key }, 'cannot take over beats'));
      }, log);
      await bus.listen(subscriber, bus.id, (message) => applyControl(engine, message));
      await engine.start();
      await created.start();
      cmdb?.cache.on('change', onLabelsChanged);
    }
  } catch (err) {
    await coordinator?.stop().catch(() => undefined);
    await metricsServer?.close();
    closeConnections();
    throw err;
  }

  let app: FastifyInstance | undefined;
  let url: string | undefined;
  if (roles.has('api') && options.listen) {
    const current = async (): Promise<Deployment> => {
      if (!roles.has('worker')) deployment = (await readDeployment(storeRedis, prefix)) ?? deployment;
      return deployment;
    };
    const view = new DeploymentView(storeRedis, prefix, current, (shard) => queues.depth(shard), async (shards) => {
      const counts = new Map<number, number>();
      for (const task of await store.listTasks()) {
        for (const key of await store.statusKeys(task.id)) {
          const shard = shardOf(key, shards);
          counts.set(shard, (counts.get(shard) ?? 0) + 1);
        }
      }
      return counts;
    });
    // Without the worker role this process runs no task: it only removes a deleted task's copies.
    const local: TaskControl = roles.has('worker')
      ? engine
      : { taskChanged: async () => {}, resync: async () => {}, clusterChanged: (id) => adapters.invalidate(id), removeTask: (id) => engine.removeTask(id) };
    const control = withEvents(
      bus.control(local, async () => (await listWorkers(storeRedis, prefix)).map((w) => w.id)),
      events,
      store,
    );
    metrics.watchDeployment({
      shards: async () => (await current()).shards,
      queueDepth: (shard) => queues.depth(shard),
      instancesManaged: () => copiesPerTask(store),
    });
    app = await buildApiApp({ store, control, redis: storeRedis, logger, tokens: options.apiTokens, rateLimit: options.apiRateLimit, deployment: view, metrics, events });
    await app.listen({ host: options.listen.host, port: options.listen.port });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : options.listen.port;
    url = `http://${options.listen.host.includes(':') ? `[${options.listen.host}]` : options.listen.host}:${port}`;
    logger.info({ url }, 'REST API listening');
  }

  return {
    url,
    id: bus.id,
    deployment,
    engine,
    heartbeats,
    queues,
    store,
    app,
    coordinator,
    metrics,
    metricsUrl: metricsServer?.url,
    events,
    async close() {
      // Every step is bounded: a connection stuck reconnecting must not keep the process from exiting.
      const step = async (what: string, work: Promise<unknown>, ms: number) => {
        if (!(await within(work, ms))) log.warn({ step: what, ms }, 'shutdown step did not finish in time; going on');
      };
      cmdb?.cache.off('change', onLabelsChanged);
      await step('api', app?.close() ?? Promise.resolve(), 5_000);
      await step('metrics listener', metricsServer?.close() ?? Promise.resolve(), 2_000);
      await step('task event reader', events.close(), 2_000);
      // Hand the led shards over first, so that the others start beating while this one winds down.
      await step('leases', coordinator?.stop() ?? Promise.resolve(), 10_000);
      await engine.stop();
      // Reconciles under way may finish (they hold no lease, so nothing waits for them elsewhere).
      await step('shard workers', Promise.all([...workers.values()].map((w) => w.close())), 15_000);
      workers.clear();
      await step('queues', queues.close(), 5_000);
      await step('adapters', adapters.closeAll(), 10_000);
      closeConnections();
    },
  };
}

/**
 * The API's engine control, recording a `task` or `cluster` event for every change the API makes
 * (after the store holds it; recorded even when telling the engine failed, since the change stands).
 */
function withEvents(control: TaskControl, events: TaskEventLog, store: RegsyncStore): TaskControl {
  return {
    async taskChanged(taskId) {
      try {
        await control.taskChanged(taskId);
      } finally {
        const task = await store.getTask(taskId).catch(() => undefined);
        await events.record({
          kind: 'task',
          taskId,
          message: task
            ? `task saved, ${task.state}: ${task.source} -> ${task.destination}, service ${task.service} of ${task.namespace}/${task.group}`
            : 'task changed',
        });
      }
    },
    async resync(taskId) {
      await control.resync(taskId);
      await events.record({ kind: 'task', taskId, message: 'reconcile of every service asked for' });
    },
    async removeTask(taskId) {
      const task = await store.getTask(taskId).catch(() => undefined);
      const where = task ? ` from ${task.destination}` : '';
      try {
        await control.removeTask(taskId);
      } catch (err) {
        await events.record({
          kind: 'error',
          taskId,
          message: `removing the task's copies${where} failed: ${err instanceof Error ? err.message : String(err)}; the task is kept and runs again`,
        });
        throw err;
      }
      await events.record({ kind: 'task', taskId, message: `every copy the task wrote was removed${where} (the task is deleted, or replaced by one copying elsewhere)` });
    },
    async clusterChanged(clusterId) {
      try {
        await control.clusterChanged(clusterId);
      } finally {
        const [spec, users] = await Promise.all([store.getCluster(clusterId).catch(() => undefined), store.tasksUsingCluster(clusterId).catch(() => [])]);
        const message = spec ? `cluster ${clusterId} saved (${spec.kind}, ${spec.endpoints.length} endpoint(s))` : `cluster ${clusterId} deleted`;
        if (users.length === 0) await events.record({ kind: 'cluster', clusterId, message });
        for (const task of users) await events.record({ kind: 'cluster', clusterId, taskId: task.id, message });
      }
    },
  };
}

/** Copies per running task: the sum of the destination instances in its service statuses. */
async function copiesPerTask(store: RegsyncStore): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const task of await store.listTasks()) {
    if (task.state !== 'running') continue;
    const statuses = await store.listServiceStatus(task.id);
    counts.set(task.id, statuses.reduce((sum, s) => sum + s.destinationInstances, 0));
  }
  return counts;
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

