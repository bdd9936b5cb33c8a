import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { createKubernetesAdapter } from '../adapters/kubernetes/index.js';
import { createNacosAdapter } from '../adapters/nacos/index.js';
import { createZooKeeperAdapter } from '../adapters/zookeeper/index.js';
import { buildApiApp } from './api/index.js';
import { AdapterPool, type AdapterFactory } from './engine/adapter-pool.js';
import { HeartbeatScheduler } from './engine/heartbeat-scheduler.js';
import { Reconciler } from './engine/reconciler.js';
import { SyncEngine } from './engine/sync-engine.js';
import type { ClusterKind } from './model/types.js';
import { ShardQueue, ShardWorker } from './queue/shard-queue.js';
import { RegsyncStore } from './store/index.js';

/** Settings of one regsync process running the API and a worker. */
export interface NodeOptions {
  redisUrl: string;
  /** Where the REST API listens; no API when absent. */
  listen?: { host: string; port: number } | undefined;
  /** Prefix of every Redis key (store and queues). Default `regsync`. */
  prefix?: string;
  logger: Logger;
  /** Reconciles running at once in this process. Default 16. */
  concurrency?: number;
  /** See {@link ReconcilerOptions.confirmEmptyMs}. */
  confirmEmptyMs?: number;
  /** Delay that coalesces a burst of changes into one reconcile. Default 0 (the queue's de-duplication coalesces bursts). */
  changeDelayMs?: number;
  /** Extra or replacement adapter factories (tests, plug-ins). */
  adapters?: Partial<Record<ClusterKind, AdapterFactory>>;
}

/** A running regsync process. */
export interface RegsyncNode {
  /** `http://host:port` of the API, when it listens. */
  url: string | undefined;
  engine: SyncEngine;
  heartbeats: HeartbeatScheduler;
  queue: ShardQueue;
  store: RegsyncStore;
  app: FastifyInstance | undefined;
  /** Stops everything; copies stop being beaten (they expire unless another node takes over). */
  close(): Promise<void>;
}

/**
 * Starts the API and a worker in one process against one Redis: the store, the shard queue and its
 * worker, the engine (watches, full syncs, heartbeat proxy) and the REST API.
 */
export async function startNode(options: NodeOptions): Promise<RegsyncNode> {
  const prefix = options.prefix ?? 'regsync';
  const logger = options.logger;
  // Auto-pipelining: the store calls of concurrent reconciles (task reads, status writes) share round trips.
  const storeRedis = new Redis(options.redisUrl, { maxRetriesPerRequest: 3, enableAutoPipelining: true });
  const queueRedis = new Redis(options.redisUrl, { maxRetriesPerRequest: null });
  const workerRedis = new Redis(options.redisUrl, { maxRetriesPerRequest: null });
  for (const r of [storeRedis, queueRedis, workerRedis]) r.on('error', (err) => logger.warn({ err }, 'redis connection error'));
  const store = new RegsyncStore(storeRedis, prefix);
  const adapters = new AdapterPool((id) => store.getCluster(id), { nacos: createNacosAdapter, zookeeper: createZooKeeperAdapter, kubernetes: createKubernetesAdapter, ...options.adapters }, logger);
  const heartbeats = new HeartbeatScheduler({ logger });
  const queue = new ShardQueue({ connection: queueRedis, prefix: `${prefix}:bull`, changeDelayMs: options.changeDelayMs });
  const reconciler: Reconciler = new Reconciler({
    store,
    adapters,
    heartbeats,
    logger,
    // Called only once reconciles run, after the engine below exists.
    activeTask: (taskId) => engine.activeTask(taskId),
    requeue: (key, delayMs) => queue.enqueue(key, 'confirm', delayMs),
    ...(options.confirmEmptyMs !== undefined ? { confirmEmptyMs: options.confirmEmptyMs } : {}),
  });
  const engine: SyncEngine = new SyncEngine({ store, adapters, queue, heartbeats, reconciler, logger });
  const worker = new ShardWorker(
    { connection: workerRedis, prefix: `${prefix}:bull`, concurrency: options.concurrency ?? 16 },
    async (data) => {
      await reconciler.reconcile(data.key, data.since);
    },
    logger,
  );
  await engine.start();

  let app: FastifyInstance | undefined;
  let url: string | undefined;
  if (options.listen) {
    app = await buildApiApp({ store, control: engine, redis: storeRedis, logger });
    await app.listen({ host: options.listen.host, port: options.listen.port });
    const address = app.server.address();
    const port = typeof address === 'object' && address ? address.port : options.listen.port;
    url = `http://${options.listen.host.includes(':') ? `[${options.listen.host}]` : options.listen.host}:${port}`;
    logger.info({ url }, 'REST API listening');
  }

  const running = engine;
  return {
    url,
    engine: running,
    heartbeats,
    queue,
    store,
    app,
    async close() {
      await app?.close();
      await running.stop();
      await worker.close();
      await queue.close();
      await adapters.closeAll();
      storeRedis.disconnect();
      queueRedis.disconnect();
      workerRedis.disconnect();
    },
  };
}
