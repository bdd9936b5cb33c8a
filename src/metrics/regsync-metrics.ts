import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { BeatResultKind, EngineObserver, ReconcileObservation } from '../engine/observer.js';
import type { TransportStats } from '../model/adapter.js';
import { CLUSTER_STATES, SERVICE_SYNC_STATES, type DeploymentOverview } from './deployment-overview.js';

/**
 * What the deployment-wide gauges read from Redis at scrape time. Processes with the `api` role
 * give it (see {@link RegsyncMetrics.watchDeployment}); every such process answers the same values.
 */
export interface DeploymentReadings {
  /** Shards of the deployment, now (an API process may start before the workers created it). */
  shards(): Promise<number>;
  /** Jobs waiting, delayed or running in one shard's queue. */
  queueDepth(shard: number): Promise<number>;
  /** Every task with its service syncs counted, and every cluster with its reachability. */
  overview(): Promise<DeploymentOverview>;
}

/** Options of {@link RegsyncMetrics}. */
export interface RegsyncMetricsOptions {
  /** Node.js process metrics (CPU, memory, event loop lag, GC, handles). Default true. */
  defaultMetrics?: boolean;
  /** How long a scrape waits for one Redis reading before leaving its series out. Default 2000 ms. */
  scrapeTimeoutMs?: number;
  /**
   * The task and cluster gauges read every task's statuses; scrapes within this long of the last
   * reading reuse it (several scrapers, or a short scrape interval, cost one read). Default 5000 ms.
   */
  instancesRefreshMs?: number;
  /** Where problems of a scrape's Redis readings are logged (debug). */
  logger?: Logger | undefined;
}

/** Buckets of `regsync_reconcile_duration_seconds`: a reconcile is a few registry calls. */
const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];
/** Buckets of `regsync_propagation_lag_seconds`: from tens of ms (a change) to minutes (a backlog). */
const LAG_BUCKETS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

/**
 * The Prometheus metrics of one regsync process, in a registry of its own (not prom-client's
 * global one: tests run several nodes in one process, and each must count only its own work).
 *
 * Process-local counters and histograms (sum them across processes in PromQL):
 * - `regsync_reconciles_total{task, outcome}`: every reconcile this process ran; `outcome` is
 *   `synced|held|refused|inactive|failed`. Errors are `outcome="failed"` (a reconcile that
 *   rejected and is retried with backoff); there is no separate error counter.
 * - `regsync_reconcile_duration_seconds{task}`: wall time of each of them.
 * - `regsync_propagation_lag_seconds{task}`: for each `synced` reconcile, from the change seen (or
 *   the job queued, for full syncs and starts) to the status written: the status' `lagMs`.
 * - `regsync_heartbeats_total{cluster, result}`: beats this process sent as a shard leader;
 *   `result` is `ok|unknown|failed` (`unknown`: the destination had lost the copy, re-registered).
 * - `regsync_adapter_request_errors_total{cluster, kind}`: failed requests to a registry; `kind` is
 *   the adapter's error code (Nacos: `nacos-unreachable|nacos-timeout|nacos-http-error|nacos-api-error|nacos-bad-response`).
 * - `regsync_shard_leader{shard}`: 1 while this process leads the shard, else 0 (workers only;
 *   `sum by (shard)` is 1 in a healthy deployment).
 * - `regsync_registry_connections`, `..._reconnects_total`, `..._pushes_received_total`,
 *   `..._publish_sets` `{cluster}`: this process's connection to each registry that keeps one
 *   (see {@link RegsyncMetrics.watchConnections}).
 *
 * Deployment-wide gauges, read from Redis at scrape time by processes with the `api` role (the same
 * on every one of them: aggregate with `max by (...)`, never `sum`):
 * - `regsync_queue_depth{shard}`: jobs waiting, delayed or running in each shard's queue;
 * - `regsync_instances_managed{task}`: copies the task keeps in its destination, from the service
 *   statuses every reconcile writes (whichever process ran it), so the value is right however many
 *   processes share the work;
 * - `regsync_service_syncs{task, state}`: the running task's service syncs by `state`
 *   (`synced|failing|held`, see `ServiceSyncState`), every state shown, zeros included;
 * - `regsync_task_problem{task, code}`: 1 for a running task with a task-level problem (its source
 *   unlisted, services left out, a rule that cannot run); no series: none;
 * - `regsync_cluster_state{cluster, state}`: 1 for the cluster's reachability (`reachable|partial|
 *   unreachable|unknown`, see `ClusterState`) and 0 for the other states, judged from the
 *   statuses of the running tasks' last reconciles (no probe of its own); a finer state of the
 *   clusters view shows under its own word;
 * - `regsync_task_info{task, name, source, destination}` and `regsync_cluster_info{cluster, name,
 *   kind}`: 1 per task and per cluster, for PromQL to join readable names onto id labels
 *   (`name` is the id, except for the md5 ids of the nacos-sync API: see `taskDisplayName`).
 *
 * Labels are task, cluster and shard ids and fixed words only: never service names or addresses
 * (except the `name` of the info series: one series per task or cluster, from its stored settings).
 * Deliberately left out: removing the series of a deleted task from the process-local metrics
 * (they stay until the process restarts; their number is bounded by the tasks it ever ran).
 */
