import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Eureka } from 'eureka-js-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_ORIGIN } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startEurekaServer, type EurekaServer } from '../support/eureka-server.js';
import { startK8sApiServer, type K8sApiServer } from '../support/k8s-api-server.js';
import { addRegistry, api, copiesIn, defineClusters, defineTask, persistent, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * Eureka both ways through regsync, with the real eureka-js-client as Spring-style services use
 * it: an instance it registers reaches Nacos and Kubernetes and leaves them when it stops; a Nacos
 * instance copied into Eureka is found by the client through its VIP address, outlives three lease
 * durations on the heartbeat proxy's renewals, comes back when the server loses its lease, and is
 * cancelled with its source. The server's
 * response cache (list reads a second behind) makes no copy flap.
 */

const LEASE_S = 2;
const quiet = { warn: () => undefined, info: () => undefined, debug: () => undefined, error: () => undefined };

const provider = (server: EurekaServer, app: string, ip: string) =>
  new Eureka({
    logger: quiet,
    instance: {
      app,
      hostName: ip,
      ipAddr: ip,
      instanceId: `${ip}:${app}:8080`,
      port: { $: 8080, '@enabled': true },
      vipAddress: app,
      statusPageUrl: `http://${ip}:8080/actuator/info`,
      dataCenterInfo: { '@class': 'com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo', name: 'MyOwn' },
      metadata: { 'management.port': '8081', zone: 'z1' },
    },
    eureka: { host: '127.0.0.1', port: server.port, servicePath: '/eureka/apps/', heartbeatInterval: 500, fetchRegistry: false, maxRetries: 1, requestRetryDelay: 10 },
  });

const consumer = (server: EurekaServer) =>
  new Eureka({
    logger: quiet,
    instance: { app: 'consumer', hostName: '10.60.0.99', ipAddr: '10.60.0.99', vipAddress: 'consumer', dataCenterInfo: { '@class': 'com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo', name: 'MyOwn' } },
    eureka: { host: '127.0.0.1', port: server.port, servicePath: '/eureka/apps/', registerWithEureka: false, registryFetchInterval: 200, maxRetries: 1, requestRetryDelay: 10 },
  });

const started = (c: Eureka) => new Promise<void>((resolve, reject) => c.start((err) => (err ? reject(err) : resolve())));
const stopped = (c: Eureka) => new Promise<void>((resolve) => c.stop(() => resolve()));

describe('Eureka <-> Nacos and Eureka -> Kubernetes', () => {
  let fx: SyncFixture;
  let nacos: RunningRegistry;
  let eureka: EurekaServer;
  let k8s: K8sApiServer;
  let url: string;
  let dir: string;
  const clients: Eureka[] = [];
  let cacheTicker: ReturnType<typeof setInterval> | undefined;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'regsync-eureka-e2e-'));
    // List reads come from a response cache, as Eureka serves them (refreshed every 30 s there):
    // refreshed often here, and by hand where a test needs it behind the registry.
    eureka = await startEurekaServer({ readCacheMs: 3_600_000, evictionIntervalMs: 250 });
    cacheTicker = setInterval(() => eureka.refreshReadCache(), 200);
    k8s = await startK8sApiServer();
    await writeFile(join(dir, 'kubeconfig'), k8s.kubeconfigYaml());
    fx = await startFixture();
    nacos = await addRegistry(fx, 'nacos');
    url = (await startSync(fx)).url as string;
    await defineClusters(url, fx);
    const clusters = [
      {
        id: 'eureka',
        kind: 'eureka',
        endpoints: [eureka.endpoint],
        options: { pollIntervalMs: 200, renewalIntervalS: 1, leaseDurationS: LEASE_S, readCacheMs: 60_000 },
      },
      { id: 'k8s', kind: 'kubernetes', endpoints: [], options: { kubeconfig: join(dir, 'kubeconfig'), namespaceMap: { default: 'public' }, backoffInitialMs: 50, backoffMaxMs: 500 } },
    ];
    for (const c of clusters) expect((await api(url, 'POST', '/api/v1/clusters', c)).status).toBe(201);
  });

  afterAll(async () => {
    clearInterval(cacheTicker);
    for (const c of clients.splice(0)) await stopped(c);
    if (fx) await stopFixture(fx);
    await eureka?.close();
    await k8s?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('copies an instance eureka-js-client registers into Nacos, and removes it when the client stops', async () => {
    const orders = provider(eureka, 'orders-service', '10.60.0.1');
    await started(orders);
    await defineTask(url, 'eureka-to-nacos', 'eureka', 'nacos', 'orders-service');
    await waitUntil(() => copiesIn(nacos, 'orders-service').length === 1, { message: 'the copy in Nacos', timeoutMs: 30_000 });
    const [copy] = copiesIn(nacos, 'orders-service');
    expect(copy).toMatchObject({ ip: '10.60.0.1', port: 8080, healthy: true });
    expect(copy?.metadata).toMatchObject({ 'management.port': '8081', zone: 'z1', [MARK_ORIGIN]: 'eureka' });

    await stopped(orders);
    await waitUntil(() => copiesIn(nacos, 'orders-service').length === 0, { message: 'the copy removed from Nacos', timeoutMs: 30_000 });
  });

  it('copies it into Kubernetes too', async () => {
    const inventory = provider(eureka, 'inventory', '10.60.0.2');
    clients.push(inventory);
    await started(inventory);
    await defineTask(url, 'eureka-to-k8s', 'eureka', 'k8s', 'inventory');
    await waitUntil(
      () => k8s.list('endpointslices', 'default').some((s) => JSON.stringify(s).includes('10.60.0.2')),
      { message: 'an EndpointSlice with the Eureka instance', timeoutMs: 30_000 },
    );
  });

  it('copies a Nacos instance into Eureka, found by VIP address, renewed past three lease durations, cancelled with its source', async () => {
    // From here the cache lags until refreshed by hand: reads must not take it for the truth.
    clearInterval(cacheTicker);
    const reads = () => eureka.requests.filter((r) => r.method === 'GET' && r.path === '/apps/BILLING').length;
    const writes = (method: string) => eureka.requests.filter((r) => r.method === method && r.path.startsWith('/apps/BILLING') && !r.path.includes('/status')).length;
    /** A reconcile now, through the stale cache: waits until it read the service. */
    const resyncThroughStaleCache = async () => {
      const before = reads();
      expect((await api(url, 'POST', '/api/v1/tasks/nacos-to-eureka/resync')).status).toBe(202);
      await waitUntil(() => reads() > before, { message: 'a reconcile read the service', timeoutMs: 30_000 });
      // The reconcile's writes, if any, follow its read: let the task report it done.
      await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/nacos-to-eureka/summary')).body?.lastError === null, { message: 'the reconcile done', timeoutMs: 30_000 });
    };

    // Persistent in Nacos: in Eureka every copy holds a lease all the same.
    nacos.store.register('public', 'DEFAULT_GROUP', 'billing', persistent('10.60.0.3', { 'management.port': '9090' }));
    await defineTask(url, 'nacos-to-eureka', 'nacos', 'eureka', 'billing');
    await waitUntil(() => eureka.instances('BILLING').length === 1, { message: 'the copy in Eureka', timeoutMs: 30_000 });
    const [copy] = eureka.instances('BILLING');
    expect(copy).toMatchObject({ app: 'BILLING', vipAddress: 'billing', ipAddr: '10.60.0.3', instanceId: '10.60.0.3:billing:8080', statusPageUrl: 'http://10.60.0.3:9090/actuator/info' });
    // The cache does not show the copy yet: a reconcile must not register it again.
    await resyncThroughStaleCache();
    expect(writes('POST')).toBe(1);

    eureka.refreshReadCache();
    const client = consumer(eureka);
    clients.push(client);
    await started(client);
    await waitUntil(() => client.getInstancesByVipAddress('billing').length === 1, { message: 'eureka-js-client finds the copy by VIP', timeoutMs: 30_000 });

    const renewals = () => eureka.requests.filter((r) => r.method === 'PUT' && r.path === '/apps/BILLING/10.60.0.3:billing:8080' && r.status === 200).length;
    // One renewal a second: seven of them span more than three lease durations (2 s each).
    await waitUntil(() => renewals() >= 7, { message: 'renewals past three lease durations', timeoutMs: 60_000 });
    expect(eureka.evict()).toBe(0);
    expect(eureka.instances('BILLING')).toHaveLength(1);
    expect(Date.now() - (eureka.instances('BILLING')[0]?.lease.registrationTimestamp ?? Date.now())).toBeGreaterThan(3 * LEASE_S * 1000);
    expect([writes('POST'), writes('DELETE')]).toEqual([1, 0]);

    // The server loses the lease (evicted, a restart): the next renewal answers 404 and registers it again.
    expect(eureka.evict(Date.now() + 10 * LEASE_S * 1000)).toBe(1);
    await waitUntil(() => eureka.instances('BILLING').length === 1, { message: 'the copy registered again after a 404 renewal', timeoutMs: 30_000 });
    expect(eureka.requests.some((r) => r.method === 'PUT' && r.path === '/apps/BILLING/10.60.0.3:billing:8080' && r.status === 404)).toBe(true);
    expect(writes('POST')).toBe(2);

    nacos.store.deregister('public', 'DEFAULT_GROUP', 'billing', '10.60.0.3', 8080, 'DEFAULT');
    await waitUntil(() => eureka.instances('BILLING').length === 0, { message: 'the copy cancelled', timeoutMs: 30_000 });
    // The cache still shows the cancelled copy: a reconcile must neither cancel it again nor miss it.
    await resyncThroughStaleCache();
    expect(writes('DELETE')).toBe(1);
    eureka.refreshReadCache();
    await waitUntil(() => client.getInstancesByVipAddress('billing').length === 0, { message: 'the client sees it gone', timeoutMs: 30_000 });
  });
});
