import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Consul from 'consul';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_ORIGIN, MARK_PATH, MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startConsulServer, type ConsulServer } from '../support/consul-server.js';
import { startK8sApiServer, type K8sApiServer, managedSlices, managedAddresses } from '../support/k8s-api-server.js';
import { addRegistry, api, copiesIn, countChanges, defineClusters, defineTask, instancesIn, persistent, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** A service's status in a task, as the API shows it. */
interface ServiceStatus {
  service: string;
  sourceInstances: number;
  destinationInstances: number;
  lastSyncAt: string | null;
  lastError: string | null;
  problems: Array<{ code: string; side: string; cluster: string; message: string }>;
  skipped?: Record<string, number>;
}

const k8sWrites = (k8s: K8sApiServer) => k8s.requests.filter((r) => ['create', 'update', 'delete'].includes(r.verb)).length;
const consulWrites = (consul: ConsulServer) => consul.requests.filter((r) => r.method === 'PUT').length;

/**
 * Consul <-> Kubernetes through regsync, end to end: a real regsync node on real Redis, the test
 * Consul (written and read with the real npm `consul` client), the test Kubernetes API server
 * (reached by the real client through a kubeconfig file) and an embedded Nacos registry for the ring.
 */
describe('Consul -> Kubernetes, beside consul-k8s', () => {
  let fx: SyncFixture;
  let consulServer: ConsulServer;
  let consul: Consul;
  let k8s: K8sApiServer;
  let nacos: RunningRegistry;
  let url: string;
  let dir: string;

  const statuses = async (task: string): Promise<ServiceStatus[]> => (await api(url, 'GET', `/api/v1/tasks/${task}`)).body.status.services as ServiceStatus[];
  const status = async (task: string, name: string) => (await statuses(task)).find((s) => s.service === `public/DEFAULT_GROUP/${name}`);
  /**
   * What consul-k8s's catalog sync writes for a Kubernetes Service's endpoint: a catalog
   * registration on node k8s-sync, tag k8s, meta external-source=kubernetes and the namespace, and
   * (`check`) a passing health check.
   */
  const registerLikeConsulK8s = (name: string, hash: string, ip: string, check = true) =>
    consul.catalog.register({
      node: 'k8s-sync',
      address: '127.0.0.1',
      nodemeta: { 'external-source': 'kubernetes' },
      service: { id: `${name}-${hash}`, service: name, address: ip, port: 8080, tags: ['k8s'], meta: { 'external-source': 'kubernetes', 'external-k8s-ns': 'default' } },
      ...(check ? { check: { checkid: `default/${name}-${hash}/kubernetes-health-check`, name: 'Kubernetes Health Check', status: 'passing', serviceid: `${name}-${hash}` } } : {}),
    } as never);
  /** Waits until every service sync of the tasks has reconciled after `since` (ms). */
  const reconciledSince = (tasks: string[], since: number, count?: number) =>
    waitUntil(
      async () => {
        for (const task of tasks) {
          const list = await statuses(task);
          if (list.length === 0 || (count !== undefined && list.length < count) || list.some((s) => s.lastSyncAt === null || Date.parse(s.lastSyncAt) < since)) return false;
        }
        return true;
      },
      { message: `tasks ${tasks.join(', ')} reconciled` },
    );

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'regsync-consul-k8s-'));
    k8s = await startK8sApiServer();
    await writeFile(join(dir, 'kubeconfig'), k8s.kubeconfigYaml());
    consulServer = await startConsulServer();
    consul = new Consul({ host: '127.0.0.1', port: consulServer.port });
    fx = await startFixture();
    nacos = await addRegistry(fx, 'nacos');
    url = (await startSync(fx)).url as string;
    await defineClusters(url, fx);
    const clusters = [
      { id: 'consul', kind: 'consul', endpoints: [consulServer.endpoint], options: { backoffMaxMs: 500 } },
      {
        id: 'k8s',
        kind: 'kubernetes',
        endpoints: [`127.0.0.1:${k8s.port}`],
        options: { kubeconfig: join(dir, 'kubeconfig'), namespaceMap: { default: 'public' }, backoffInitialMs: 50, backoffMaxMs: 500, requestTimeoutMs: 5_000 },
      },
    ];
    for (const cluster of clusters) {
      const res = await api(url, 'POST', '/api/v1/clusters', cluster);
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    }
  });
  afterAll(async () => {
    await stopFixture(fx);
    consul?.destroy();
    await consulServer?.close();
    await k8s?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it("copies Consul's own instances into Kubernetes, skips consul-k8s's copy of a Kubernetes Service as foreign, and never touches it", async () => {
    // An application registered through its local agent, with a TTL check it passes.
    await consul.agent.service.register({ name: 'web', id: 'web-1', address: '10.80.0.1', port: 8080, tags: ['v1'], meta: { version: '1' }, check: { name: 'web alive', ttl: '10m' } as never });
    await consul.agent.check.pass('service:web-1');
    // The Kubernetes Service `frontend`, and consul-k8s's catalog sync of it into Consul: node
    // k8s-sync, tag k8s, meta external-source=kubernetes, a passing readiness check.
    k8s.put('services', { metadata: { name: 'frontend', namespace: 'default' }, spec: { selector: { app: 'frontend' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] } });
    const frontendVersion = k8s.get('services', 'default', 'frontend')?.metadata.resourceVersion;
    await registerLikeConsulK8s('frontend', '6f8a2c1d9b3e', '10.244.1.7');
    const foreign = () => consulServer.healthService('frontend');
    const foreignAsRegistered = JSON.stringify(foreign());
    expect(foreign()).toHaveLength(1);
    const writesBefore = consulWrites(consulServer);

    const since = Date.now();
    await defineTask(url, 'c2k', 'consul', 'k8s', '*');
    await waitUntil(() => managedAddresses(k8s, 'web').join() === '10.80.0.1', { message: 'the endpoint of web in Kubernetes' });
    const [slice] = managedSlices(k8s, 'web');
    const entries = JSON.parse(slice?.metadata.annotations?.['regsync.io/instances'] as string) as Record<string, { metadata: Record<string, string> }>;
    expect(entries['10.80.0.1:8080#DEFAULT']?.metadata).toMatchObject({ version: '1', 'consul.tags': 'v1', [MARK_ORIGIN]: 'consul', [MARK_PATH]: 'consul', [MARK_TASK]: 'c2k' });
    // Consul's own servers (the service `consul`) are left out of `*`.
    await reconciledSince(['c2k'], since, 2);
    expect((await statuses('c2k')).map((s) => s.service).sort()).toEqual(['public/DEFAULT_GROUP/frontend', 'public/DEFAULT_GROUP/web']);
    expect(await status('c2k', 'frontend')).toMatchObject({ sourceInstances: 1, destinationInstances: 0, lastError: null, skipped: { foreign: 1 } });
    expect(managedSlices(k8s, 'frontend')).toEqual([]);
    expect(k8s.get('services', 'default', 'frontend')?.metadata.resourceVersion).toBe(frontendVersion);
    expect(JSON.stringify(foreign())).toBe(foreignAsRegistered);

    // A full sync: still skipped, nothing written anywhere for it.
    const resynced = Date.now();
    expect((await api(url, 'POST', '/api/v1/tasks/c2k/resync')).status).toBe(202);
    await reconciledSince(['c2k'], resynced, 2);
    expect(await status('c2k', 'frontend')).toMatchObject({ destinationInstances: 0, skipped: { foreign: 1 } });
    expect(managedSlices(k8s, 'frontend')).toEqual([]);
    expect(k8s.get('services', 'default', 'frontend')?.metadata.resourceVersion).toBe(frontendVersion);
    expect(JSON.stringify(foreign())).toBe(foreignAsRegistered);

    // The task watches the service list, web and frontend with blocking queries.
    await waitUntil(() => consulServer.waitingQueries() === 3, { message: 'three blocking queries waiting' });

    // The task deleted: its copy of web goes, consul-k8s's registration stays as it was.
    expect((await api(url, 'DELETE', '/api/v1/tasks/c2k')).status).toBe(204);
    expect(k8s.get('services', 'default', 'web')).toBeUndefined();
    expect(k8s.get('services', 'default', 'frontend')?.metadata.resourceVersion).toBe(frontendVersion);
    expect(JSON.stringify(foreign())).toBe(foreignAsRegistered);
    // A Consul -> Kubernetes task never writes into Consul.
    expect(consulWrites(consulServer)).toBe(writesBefore);
    // Its blocking queries (the service list, each service) end with it.
    await waitUntil(() => consulServer.waitingQueries() === 0, { message: 'no blocking query left waiting' });
  });

  it("a Nacos -> Consul task never overwrites nor removes consul-k8s's registration of the same address", async () => {
    await registerLikeConsulK8s('storefront', '9c8b7a6d5e4f', '10.244.3.7');
    // The same pod also registered itself in Nacos (a Spring Cloud application in Kubernetes), and a second one only there.
    nacos.store.register('public', 'DEFAULT_GROUP', 'storefront', persistent('10.244.3.7'));
    nacos.store.register('public', 'DEFAULT_GROUP', 'storefront', persistent('10.244.3.8'));
    const seen = consulServer.requests.length;
    const foreignAsRegistered = JSON.stringify(consulServer.healthService('storefront').filter((e) => e.Node.Node === 'k8s-sync'));
    await defineTask(url, 'n2c-storefront', 'nacos', 'consul', 'storefront');
    await waitUntil(async () => (await status('n2c-storefront', 'storefront'))?.skipped?.conflicting === 1, { message: 'the conflict reported' });
    expect((await status('n2c-storefront', 'storefront'))?.problems).toContainEqual(expect.objectContaining({ code: 'address_conflict', cluster: 'consul' }));
    const entries = () => (consulServer.healthService('storefront')).map((e) => `${e.Node.Node} ${e.Service.Address}:${e.Service.Port}`).sort();
    expect(entries()).toEqual(['k8s-sync 10.244.3.7:8080', 'regsync 10.244.3.8:8080']);
    const k8sSync = () => JSON.stringify(consulServer.healthService('storefront').filter((e) => e.Node.Node === 'k8s-sync'));
    expect(k8sSync()).toBe(foreignAsRegistered);

    // Gone from Nacos, then the task deleted: regsync removes its own copy only.
    nacos.store.deregister('public', 'DEFAULT_GROUP', 'storefront', '10.244.3.7', 8080, 'DEFAULT');
    const since = Date.now();
    await reconciledSince(['n2c-storefront'], since);
    expect(entries()).toEqual(['k8s-sync 10.244.3.7:8080', 'regsync 10.244.3.8:8080']);
    expect((await api(url, 'DELETE', '/api/v1/tasks/n2c-storefront')).status).toBe(204);
    await waitUntil(() => entries().join() === 'k8s-sync 10.244.3.7:8080', { message: "only regsync's copy removed" });
    expect(k8sSync()).toBe(foreignAsRegistered);
    expect(consulServer.requests.slice(seen).filter((r) => r.method === 'PUT' && r.path === '/v1/catalog/deregister').length).toBe(1);
  });

  it("consul-k8s's registration copied on to Nacos never goes from there back into Kubernetes", async () => {
    k8s.put('services', { metadata: { name: 'catalog-api', namespace: 'default' }, spec: { selector: { app: 'catalog-api' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] } });
    const version = k8s.get('services', 'default', 'catalog-api')?.metadata.resourceVersion;
    await registerLikeConsulK8s('catalog-api', '0a1b2c3d4e5f', '10.244.2.9', false);
    // Kubernetes -> (consul-k8s) -> Consul -> (regsync) -> Nacos: Nacos is no Kubernetes, the copy goes there, marks and all.
    await defineTask(url, 'c2n-catalog', 'consul', 'nacos', 'catalog-api');
    await waitUntil(() => copiesIn(nacos, 'catalog-api').length === 1, { message: 'the copy in Nacos' });
    expect(copiesIn(nacos, 'catalog-api')[0]?.metadata).toMatchObject({ 'external-source': 'kubernetes', 'external-k8s-ns': 'default', 'consul.tags': 'k8s', [MARK_ORIGIN]: 'consul' });
    // Nacos -> (regsync) -> Kubernetes: consul-k8s's mark says it came from Kubernetes.
    const writes = k8sWrites(k8s);
    await defineTask(url, 'n2k-catalog', 'nacos', 'k8s', 'catalog-api');
    await waitUntil(async () => (await status('n2k-catalog', 'catalog-api'))?.lastSyncAt, { message: 'the Nacos -> Kubernetes task ran' });
    expect(await status('n2k-catalog', 'catalog-api')).toMatchObject({ sourceInstances: 1, destinationInstances: 0, lastError: null, skipped: { foreign: 1 } });
    expect(managedSlices(k8s, 'catalog-api')).toEqual([]);
    expect(k8s.get('services', 'default', 'catalog-api')?.metadata.resourceVersion).toBe(version);
    expect(k8sWrites(k8s)).toBe(writes);
    for (const id of ['c2n-catalog', 'n2k-catalog']) expect((await api(url, 'DELETE', `/api/v1/tasks/${id}`)).status).toBe(204);
  });

  it('a ring Nacos -> Consul -> Kubernetes -> Nacos converges to one instance per cluster, and stays so across full syncs', async () => {
    nacos.store.register('public', 'DEFAULT_GROUP', 'ring', persistent('10.80.1.1', { app: 'ring' }));
    const tasks = ['n2c', 'c2k-ring', 'k2n'];
    await defineTask(url, 'n2c', 'nacos', 'consul', 'ring');
    await defineTask(url, 'c2k-ring', 'consul', 'k8s', 'ring');
    await defineTask(url, 'k2n', 'k8s', 'nacos', 'ring');
    await waitUntil(() => managedAddresses(k8s, 'ring').join() === '10.80.1.1', { message: 'the endpoint in Kubernetes' });
    const consulRing = () => consulServer.healthService('ring');
    expect(consulRing().map((e) => `${e.Node.Node} ${e.Service.Address}`)).toEqual(['regsync 10.80.1.1']);
    expect(consulRing()[0]?.Service.Meta).toMatchObject({ 'regsync-origin': 'nacos', 'regsync-path': 'nacos', 'regsync-task': 'n2c' });
    const [slice] = managedSlices(k8s, 'ring');
    const entries = JSON.parse(slice?.metadata.annotations?.['regsync.io/instances'] as string) as Record<string, { metadata: Record<string, string> }>;
    expect(entries['10.80.1.1:8080#DEFAULT']?.metadata).toMatchObject({ [MARK_ORIGIN]: 'nacos', [MARK_PATH]: 'nacos,consul', [MARK_TASK]: 'c2k-ring' });
    await reconciledSince(tasks, 0);
    // Kubernetes -> Nacos sees the instance went through Nacos already: skipped, nothing written back.
    expect(await status('k2n', 'ring')).toMatchObject({ sourceInstances: 1, destinationInstances: 0, lastError: null, skipped: { marked: 1 } });
    expect(instancesIn(nacos, 'ring').map((i) => i.ip)).toEqual(['10.80.1.1']);
    expect(copiesIn(nacos, 'ring')).toEqual([]);

    const nacosChanges = countChanges(nacos);
    const [consulBefore, k8sBefore] = [consulWrites(consulServer), k8sWrites(k8s)];
    for (let round = 0; round < 2; round += 1) {
      const since = Date.now();
      for (const id of tasks) expect((await api(url, 'POST', `/api/v1/tasks/${id}/resync`)).status).toBe(202);
      await reconciledSince(tasks, since);
    }
    expect([nacosChanges.count(), consulWrites(consulServer) - consulBefore, k8sWrites(k8s) - k8sBefore]).toEqual([0, 0, 0]);
    expect([instancesIn(nacos, 'ring').length, consulRing().length, managedAddresses(k8s, 'ring').length]).toEqual([1, 1, 1]);
  });
  it('the ring the other way round, Nacos -> Kubernetes -> Consul -> Nacos, converges too, marks carried through Consul meta', async () => {
    nacos.store.register('public', 'DEFAULT_GROUP', 'ring2', persistent('10.80.2.1', { app: 'ring2' }));
    const tasks = ['n2k-r2', 'k2c-r2', 'c2n-r2'];
    await defineTask(url, 'n2k-r2', 'nacos', 'k8s', 'ring2');
    await defineTask(url, 'k2c-r2', 'k8s', 'consul', 'ring2');
    await defineTask(url, 'c2n-r2', 'consul', 'nacos', 'ring2');
    const passing = async () => (await consul.health.service({ service: 'ring2', passing: true })) as Array<{ Node: { Node: string }; Service: { Address: string; Meta: Record<string, string> } }>;
    await waitUntil(async () => (await passing()).length === 1, { message: 'the copy in Consul' });
    const [entry] = await passing();
    expect(entry?.Node.Node).toBe('regsync');
    expect(entry?.Service.Meta).toMatchObject({ app: 'ring2', 'regsync-origin': 'nacos', 'regsync-path': 'nacos,k8s', 'regsync-task': 'k2c-r2' });
    await reconciledSince(tasks, 0);
    expect(await status('c2n-r2', 'ring2')).toMatchObject({ sourceInstances: 1, destinationInstances: 0, lastError: null, skipped: { marked: 1 } });
    const since = Date.now();
    for (const id of tasks) expect((await api(url, 'POST', `/api/v1/tasks/${id}/resync`)).status).toBe(202);
    await reconciledSince(tasks, since);
    expect([instancesIn(nacos, 'ring2').length, (await passing()).length, managedAddresses(k8s, 'ring2').length]).toEqual([1, 1, 1]);
  });
});