export class RegsyncMetrics implements EngineObserver {
  readonly registry = new Registry();
  private readonly reconciles: Counter<'task' | 'outcome'>;
  private readonly duration: Histogram<'task'>;
  private readonly lag: Histogram<'task'>;
  private readonly heartbeats: Counter<'cluster' | 'result'>;
  private readonly adapterErrors: Counter<'cluster' | 'kind'>;
  private readonly leader: Gauge<'shard'>;
  private readonly scrapeTimeoutMs: number;
  private readonly instancesRefreshMs: number;
  private readonly log: Logger | undefined;
  private deployment: DeploymentReadings | undefined;
  private connectionsWatched = false;
  private overviewCache: { at: number; value: Promise<DeploymentOverview | undefined> } | undefined;

  constructor(options: RegsyncMetricsOptions = {}) {
    this.scrapeTimeoutMs = options.scrapeTimeoutMs ?? 2_000;
    this.instancesRefreshMs = options.instancesRefreshMs ?? 5_000;
    this.log = options.logger?.child({ component: 'metrics' });
    if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
    const registers = [this.registry];
    this.reconciles = new Counter({
      name: 'regsync_reconciles_total',
      help: 'Reconciles this process ran, by task and outcome (synced, held, refused, inactive, failed).',
      labelNames: ['task', 'outcome'],
      registers,
    });
    this.duration = new Histogram({
      name: 'regsync_reconcile_duration_seconds',
      help: 'Wall time of the reconciles this process ran, by task.',
      labelNames: ['task'],
      buckets: DURATION_BUCKETS,
      registers,
    });
    this.lag = new Histogram({
      name: 'regsync_propagation_lag_seconds',
      help: 'From a change seen (or a job queued) to the status written, for every synced reconcile this process ran, by task.',
      labelNames: ['task'],
      buckets: LAG_BUCKETS,
      registers,
    });
    this.heartbeats = new Counter({
      name: 'regsync_heartbeats_total',
      help: 'Heartbeats this process sent to destination copies, by destination cluster and result (ok, unknown, failed).',
      labelNames: ['cluster', 'result'],
      registers,
    });
    this.adapterErrors = new Counter({
      name: 'regsync_adapter_request_errors_total',
      help: 'Failed requests of this process to a registry, by cluster and error kind.',
      labelNames: ['cluster', 'kind'],
      registers,
    });
    this.leader = new Gauge({
      name: 'regsync_shard_leader',
      help: 'Whether this process leads the shard (1) or not (0).',
      labelNames: ['shard'],
      registers,
    });
  }

