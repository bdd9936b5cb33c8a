import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { scrape, type Scrape } from '../support/prometheus.js';
import { addRegistry, api, defineClusters, defineTask, persistent, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

const md5 = (text: string) => createHash('md5').update(text).digest('hex');

/**
 * The deployment-wide gauges of service syncs, cluster reachability and task names, scraped from
 * a real node (API and worker roles) over real Redis and embedded Nacos registries.
 */
describe('operator gauges of a running regsync', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    url = (await startSync(fx)).url as string;
    // A held mass deletion on its own: no source warm-up holds the drop first (see source-warmup.test.ts).
    await defineClusters(url, fx, { warmupSeconds: 0 });
  });
  afterAll(async () => {
    if (fx) await stopFixture(fx);
  });

  const metrics = () => scrape(`${url}/metrics`);
  // The gauges are read at most every 5 s (instancesRefreshMs); polling slowly stays under the API's rate limit.
  const slow = { timeoutMs: 30_000, intervalMs: 250 };
  const syncs = (s: Scrape, task: string) => Object.fromEntries(s.samples('regsync_service_syncs', { task }).map((x) => [x.labels.state, x.value]));
  const clusterState = (s: Scrape, cluster: string) => s.samples('regsync_cluster_state', { cluster }).find((x) => x.value === 1)?.labels.state;

  it('counts a held mass deletion as held, and a synced service as synced', async () => {
    const ips = Array.from({ length: 10 }, (_, i) => `10.51.0.${i + 1}`);
    for (const ip of ips) a.store.register('public', 'DEFAULT_GROUP', 'guarded', persistent(ip));
    await defineTask(url, 'guarded', 'a', 'b', 'guarded', { options: { massDeletionConfirm: 'operator' } });
    await waitUntil(async () => syncs(await metrics(), 'guarded').synced === 1, { message: 'guarded synced', ...slow });
    const before = await metrics();
    expect(syncs(before, 'guarded')).toEqual({ synced: 1, failing: 0, held: 0 });
    expect(before.value('regsync_instances_managed', { task: 'guarded' })).toBe(10);

    for (const ip of ips.slice(1)) a.store.deregister('public', 'DEFAULT_GROUP', 'guarded', ip, 8080, 'DEFAULT');
    const held = await waitUntil(async () => {
      const s = await metrics();
      return syncs(s, 'guarded').held === 1 ? s : undefined;
    }, { message: 'held deletion in the gauge', ...slow });
    expect(syncs(held, 'guarded')).toEqual({ synced: 0, failing: 0, held: 1 });
    // Nothing was removed: the copies stay counted.
    expect(held.value('regsync_instances_managed', { task: 'guarded' })).toBe(10);
    expect(clusterState(held, 'a')).toBe('reachable');
    expect(clusterState(held, 'b')).toBe('reachable');

    expect((await api(url, 'POST', '/api/v1/tasks/guarded/release', {})).status).toBe(202);
    await waitUntil(async () => syncs(await metrics(), 'guarded').synced === 1, { message: 'released: synced again', ...slow });
  });

  it('counts the services of a task whose source cannot be reached as failing, the task of every service as a task problem, and the cluster as unreachable', async () => {
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'dead', kind: 'nacos', endpoints: ['127.0.0.1:1'] })).status).toBe(201);
    // Used by no running task: unknown, not unreachable.
    await waitUntil(async () => clusterState(await metrics(), 'dead') === 'unknown', { message: 'new cluster unknown', ...slow });
    await defineTask(url, 'from-dead', 'dead', 'b', 'orders');
    const s = await waitUntil(async () => {
      const m = await metrics();
      return clusterState(m, 'dead') === 'unreachable' ? m : undefined;
    }, { message: 'dead cluster unreachable', ...slow });
    expect(s.samples('regsync_cluster_state', { cluster: 'dead' }).map((x) => x.value).sort()).toEqual([0, 0, 0, 1]);
    expect(syncs(s, 'from-dead')).toEqual({ synced: 0, failing: 1, held: 0 });
    expect(s.value('regsync_cluster_info', { cluster: 'dead', name: 'dead', kind: 'nacos' })).toBe(1);

    // A task of every service cannot even list the source: a problem of the whole task.
    await defineTask(url, 'all-from-dead', 'dead', 'b', '*');
    await waitUntil(async () => (await metrics()).value('regsync_task_problem', { task: 'all-from-dead', code: 'source_unlisted' }) === 1, {
      message: 'task problem in the gauge',
      ...slow,
    });
    expect((await api(url, 'POST', '/api/v1/tasks/all-from-dead/pause', {})).status).toBeLessThan(300);

    // Paused: its statuses are as old as the pause, so it no longer counts, and the cluster is unknown again.
    expect((await api(url, 'POST', '/api/v1/tasks/from-dead/pause', {})).status).toBeLessThan(300);
    await waitUntil(async () => {
      const m = await metrics();
      return clusterState(m, 'dead') === 'unknown' && m.samples('regsync_service_syncs', { task: 'from-dead' }).length === 0 && m.samples('regsync_task_problem').length === 0;
    }, { message: 'paused task left out', ...slow });
  });

  it('names a task created through the nacos-sync API, whose id is an md5, in regsync_task_info', async () => {
    for (const [name, registry] of [['shanghai', a], ['beijing', b]] as const) {
      const res = await api(url, 'POST', '/v1/cluster/add', { clusterName: name, clusterType: 'NACOS', connectKeyList: [registry.endpoint] });
      expect(res.body.success, JSON.stringify(res.body)).toBe(true);
    }
    const shanghai = md5('shanghai_NACOS');
    const beijing = md5('beijing_NACOS');
    const res = await api(url, 'POST', '/v1/task/add', { sourceClusterId: shanghai, destClusterId: beijing, serviceName: 'payments', groupName: 'DEFAULT_GROUP' });
    expect(res.body.success, JSON.stringify(res.body)).toBe(true);
    const id = md5(`payments_DEFAULT_GROUP_${shanghai}_${beijing}`);

    const s = await waitUntil(async () => {
      const m = await metrics();
      return m.samples('regsync_task_info', { task: id }).length > 0 ? m : undefined;
    }, { message: 'task info of the nacos-sync task', ...slow });
    expect(s.samples('regsync_task_info', { task: id }).map((x) => [x.labels, x.value])).toEqual([
      [{ task: id, name: 'payments in DEFAULT_GROUP, shanghai -> beijing', source: shanghai, destination: beijing }, 1],
    ]);
    expect(s.value('regsync_cluster_info', { cluster: shanghai, name: 'shanghai', kind: 'nacos' })).toBe(1);
    // Tasks with ids people chose keep them as their name.
    expect(s.value('regsync_task_info', { task: 'guarded', name: 'guarded', source: 'a', destination: 'b' })).toBe(1);
  });
});
