import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { scrape, type Scrape } from '../support/prometheus.js';
import { addRegistry, api, copiesIn, defineClusters, defineTask, registerNative, startFixture, startSync, stopFixture, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

const TASK = 'orders-a-to-b';

describe('GET /metrics of a running regsync', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    const node = await startSync(fx);
    url = node.url as string;
    await defineClusters(url, fx);
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    if (fx) await stopFixture(fx);
  });

  const metrics = () => scrape(`${url}/metrics`);
  const synced = (s: Scrape) => s.value('regsync_reconciles_total', { task: TASK, outcome: 'synced' }) ?? 0;
  const lagCount = (s: Scrape) => s.samples('regsync_propagation_lag_seconds', { task: TASK })[0]?.count ?? 0;
  const managed = (s: Scrape) => s.value('regsync_instances_managed', { task: TASK });

  it('counts reconciles, lag, heartbeats and copies as a sync runs', async () => {
    await defineTask(url, TASK, 'a', 'b', 'orders');
    const before = await metrics();
    expect(before.families.get('regsync_reconciles_total')?.type).toBe('counter');
    expect(before.families.get('regsync_propagation_lag_seconds')?.type).toBe('histogram');
    expect(before.families.has('process_cpu_user_seconds_total')).toBe(true);

    natives.push(await registerNative(() => a, 'orders', '10.77.0.1', 8080));
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'first copy in b' });
    const first = await waitUntil(
      async () => {
        const s = await metrics();
        return managed(s) === 1 && synced(s) > synced(before) && lagCount(s) > lagCount(before) ? s : undefined;
      },
      { message: 'metrics after the first copy', timeoutMs: 15_000 },
    );
    const duration = first.samples('regsync_reconcile_duration_seconds', { task: TASK })[0];
    expect(duration?.count).toBeGreaterThanOrEqual(synced(first));
    expect(first.samples('regsync_propagation_lag_seconds', { task: TASK })[0]?.buckets?.['+Inf']).toBe(lagCount(first));

    // The copy is ephemeral: the shard leader beats it on b.
    await waitUntil(async () => ((await metrics()).value('regsync_heartbeats_total', { cluster: 'b', result: 'ok' }) ?? 0) >= 1, {
      message: 'a heartbeat to b counted',
      timeoutMs: 20_000,
    });

    natives.push(await registerNative(() => a, 'orders', '10.77.0.2', 8080));
    await waitUntil(() => copiesIn(b, 'orders').length === 2, { message: 'second copy in b' });
    await waitUntil(
      async () => {
        const s = await metrics();
        return managed(s) === 2 && synced(s) > synced(first) && lagCount(s) > lagCount(first);
      },
      { message: 'metrics after the second copy', timeoutMs: 15_000 },
    );
  });

  it('shows which shards this process leads, and every shard queue', async () => {
    const node = fx.node;
    const led = await waitUntil(() => (node?.coordinator?.ledShards().length ? node.coordinator.ledShards() : undefined), { message: 'shards led' });
    const s = await metrics();
    const shards = node?.deployment.shards ?? 0;
    const leader = new Map(s.samples('regsync_shard_leader').map((x) => [Number(x.labels.shard), x.value]));
    expect([...leader.keys()].sort((x, y) => x - y)).toEqual(Array.from({ length: shards }, (_, i) => i));
    for (let shard = 0; shard < shards; shard += 1) expect(leader.get(shard), `shard ${shard}`).toBe(led.includes(shard) ? 1 : 0);
    const depth = s.samples('regsync_queue_depth');
    expect(depth.map((x) => Number(x.labels.shard)).sort((x, y) => x - y)).toEqual(Array.from({ length: shards }, (_, i) => i));
    for (const d of depth) expect(d.value).toBeGreaterThanOrEqual(0);
  });

  it('counts the failed requests of an unreachable cluster and the reconciles they fail', async () => {
    const res = await api(url, 'POST', '/api/v1/clusters', { id: 'dead', kind: 'nacos', endpoints: ['127.0.0.1:1'] });
    expect(res.status).toBe(201);
    await defineTask(url, 'from-dead', 'dead', 'b', 'orders');
    const s = await waitUntil(
      async () => {
        const m = await metrics();
        return (m.value('regsync_adapter_request_errors_total', { cluster: 'dead', kind: 'nacos-unreachable' }) ?? 0) >= 1 &&
          (m.value('regsync_reconciles_total', { task: 'from-dead', outcome: 'failed' }) ?? 0) >= 1
          ? m
          : undefined;
      },
      { message: 'adapter errors and failed reconciles counted', timeoutMs: 20_000 },
    );
    // Labels are ids and fixed words, never services or addresses; the info series add names of tasks and clusters.
    const allowed = new Set(['task', 'outcome', 'cluster', 'kind', 'result', 'shard', 'state', 'code', 'le']);
    const info = new Set(['name', 'source', 'destination']);
    for (const [name, family] of s.families) {
      if (!name.startsWith('regsync_')) continue;
      for (const sample of family.samples) {
        for (const [label, value] of Object.entries(sample.labels)) {
          expect(allowed.has(label) || (name.endsWith('_info') && info.has(label)), `${name} label ${label}`).toBe(true);
          expect(value, `${name} ${label}`).not.toMatch(/^orders$|10\.77\.|127\.0\.0\.1/);
        }
      }
    }
    expect(s.samples('regsync_adapter_request_errors_total', { cluster: 'a' })).toEqual([]);
  });

  it('counts the failed calls of an unreachable ZooKeeper cluster by their error code', async () => {
    const options = { layout: 'dubbo', connectTimeoutMs: 300, operationTimeoutMs: 300 };
    const res = await api(url, 'POST', '/api/v1/clusters', { id: 'dead-zk', kind: 'zookeeper', endpoints: ['127.0.0.1:1'], options });
    expect(res.status).toBe(201);
    await defineTask(url, 'from-dead-zk', 'dead-zk', 'b', 'providers:com.acme.Orders::');
    await waitUntil(
      async () => {
        const m = await metrics();
        return m.samples('regsync_adapter_request_errors_total', { cluster: 'dead-zk' }).some((x) => (x.value ?? 0) >= 1 && /^zookeeper-/.test(x.labels.kind ?? ''));
      },
      { message: 'ZooKeeper request errors counted', timeoutMs: 20_000 },
    );
  });
});