  /** The content type of {@link metrics}' answer (Prometheus text format 0.0.4). */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** Every metric in the Prometheus text format, deployment gauges read now. */
  metrics(): Promise<string> {
    return this.registry.metrics();
  }

  reconciled(observation: ReconcileObservation): void {
    const task = observation.taskId;
    this.reconciles.inc({ task, outcome: observation.result });
    this.duration.observe({ task }, observation.durationMs / 1000);
    if (observation.result === 'synced' && observation.lagMs !== undefined) this.lag.observe({ task }, observation.lagMs / 1000);
  }

  beat(clusterId: string, result: BeatResultKind): void {
    this.heartbeats.inc({ cluster: clusterId, result });
  }

  /** A request of this process to cluster `clusterId` failed with `kind` (an adapter's error code). */
  adapterRequestError(clusterId: string, kind: string): void {
    this.adapterErrors.inc({ cluster: clusterId, kind });
  }

  /**
   * Adds the registry-connection series, read at every scrape from the adapters this process holds
   * (once; later calls are ignored), for kinds that keep a connection (Nacos gRPC):
   * `regsync_registry_connections{cluster}`, `regsync_registry_reconnects_total{cluster}`,
   * `regsync_registry_pushes_received_total{cluster}`, `regsync_registry_publish_sets{cluster}`.
   */
  watchConnections(read: () => ReadonlyMap<string, { transportStats?(): TransportStats | undefined }>): void {
    if (this.connectionsWatched) return;
    this.connectionsWatched = true;
    const registers = [this.registry];
    const series = (name: string, help: string, field: keyof TransportStats) =>
      new Gauge({
        name,
        help,
        labelNames: ['cluster'],
        registers,
        collect() {
          this.reset();
          for (const [cluster, adapter] of read()) {
            const stats = adapter.transportStats?.();
            if (stats) this.set({ cluster }, stats[field]);
          }
        },
      });
    series('regsync_registry_connections', 'Connections this process holds open to each registry (Nacos gRPC).', 'connections');
    series('regsync_registry_reconnects_total', 'Times this process connected to each registry again after losing its connection.', 'reconnects');
    series('regsync_registry_pushes_received_total', 'Pushes (changed services) each registry sent this process over its connection.', 'pushesReceived');
    series('regsync_registry_publish_sets', 'Services whose copies this process publishes over its connection to each registry.', 'publishSets');
  }

  /** Shows every shard of the deployment as not led, so that each series exists from the start. */
  knowShards(shards: number): void {
    for (let shard = 0; shard < shards; shard += 1) {
      const labels = { shard: String(shard) };
      // Never resets a shard already led.
      this.leader.inc(labels, 0);
    }
  }

  /** This process started (true) or stopped (false) leading `shard`. */
  shardLeader(shard: number, leading: boolean): void {
    this.leader.set({ shard: String(shard) }, leading ? 1 : 0);
  }

