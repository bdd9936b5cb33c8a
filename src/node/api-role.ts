import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApiApp } from '../api/index.js';
import type { DnsStatusSource } from '../api/api-deps.js';
import type { ApiToken } from '../api/auth-tokens.js';
import { clusterStatuses } from '../api/dashboard-routes.js';
import type { RateLimitSettings } from '../api/rate-limit.js';
import { DeploymentView } from '../coord/deployment-view.js';
import { listWorkers, readDeployment, shardOf, type Deployment } from '../coord/index.js';
import type { TaskControl } from '../engine/control.js';
import { deploymentOverview, type DeploymentOverview, type TaskEventLog } from '../metrics/index.js';
import type { RegsyncStore } from '../store/index.js';
import { TaskHistory } from '../store/task-history.js';
import type { Connections } from './connections.js';
import type { NodeCore } from './core.js';
import type { Lifecycle } from './lifecycle.js';
import { reusedFor } from '../util/reused-for.js';

/** What the API role takes from the process's settings. */
export interface ApiSettings {
  prefix: string;
  logger: Logger;
  listen: { host: string; port: number };
  /** Whether this process also runs the worker role (then it runs the tasks it is told of). */
  runsTasks: boolean;
  apiTokens?: readonly ApiToken[] | undefined;
  apiRateLimit?: RateLimitSettings | false | undefined;
  /** The DNS server of this process, for `GET /api/v1/dns`. */
  dns?: DnsStatusSource | undefined;
  /** HTTPS certificate chain and key (PEM); absent: plain HTTP. */
  apiTls?: { cert: Buffer; key: Buffer } | undefined;
  /** How often running tasks are sampled for their history, ms (default 30 s). */
  historyPeriodMs?: number | undefined;
}

/** The running REST API. */
export interface ApiRole {
  app: FastifyInstance;
  /** `http://host:port` it listens on. */
  url: string;
}

/**
 * Starts the API role: the REST API, which stores every change and tells every process over Redis
 * (the control bus), recording a task event for each. Without the worker role this process runs no
 * task: it only removes a deleted task's copies, and reads the deployment anew for every view of
 * it (the workers may start after it).
 *
 * It also records each running task's history (see {@link TaskHistory}): every API process
 * tries each period, one claims it in Redis, so the samples do not depend on how many run. A
 * deployment without an API has nobody to show the history to, so the workers record none.
 */
export async function startApiRole(core: NodeCore, connections: Connections, settings: ApiSettings, lifecycle: Lifecycle): Promise<ApiRole> {
  const { store, queues, engine, adapters, bus, events, metrics } = core;
  const redis = connections.store;
  const current = async (): Promise<Deployment> => {
    if (!settings.runsTasks) core.deployment = (await readDeployment(redis, settings.prefix)) ?? core.deployment;
    return core.deployment;
  };
  const view = new DeploymentView(redis, settings.prefix, current, (shard) => queues.depth(shard), reusedFor(SERVICE_SYNC_COUNT_MAX_AGE_MS, (shards: number) => serviceSyncsPerShard(store, shards)));
  const local: TaskControl = settings.runsTasks
    ? engine
    : { taskChanged: async () => {}, resync: async () => {}, clusterChanged: (id) => adapters.invalidate(id), removeTask: (id) => engine.removeTask(id) };
  const control = withEvents(
    bus.control(local, async () => (await listWorkers(redis, settings.prefix)).map((w) => w.id)),
    events,
    store,
  );
  metrics.watchDeployment({
    shards: async () => (await current()).shards,
    queueDepth: (shard) => queues.depth(shard),
    overview: () => readOverview(store),
  });
  const history = new TaskHistory(redis, settings.prefix, settings.historyPeriodMs);
  await lifecycle.step('task history', () => history.start(store, settings.logger.child({ component: 'history' })), (stop) => stop(), 1_000);
  const app = await buildApiApp({ store, control, redis, logger: settings.logger, tokens: settings.apiTokens, rateLimit: settings.apiRateLimit, deployment: view, metrics, events, dns: settings.dns, tls: settings.apiTls, history, clusterHistory: core.clusterErrors });
  await lifecycle.step('api', () => app.listen({ host: settings.listen.host, port: settings.listen.port }), () => app.close(), 5_000);
  const address = app.server.address();
  const port = typeof address === 'object' && address ? address.port : settings.listen.port;
  const host = settings.listen.host.includes(':') ? `[${settings.listen.host}]` : settings.listen.host;
  const url = `${settings.apiTls ? 'https' : 'http'}://${host}:${port}`;
  settings.logger.info({ url }, 'REST API listening');
  return { app, url };
}

/**
 * How long the per-shard service sync counts of `GET /api/v1/shards` are reused: counting walks every
 * status key of every task (100,000 at the scale the project is sized for), which a dashboard or a
 * script polling the route must not repeat for each call.
 */
const SERVICE_SYNC_COUNT_MAX_AGE_MS = 10_000;

/** How many service syncs (statuses) each shard holds, for the deployment view. */
async function serviceSyncsPerShard(store: RegsyncStore, shards: number): Promise<Map<number, number>> {
  const counts = new Map<number, number>();
  for (const task of await store.listTasks()) {
    for (const key of await store.statusKeys(task.id)) {
      const shard = shardOf(key, shards);
      counts.set(shard, (counts.get(shard) ?? 0) + 1);
    }
  }
  return counts;
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

/**
 * Every task with its service syncs counted and every cluster with its reachability, for the
 * deployment-wide gauges: the statuses of the running tasks (one HGETALL each) and the
 * reachability `GET /api/v1/clusters:status` shows, computed the same way.
 */
async function readOverview(store: RegsyncStore): Promise<DeploymentOverview> {
  const [clusters, specs] = await Promise.all([store.listClusters(), store.listTasks()]);
  const tasks = await Promise.all(
    specs.map(async (spec) => {
      // A paused task's statuses are as old as the pause: it only counts as a user.
      if (spec.state === 'paused') return { spec, taskProblem: null, statuses: [] };
      const [taskProblem, statuses] = await Promise.all([store.getTaskProblem(spec.id), store.listServiceStatus(spec.id)]);
      return { spec, taskProblem, statuses };
    }),
  );
  // A cluster none reached says why, where it can tell: credentials refused, or no usable connection.
  const reachability = new Map(
    clusterStatuses(clusters, tasks).map((c) => [c.id, c.reachability === 'failing' && (c.failure === 'auth_failed' || c.failure === 'not_connected') ? c.failure : c.reachability]),
  );
  return deploymentOverview({ clusters, tasks, reachability });
}
