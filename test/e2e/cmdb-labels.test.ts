import { mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CmdbCache, FileCmdbProvider } from '../../src/cmdb/index.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { NACOS_SCENARIO_YAML, replaceFile } from '../support/cmdb-fixtures.js';
import {
  addRegistry,
  api,
  copiesIn,
  defineTask,
  registerNative,
  startFixture,
  startSync,
  stopFixture,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

const siteOf = (registry: RunningRegistry, service: string, ip: string): string | undefined =>
  copiesIn(registry, service).find((i) => i.ip === ip)?.metadata.site;

/**
 * regsync with a CMDB file: copies carry the CMDB labels of their IP and their source cluster's
 * labels; a label change re-labels only the copies of the services that list the IP; a broken CMDB
 * keeps the last good labels and blocks nothing.
 */
describe('CMDB labels on copies', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  let dir: string;
  let cmdbFile: string;
  let provider: FileCmdbProvider;
  let cache: CmdbCache;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'regsync-cmdb-e2e-'));
    cmdbFile = join(dir, 'cmdb.yaml');
    await writeFile(cmdbFile, NACOS_SCENARIO_YAML);
    provider = new FileCmdbProvider({ path: cmdbFile, pollMs: 50, debounceMs: 20 });
    await provider.start();
    cache = new CmdbCache({ provider, refreshMs: 3_600_000, eventPollMs: 100 });
    await cache.start();

    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    url = (await startSync(fx, undefined, { cmdb: { cache, describe: `file ${cmdbFile}` } })).url as string;
    for (const [id, registry, labels] of [
      ['a', a, { region: 'east' }],
      ['b', b, { region: 'north' }],
    ] as const) {
      const res = await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [registry.endpoint], labels });
      expect(res.status).toBe(201);
    }
    // Full syncs far away: every reconcile below is caused by a change.
    await defineTask(url, 'orders', 'a', 'b', 'orders', { options: { fullSyncIntervalMs: 3_600_000 } });
    await defineTask(url, 'payments', 'a', 'b', 'payments', { options: { fullSyncIntervalMs: 3_600_000, labels: ['zone'] } });
    natives.push(await registerNative(() => a, 'orders', '11.11.11.11', 8080));
    natives.push(await registerNative(() => a, 'orders', '22.22.22.22', 8080, { site: 'own' }));
    natives.push(await registerNative(() => a, 'payments', '11.11.11.11', 9090));
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await stopFixture(fx);
    await cache.stop();
    await provider.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("stamps the CMDB labels of each IP and the source cluster's labels, the source's own values first", async () => {
    await waitUntil(() => copiesIn(b, 'orders').length === 2 && copiesIn(b, 'payments').length === 1, { message: 'copies in B' });
    expect(copiesIn(b, 'orders').find((i) => i.ip === '11.11.11.11')?.metadata).toMatchObject({ site: 'x11', region: 'east' });
    // 22.22.22.22 registered with its own `site`: without `labelsOverride` it stays.
    expect(siteOf(b, 'orders', '22.22.22.22')).toBe('own');
    // `labels: [zone]`: the CMDB has no zone, so only the cluster label is stamped.
    const payment = copiesIn(b, 'payments')[0];
    expect(payment?.metadata.region).toBe('east');
    expect(payment?.metadata).not.toHaveProperty('site');
  });

  it('re-labels the copies of the changed IP only, within an event period', async () => {
    const syncedAt = async (task: string): Promise<string> => (await api(url, 'GET', `/api/v1/tasks/${task}`)).body.status.services[0].lastSyncAt;
    const queueEmpty = async (): Promise<boolean> => {
      const node = fx.node as NonNullable<SyncFixture['node']>;
      const depths = await Promise.all(Array.from({ length: node.deployment.shards }, (_, s) => node.queues.depth(s)));
      return depths.every((d) => d === 0);
    };

    // Both services list 11.11.11.11: both are reconciled (payments stamps only `zone`, so its copy
    // stays as it was).
    const paymentsBefore = await syncedAt('payments');
    await replaceFile(cmdbFile, NACOS_SCENARIO_YAML.replace('11.11.11.11: {site: x11}', '11.11.11.11: {site: x13}'));
    await waitUntil(() => siteOf(b, 'orders', '11.11.11.11') === 'x13', { message: 'copy of 11.11.11.11 re-labelled' });
    await waitUntil(async () => (await syncedAt('payments')) !== paymentsBefore, { message: 'payments reconciled for 11.11.11.11' });
    expect(copiesIn(b, 'payments')[0]?.metadata).not.toHaveProperty('site');

    // Only orders lists 22.22.22.22: payments is left alone. (Its reconcile, if one were queued,
    // would be queued with orders' and be done once the queues are empty.)
    const ordersBefore = await syncedAt('orders');
    const paymentsNow = await syncedAt('payments');
    await replaceFile(cmdbFile, NACOS_SCENARIO_YAML.replace('11.11.11.11: {site: x11}', '11.11.11.11: {site: x13}').replace('22.22.22.22: {site: x12}', '22.22.22.22: {site: x11}'));
    await waitUntil(async () => (await syncedAt('orders')) !== ordersBefore, { message: 'orders reconciled for 22.22.22.22' });
    await waitUntil(queueEmpty, { message: 'queues drained' });
    expect(await syncedAt('payments')).toBe(paymentsNow);
    // 22.22.22.22 has its own `site`, which wins over the CMDB's without `labelsOverride`.
    expect(siteOf(b, 'orders', '22.22.22.22')).toBe('own');
  });

  it('keeps the last good labels while the CMDB file is broken or missing, shows the problem, and syncs on', async () => {
    await replaceFile(cmdbFile, 'labels: [this is not: valid');
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/cmdb')).body.items[0]?.ok === false, { message: 'CMDB problem in the API' });
    const view = (await api(url, 'GET', '/api/v1/cmdb')).body.items[0];
    expect(view.provider).toBe(`file ${cmdbFile}`);
    expect(view.lastError.message).toContain(cmdbFile);
    expect(view.entities).toBeGreaterThan(0);
    expect(cache.labelsOf('22.22.22.22')).toEqual({ site: 'x11' });

    // A new instance still syncs, with the labels last known.
    natives.push(await registerNative(() => a, 'orders', '33.33.33.33', 8080));
    await waitUntil(() => siteOf(b, 'orders', '33.33.33.33') === 'x11', { message: 'new copy labelled from the last good CMDB' });
    expect(siteOf(b, 'orders', '11.11.11.11')).toBe('x13');

    // Gone altogether: the same.
    await unlink(cmdbFile);
    await waitUntil(async () => String((await api(url, 'GET', '/api/v1/cmdb')).body.items[0]?.lastError?.message).includes('file not found'), {
      message: 'missing file reported',
    });
    expect(cache.labelsOf('33.33.33.33')).toEqual({ site: 'x11' });

    await replaceFile(cmdbFile, NACOS_SCENARIO_YAML);
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/cmdb')).body.items[0]?.ok === true, { message: 'CMDB good again' });
    await waitUntil(() => siteOf(b, 'orders', '11.11.11.11') === 'x11', { message: 'copy re-labelled after the repair' });
  });

  it("re-stamps a cluster's labels when they change", async () => {
    const res = await api(url, 'PUT', '/api/v1/clusters/a', { id: 'a', kind: 'nacos', endpoints: [a.endpoint], labels: { region: 'west' } });
    expect(res.status).toBe(200);
    await waitUntil(() => copiesIn(b, 'orders').every((i) => i.metadata.region === 'west') && copiesIn(b, 'payments')[0]?.metadata.region === 'west', {
      message: 'region re-stamped',
    });
  });
});
