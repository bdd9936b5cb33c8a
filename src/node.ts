import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { DnsStatusSource } from './api/api-deps.js';
import type { ApiToken } from './api/auth-tokens.js';
import type { RateLimitSettings } from './api/rate-limit.js';
import type { CmdbCache } from './cmdb/cache.js';
import { DEFAULT_REPLICAS, DEFAULT_SHARDS, ensureDeployment, readDeployment, type Deployment, type ShardCoordinator } from './coord/index.js';
import type { AdapterFactory } from './engine/adapter-pool.js';
import type { HeartbeatScheduler } from './engine/heartbeat-scheduler.js';
import type { SyncEngine } from './engine/sync-engine.js';
import { startMetricsServer, type RegsyncMetrics, type TaskEventLog } from './metrics/index.js';
import { startApiRole, type ApiRole } from './node/api-role.js';
import { Connections } from './node/connections.js';
import type { RedisClientSettings } from './node/redis-target.js';
import { buildCore } from './node/core.js';
import { Lifecycle } from './node/lifecycle.js';
import { startWorkerRole } from './node/worker-role.js';
import type { ShardQueues } from './queue/shard-queue.js';
import { ensureSchema, prepareStoredSecrets, type RegsyncStore } from './store/index.js';
import { SecretBox } from './secrets/secret-box.js';

/** What one regsync process runs. */
export type NodeRole = 'api' | 'worker';