  /**
   * Adds the deployment-wide gauges (`regsync_queue_depth`, `regsync_instances_managed`,
   * `regsync_service_syncs`, `regsync_task_problem`, `regsync_cluster_state`, `regsync_task_info`, `regsync_cluster_info`),
   * read from `readings` at every scrape (once; later calls are ignored). A reading that fails or takes
   * longer than `scrapeTimeoutMs` leaves its series out of that scrape rather than failing it, so
   * a missing series means "unknown", never zero.
   */
  watchDeployment(readings: DeploymentReadings): void {
    if (this.deployment) return;
    this.deployment = readings;
    const registers = [this.registry];
    // `collect` runs with the gauge as `this`; these reach the readings.
    const reading = <T>(work: Promise<T>, what: string) => this.reading(work, what);
    const overview = () => this.overview(readings);
    new Gauge({
      name: 'regsync_queue_depth',
      help: 'Jobs waiting, delayed or running in each shard queue of the deployment (read from Redis at scrape time).',
      labelNames: ['shard'],
      registers,
      async collect() {
        this.reset();
        const shards = await reading(readings.shards(), 'shards');
        if (shards === undefined) return;
        const depths = await Promise.all(
          Array.from({ length: shards }, (_, shard) => reading(readings.queueDepth(shard), 'queue depth')),
        );
        depths.forEach((depth, shard) => {
          if (depth !== undefined) this.set({ shard: String(shard) }, depth);
        });
      },
    });
    new Gauge({
      name: 'regsync_instances_managed',
      help: 'Copies each running task keeps in its destination, from the service statuses in Redis (read at scrape time).',
      labelNames: ['task'],
      registers,
      async collect() {
        this.reset();
        for (const task of (await overview())?.tasks ?? []) if (task.running) this.set({ task: task.id }, task.instances);
      },
    });
    new Gauge({
      name: 'regsync_service_syncs',
      help: "Service syncs of each running task by the state of their last reconcile (synced, failing, held), from the statuses in Redis.",
      labelNames: ['task', 'state'],
      registers,
      async collect() {
        this.reset();
        for (const task of (await overview())?.tasks ?? []) {
          if (!task.running) continue;
          for (const state of SERVICE_SYNC_STATES) this.set({ task: task.id, state }, task.syncs[state]);
        }
      },
    });
    new Gauge({
      name: 'regsync_task_problem',
      help: 'Running tasks stopped or limited as a whole (value 1), by the problem code (source_unlisted, services_left_out, task_unstartable).',
      labelNames: ['task', 'code'],
      registers,
      async collect() {
        this.reset();
        for (const task of (await overview())?.tasks ?? []) if (task.problem !== null) this.set({ task: task.id, code: task.problem }, 1);
      },
    });
    new Gauge({
      name: 'regsync_cluster_state',
      help: "1 for each cluster's reachability (reachable, partial, unreachable, unknown) as the running tasks' last reconciles found it, 0 for the other states.",
      labelNames: ['cluster', 'state'],
      registers,
      async collect() {
        this.reset();
        for (const cluster of (await overview())?.clusters ?? []) {
          for (const state of CLUSTER_STATES) this.set({ cluster: cluster.id, state }, cluster.state === state ? 1 : 0);
          if (!(CLUSTER_STATES as readonly string[]).includes(cluster.state)) this.set({ cluster: cluster.id, state: cluster.state }, 1);
        }
      },
    });
    new Gauge({
      name: 'regsync_task_info',
      help: 'One series per task (value 1) with a readable name and its clusters, to join onto task labels.',
      labelNames: ['task', 'name', 'source', 'destination'],
      registers,
      async collect() {
        this.reset();
        for (const task of (await overview())?.tasks ?? []) this.set({ task: task.id, name: task.name, source: task.source, destination: task.destination }, 1);
      },
    });
    new Gauge({
      name: 'regsync_cluster_info',
      help: 'One series per cluster (value 1) with a readable name and its kind, to join onto cluster labels.',
      labelNames: ['cluster', 'name', 'kind'],
      registers,
      async collect() {
        this.reset();
        for (const cluster of (await overview())?.clusters ?? []) this.set({ cluster: cluster.id, name: cluster.name, kind: cluster.kind }, 1);
      },
    });
  }

  private overview(readings: DeploymentReadings): Promise<DeploymentOverview | undefined> {
    const now = Date.now();
    if (!this.overviewCache || now - this.overviewCache.at >= this.instancesRefreshMs) {
      this.overviewCache = { at: now, value: this.reading(readings.overview(), 'deployment overview') };
    }
    return this.overviewCache.value;
  }

  /** `work`'s value, or undefined when it fails or takes longer than `scrapeTimeoutMs`. */
  private async reading<T>(work: Promise<T>, what: string): Promise<T | undefined> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), this.scrapeTimeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([
        work.catch((err: unknown) => {
          this.log?.debug({ err, reading: what }, 'a metrics reading failed; its series are left out of this scrape');
          return undefined;
        }),
        timeout,
      ]);
    } finally {
      clearTimeout(timer);
    }
  }
}
