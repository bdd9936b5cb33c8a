import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import { parseScrape } from '../../test/support/prometheus.js';
import { combineObservers } from '../engine/observer.js';
import type { DeploymentOverview } from './deployment-overview.js';
import { RegsyncMetrics } from './regsync-metrics.js';
import { startMetricsServer, type MetricsServer } from './metrics-server.js';

async function parsed(metrics: RegsyncMetrics) {
  return parseScrape(await metrics.metrics());
}

/** An overview with one running task `t1` keeping `instances` copies. */
function overviewWith(instances: number): DeploymentOverview {
  return {
    tasks: [{ id: 't1', name: 't1', source: 'a', destination: 'b', running: true, instances, syncs: { synced: 1, failing: 0, held: 0 }, problem: null }],
    clusters: [],
  };
}

describe('RegsyncMetrics', () => {
  it('counts reconciles by task and outcome, with durations and the lag of synced ones', async () => {
    const metrics = new RegsyncMetrics({ defaultMetrics: false });
    metrics.reconciled({ taskId: 't1', result: 'synced', durationMs: 20, lagMs: 150 });
    metrics.reconciled({ taskId: 't1', result: 'synced', durationMs: 30, lagMs: 2500 });
    metrics.reconciled({ taskId: 't1', result: 'failed', durationMs: 5 });
    metrics.reconciled({ taskId: 't2', result: 'held', durationMs: 5 });
    const s = await parsed(metrics);
    expect(s.families.get('regsync_reconciles_total')?.type).toBe('counter');
    expect(s.value('regsync_reconciles_total', { task: 't1', outcome: 'synced' })).toBe(2);
    expect(s.value('regsync_reconciles_total', { task: 't1', outcome: 'failed' })).toBe(1);
    expect(s.value('regsync_reconciles_total', { task: 't2', outcome: 'held' })).toBe(1);
    const duration = s.samples('regsync_reconcile_duration_seconds', { task: 't1' })[0];
    expect(duration).toMatchObject({ count: 3 });
    expect(duration?.sum).toBeCloseTo(0.055, 6);
    const lag = s.samples('regsync_propagation_lag_seconds', { task: 't1' })[0];
    expect(lag).toMatchObject({ count: 2 });
    expect(lag?.buckets?.['0.25']).toBe(1);
    expect(lag?.buckets?.['2.5']).toBe(2);
    // Held, failed and refused reconciles wrote no fresh status: no lag.
    expect(s.samples('regsync_propagation_lag_seconds', { task: 't2' })).toEqual([]);
  });

  it('counts heartbeats and adapter errors by cluster, and shows shard leadership as 1/0', async () => {
    const metrics = new RegsyncMetrics({ defaultMetrics: false });
    metrics.beat('beijing', 'ok');
    metrics.beat('beijing', 'ok');
    metrics.beat('beijing', 'unknown');
    metrics.beat('shanghai', 'failed');
    metrics.adapterRequestError('shanghai', 'nacos-unreachable');
    metrics.knowShards(3);
    metrics.shardLeader(1, true);
    metrics.shardLeader(2, true);
    metrics.shardLeader(2, false);
    metrics.knowShards(3);
    const s = await parsed(metrics);
    expect(s.value('regsync_heartbeats_total', { cluster: 'beijing', result: 'ok' })).toBe(2);
    expect(s.value('regsync_heartbeats_total', { cluster: 'beijing', result: 'unknown' })).toBe(1);
    expect(s.value('regsync_heartbeats_total', { cluster: 'shanghai', result: 'failed' })).toBe(1);
    expect(s.value('regsync_adapter_request_errors_total', { cluster: 'shanghai', kind: 'nacos-unreachable' })).toBe(1);
    expect(s.samples('regsync_shard_leader').map((x) => [x.labels.shard, x.value])).toEqual([
      ['0', 0],
      ['1', 1],
      ['2', 0],
    ]);
  });

  it('reads the deployment gauges at scrape time, and leaves out a reading that fails or hangs', async () => {
    let depth = 3;
    let overview: Promise<DeploymentOverview> = Promise.resolve(overviewWith(4));
    const metrics = new RegsyncMetrics({ defaultMetrics: false, scrapeTimeoutMs: 200, instancesRefreshMs: 0 });
    metrics.watchDeployment({
      shards: async () => 2,
      queueDepth: async (shard) => {
        if (shard === 1) throw new Error('redis away');
        return depth;
      },
      overview: () => overview,
    });
    let s = await parsed(metrics);
    expect(s.families.get('regsync_queue_depth')?.type).toBe('gauge');
    expect(s.samples('regsync_queue_depth').map((x) => [x.labels.shard, x.value])).toEqual([['0', 3]]);
    expect(s.value('regsync_instances_managed', { task: 't1' })).toBe(4);
    depth = 7;
    overview = new Promise(() => {});
    s = await parsed(metrics);
    expect(s.value('regsync_queue_depth', { shard: '0' })).toBe(7);
    // Unknown is absent, never a stale or zero value.
    expect(s.samples('regsync_instances_managed')).toEqual([]);
  });

  it('reuses the overview reading within instancesRefreshMs, for every gauge of a scrape', async () => {
    let reads = 0;
    const metrics = new RegsyncMetrics({ defaultMetrics: false, instancesRefreshMs: 60_000 });
    metrics.watchDeployment({ shards: async () => 0, queueDepth: async () => 0, overview: async () => overviewWith((reads += 1)) });
    await Promise.all([metrics.metrics(), metrics.metrics()]);
    const s = await parsed(metrics);
    expect(s.value('regsync_instances_managed', { task: 't1' })).toBe(1);
    expect(s.value('regsync_service_syncs', { task: 't1', state: 'synced' })).toBe(1);
    expect(reads).toBe(1);
  });

  it('shows service syncs by state, task problems, one-hot cluster states and info series; paused tasks keep only their info', async () => {
    const metrics = new RegsyncMetrics({ defaultMetrics: false, instancesRefreshMs: 0 });
    const overview: DeploymentOverview = {
      tasks: [
        { id: 'run', name: 'run', source: 'a', destination: 'b', running: true, instances: 3, syncs: { synced: 2, failing: 1, held: 4 }, problem: 'services_left_out' },
        { id: 'stop', name: 'stop', source: 'b', destination: 'a', running: false, instances: 0, syncs: { synced: 0, failing: 0, held: 0 }, problem: null },
      ],
      clusters: [
        { id: 'a', name: 'shanghai', kind: 'nacos', state: 'unreachable' },
        { id: 'b', name: 'b', kind: 'zookeeper', state: 'reachable' },
        { id: 'c', name: 'c', kind: 'nacos', state: 'auth_failed' },
      ],
    };
    metrics.watchDeployment({ shards: async () => 0, queueDepth: async () => 0, overview: async () => overview });
    const s = await parsed(metrics);
    expect(s.samples('regsync_service_syncs', { task: 'run' }).map((x) => [x.labels.state, x.value])).toEqual([
      ['synced', 2],
      ['failing', 1],
      ['held', 4],
    ]);
    expect(s.samples('regsync_service_syncs', { task: 'stop' })).toEqual([]);
    expect(s.samples('regsync_instances_managed').map((x) => x.labels.task)).toEqual(['run']);
    expect(s.samples('regsync_task_problem').map((x) => [x.labels, x.value])).toEqual([[{ task: 'run', code: 'services_left_out' }, 1]]);
    expect(s.samples('regsync_cluster_state', { cluster: 'a' }).map((x) => [x.labels.state, x.value])).toEqual([
      ['reachable', 0],
      ['partial', 0],
      ['unreachable', 1],
      ['unknown', 0],
    ]);
    expect(s.value('regsync_cluster_state', { cluster: 'b', state: 'reachable' })).toBe(1);
    // A state beyond the four shows under its own word, the four at 0.
    expect(s.samples('regsync_cluster_state', { cluster: 'c' }).map((x) => [x.labels.state, x.value])).toEqual([
      ['reachable', 0],
      ['partial', 0],
      ['unreachable', 0],
      ['unknown', 0],
      ['auth_failed', 1],
    ]);
    expect(s.samples('regsync_task_info').map((x) => [x.labels, x.value])).toEqual([
      [{ task: 'run', name: 'run', source: 'a', destination: 'b' }, 1],
      [{ task: 'stop', name: 'stop', source: 'b', destination: 'a' }, 1],
    ]);
    expect(s.value('regsync_cluster_info', { cluster: 'a', name: 'shanghai', kind: 'nacos' })).toBe(1);
  });

  it('is read by a parser that rejects what is not Prometheus text', async () => {
    await expect(parseScrape('this is not a sample\n')).rejects.toThrow();
    await expect(parseScrape('x{a="1" 2\n')).rejects.toThrow();
  });

  it('keeps each process registry apart and includes the default process metrics', async () => {
    const a = new RegsyncMetrics();
    const b = new RegsyncMetrics();
    a.reconciled({ taskId: 't', result: 'synced', durationMs: 1, lagMs: 1 });
    const sa = await parsed(a);
    const sb = await parsed(b);
    expect(sa.value('regsync_reconciles_total', { task: 't', outcome: 'synced' })).toBe(1);
    expect(sb.samples('regsync_reconciles_total')).toEqual([]);
    expect(sa.families.has('process_cpu_user_seconds_total')).toBe(true);
    expect(sb.families.has('nodejs_eventloop_lag_seconds')).toBe(true);
    expect(a.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  it('is an engine observer: combined observers each see every call, one that throws does not stop the others', async () => {
    const metrics = new RegsyncMetrics({ defaultMetrics: false });
    const seen: string[] = [];
    const observer = combineObservers(
      { beat: () => { throw new Error('boom'); } },
      metrics,
      { beat: (cluster) => seen.push(cluster), event: (e) => seen.push(e.kind) },
    );
    observer.beat?.('c', 'ok');
    observer.event?.({ kind: 'task', taskId: 't', message: 'm' });
    observer.reconciled?.({ taskId: 't', result: 'inactive', durationMs: 0 });
    const s = await parsed(metrics);
    expect(s.value('regsync_heartbeats_total', { cluster: 'c', result: 'ok' })).toBe(1);
    expect(s.value('regsync_reconciles_total', { task: 't', outcome: 'inactive' })).toBe(1);
    expect(seen).toEqual(['c', 'task']);
  });
});

describe('startMetricsServer', () => {
  let server: MetricsServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('serves /metrics and /healthz only', async () => {
    const metrics = new RegsyncMetrics({ defaultMetrics: false });
    metrics.beat('x', 'ok');
    server = await startMetricsServer(metrics, { host: '127.0.0.1', port: 0 }, silentLogger());
    expect(server.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const res = await fetch(`${server.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe(metrics.contentType);
    expect((await parseScrape(await res.text())).value('regsync_heartbeats_total', { cluster: 'x', result: 'ok' })).toBe(1);
    expect(await (await fetch(`${server.url}/healthz`)).json()).toEqual({ status: 'ok' });
    expect((await fetch(`${server.url}/api/v1/tasks`)).status).toBe(404);
    expect((await fetch(`${server.url}/metrics`, { method: 'POST' })).status).toBe(405);
  });

  it('answers 500 when rendering fails, and closes with a client connection open', async () => {
    server = await startMetricsServer({ contentType: 'text/plain', metrics: () => Promise.reject(new Error('no')) }, { host: '127.0.0.1', port: 0 }, silentLogger());
    expect((await fetch(`${server.url}/metrics`)).status).toBe(500);
    // fetch keeps the connection alive; close must not wait for it.
    const started = Date.now();
    await server.close();
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
