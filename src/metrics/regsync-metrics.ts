import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { BeatResultKind, EngineObserver, ReconcileObservation } from '../engine/observer.js';
import type { TransportStats } from '../model/adapter.js';

/**
 * What the deployment-wide gauges read from Redis at scrape time. Processes with the `api` role
 * give it (see {@link RegsyncMetrics.watchDeployment}); every such process answers the same values.
 */
export interface DeploymentReadings {
  /** Shards of the deployment, now (an API process may start before the workers created it). */
  shards(): Promise<number>;
  /** Jobs waiting, delayed or running in one shard's queue. */
  queueDepth(shard: number): Promise<number>;
  /** Copies per task id: the sum of `destinationInstances` over the task's service statuses. */
  instancesManaged(): Promise<ReadonlyMap<string, number>>;
}

/** Options of {@link RegsyncMetrics}. */
export interface RegsyncMetricsOptions {
  /** Node.js process metrics (CPU, memory, event loop lag, GC, handles). Default true. */
  defaultMetrics?: boolean;
  /** How long a scrape waits for one Redis reading before leaving its series out. Default 2000 ms. */
  scrapeTimeoutMs?: number;
  /**
   * `regsync_instances_managed` reads every task's statuses; scrapes within this long of the last
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
 *   processes share the work.
 *
 * Labels are task, cluster and shard ids and fixed words only: never service names or addresses.
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
  private instancesCache: { at: number; value: Promise<ReadonlyMap<string, number> | undefined> } | undefined;

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
   * Adds the deployment-wide gauges `regsync_queue_depth` and `regsync_instances_managed`, read
   * from `readings` at every scrape (once; later calls are ignored). A reading that fails or takes
   * longer than `scrapeTimeoutMs` leaves its series out of that scrape rather than failing it, so
   * a missing series means "unknown", never zero.
   */
  watchDeployment(readings: DeploymentReadings): void {
    if (this.deployment) return;
    this.deployment = readings;
    const registers = [this.registry];
    // `collect` runs with the gauge as `this`; these reach the readings.
    const reading = <T>(work: Promise<T>, what: string) => this.reading(work, what);
    const instances = () => this.instancesManaged(readings);
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
      help: 'Copies each task keeps in its destination, from the service statuses in Redis (read at scrape time).',
      labelNames: ['task'],
      registers,
      async collect() {
        this.reset();
        const counts = await instances();
        for (const [task, count] of counts ?? []) this.set({ task }, count);
      },
    });
  }

  private instancesManaged(readings: DeploymentReadings): Promise<ReadonlyMap<string, number> | undefined> {
    const now = Date.now();
    if (!this.instancesCache || now - this.instancesCache.at >= this.instancesRefreshMs) {
      this.instancesCache = { at: now, value: this.reading(readings.instancesManaged(), 'instances managed') };
    }
    return this.instancesCache.value;
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