/** Settings of one regsync process. */
export interface NodeOptions {
  /** `redis://`, `rediss://`, `redis+sentinel://` or `rediss+sentinel://` (see `parseRedisUrl`). */
  redisUrl: string;
  /** TLS files and the start bound of every Redis connection (see `RedisClientSettings`). */
  redis?: RedisClientSettings | undefined;
  /**
   * How long a leader keeps beating its copies after its lease's local deadline passed while Redis
   * did not answer (a failover, a restart), ms; default three lease TTLs. See `LeaseManagerOptions.graceMs`.
   */
  redisGraceMs?: number | undefined;
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
  /** How long guards and dropped services wait for a confirming read, ms (default 3000; see `ReconcilerOptions.confirmEmptyMs`). */
  confirmEmptyMs?: number;
  /** Delay that coalesces a burst of changes into one reconcile. Default 0 (the queue's de-duplication coalesces bursts). */
  changeDelayMs?: number;
  /** How often a worker looks for clusters whose service syncs failed, and probes them, ms (default 2000; see `ClusterRecovery`). */
  recoveryProbeMs?: number | undefined;
  /** Extra or replacement adapter factories (tests, plug-ins). */
  adapters?: Readonly<Record<string, AdapterFactory>>;
  /**
   * The CMDB whose labels copies carry (see the task options `labels` and `labelsOverride`); started
   * and closed by the caller. Its changes reconcile the service syncs of the IPs they name.
   */
  cmdb?: { cache: CmdbCache; describe: string } | undefined;
  /** Serve the REST API over HTTPS with this certificate chain and key (PEM). */
  apiTls?: { cert: Buffer; key: Buffer } | undefined;
  /** A bearer token the metrics listener requires on `/metrics` (`/healthz` stays open for probes). */
  metricsToken?: string | undefined;
  /** The DNS server this process runs beside the node (started after it), for `GET /api/v1/dns`. */
  dns?: DnsStatusSource | undefined;
  /**
   * Where a listener serving only `GET /metrics` and `GET /healthz` runs (`regsync worker
   * --metrics-listen`); default none. A process with the API serves `/metrics` on the API port anyway.
   */
  metricsListen?: { host: string; port: number } | undefined;
  /**
   * The secret keys cluster secrets are encrypted with in Redis (`secretBoxFrom`); default none:
   * stored in clear, with a warning. A process refuses to start when a stored secret needs a key
   * it lacks; with a key it encrypts the secrets still in clear.
   */
  secrets?: SecretBox | undefined;
  /** How often the API role samples each running task's copies and max lag, ms (default 30 s; see `TaskHistory`). */
  historyPeriodMs?: number | undefined;
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
 * which stores every change and tells every process over Redis (see `ControlBus`).
 *
 * Redis is one node, or the master Sentinel names (see `parseRedisUrl`), over TLS where asked; the
 * first connections must be ready within `redis.connectTimeoutMs` (5 s), else it rejects with a
 * `RedisUnreachableError` saying what failed (a bad URL: `RedisConfigError`).
 *
 * One lifecycle: connections, the deployment, the metrics listener, the shared parts (adapters,
 * queues, engine), the worker role, the API role, each started in that order and stopped in
 * reverse, every stop bounded; a part that fails to start stops what started before it.
 */
export async function startNode(options: NodeOptions): Promise<RegsyncNode> {
  const prefix = options.prefix ?? 'regsync';
  const { logger } = options;
  const roles = new Set(options.roles ?? ['api', 'worker']);
  const lifecycle = new Lifecycle(logger.child({ component: 'node' }));
  const connections = new Connections(options.redisUrl, logger, options.redis);
  lifecycle.defer('connections', () => connections.close());
  try {
    await connections.ready();
    await ensureSchema(connections.store, prefix, { logger });
    const deployment = await readOrEnsureDeployment(connections, prefix, roles.has('worker'), options);
    const core = buildCore({ ...options, prefix }, connections, deployment);
    await prepareStoredSecrets(core.store, options.secrets ?? SecretBox.none, logger);
    // Stopped after the adapters closed: the last flush takes their last failures.
    await lifecycle.step('cluster error history', () => core.clusterErrors.start(logger.child({ component: 'cluster-history' })), (stop) => stop(), 1_000);
    // Bound before this process joins anything: an address in use stops it with little to undo.
    const metricsServer = options.metricsListen
      ? await lifecycle.step('metrics listener', () => startMetricsServer(core.metrics, options.metricsListen as { host: string; port: number }, logger, {}, options.metricsToken), (server) => server.close(), 2_000)
      : undefined;
    if (metricsServer) logger.info({ url: metricsServer.url }, 'metrics listening');
    lifecycle.defer('adapters', () => core.adapters.closeAll(), 10_000);
    lifecycle.defer('queues', () => core.queues.close(), 5_000);
    const coordinator = roles.has('worker')
      ? await startWorkerRole(core, connections, { ...options, prefix, roles: [...roles] }, lifecycle)
      : undefined;
    lifecycle.defer('task event reader', () => core.events.close(), 2_000);
    let api: ApiRole | undefined;
    if (roles.has('api') && options.listen) {
      api = await startApiRole(core, connections, { ...options, prefix, listen: options.listen, runsTasks: roles.has('worker') }, lifecycle);
    }
    return {
      url: api?.url,
      id: core.bus.id,
      get deployment() {
        return core.deployment;
      },
      engine: core.engine,
      heartbeats: core.heartbeats,
      queues: core.queues,
      store: core.store,
      app: api?.app,
      coordinator,
      metrics: core.metrics,
      metricsUrl: metricsServer?.url,
      events: core.events,
      close: () => lifecycle.stop(),
    };
  } catch (err) {
    await lifecycle.stop();
    throw err;
  }
}

/**
 * Workers create the deployment (first start) or check theirs against it; an API process only
 * reads it (the defaults until a worker stored one; it reads again for every view of it).
 */
async function readOrEnsureDeployment(connections: Connections, prefix: string, worker: boolean, options: NodeOptions): Promise<Deployment> {
  if (worker) return ensureDeployment(connections.store, prefix, { shards: options.shards, replicas: options.replicas });
  return (await readDeployment(connections.store, prefix)) ?? { shards: DEFAULT_SHARDS, replicas: DEFAULT_REPLICAS, createdAt: '' };
}
