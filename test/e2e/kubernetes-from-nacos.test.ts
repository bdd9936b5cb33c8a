import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_ORIGIN, MARK_PATH, MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startK8sApiServer, type K8sApiServer, managedSlices, managedAddresses } from '../support/k8s-api-server.js';
import { addRegistry, api, defineClusters, defineTask, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** Heavy steps (150 endpoints through the engine) on a busy two-core machine. */
const HEAVY = { timeoutMs: 90_000, intervalMs: 200 };

const ipOf = (n: number) => `10.50.${n >> 8}.${(n & 255) + 1}`;

const writes = (k8s: K8sApiServer) => k8s.requests.filter((r) => ['create', 'update', 'delete'].includes(r.verb)).length;

/**
 * Nacos -> Kubernetes through regsync: instances registered in an embedded Nacos registry become a
 * selector-less Service with EndpointSlices regsync manages, in the test API server, reached with
 * the real client through a kubeconfig file.
 */
describe('Nacos -> Kubernetes', () => {
  let fx: SyncFixture;
  let k8s: K8sApiServer;
  let nacos: RunningRegistry;
  let url: string;
  let dir: string;

  const register = (service: string, n: number, over: { healthy?: boolean } = {}) =>
    nacos.store.register('public', 'DEFAULT_GROUP', service, {
      ip: ipOf(n),
      port: 8080,
      weight: 1,
      healthy: over.healthy ?? true,
      enabled: true,
      ephemeral: false,
      clusterName: 'DEFAULT',
      metadata: { version: 'v1', n: String(n) },
    });
  const deregister = (service: string, n: number) => nacos.store.deregister('public', 'DEFAULT_GROUP', service, ipOf(n), 8080, 'DEFAULT');
  const status = async (task: string) => (await api(url, 'GET', `/api/v1/tasks/${task}`)).body.status.services[0];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'regsync-k8s-e2e-'));
    k8s = await startK8sApiServer();
    await writeFile(join(dir, 'kubeconfig'), k8s.kubeconfigYaml());
    fx = await startFixture();
    nacos = await addRegistry(fx, 'nacos');
    url = (await startSync(fx)).url as string;
    await defineClusters(url, fx);
    const res = await api(url, 'POST', '/api/v1/clusters', {
      id: 'k8s',
      kind: 'kubernetes',
      endpoints: [`127.0.0.1:${k8s.port}`],
      options: { kubeconfig: join(dir, 'kubeconfig'), namespaceMap: { default: 'public' }, backoffInitialMs: 50, backoffMaxMs: 500, requestTimeoutMs: 5_000 },
    });
    expect(res.status).toBe(201);
    for (let n = 0; n < 3; n += 1) register('payments', n);
    await defineTask(url, 'n2k', 'nacos', 'k8s', 'payments');
  });
  afterAll(async () => {
    await stopFixture(fx);
    await k8s?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('writes a Service without selector and EndpointSlices marked as regsync\'s, carrying the marks', async () => {
    await waitUntil(() => managedAddresses(k8s, 'payments').length === 3, { message: 'three endpoints in Kubernetes' });
    const svc = k8s.get('services', 'default', 'payments');
    expect(svc?.metadata.labels).toEqual({ 'app.kubernetes.io/managed-by': 'regsync' });
    expect(svc?.metadata.annotations).toEqual({ 'regsync.io/service-name': 'payments' });
    expect(svc?.spec).toMatchObject({ type: 'ClusterIP', ports: [{ name: 'port-8080', port: 8080, targetPort: 8080, protocol: 'TCP' }] });
    expect((svc?.spec as { selector?: unknown }).selector).toBeUndefined();
    const [slice] = managedSlices(k8s, 'payments');
    expect(slice?.metadata.ownerReferences).toEqual([expect.objectContaining({ kind: 'Service', name: 'payments', uid: svc?.metadata.uid })]);
    const entries = JSON.parse(slice?.metadata.annotations?.['regsync.io/instances'] as string) as Record<string, { metadata: Record<string, string> }>;
    expect(entries[`${ipOf(0)}:8080#DEFAULT`]?.metadata).toEqual({ version: 'v1', n: '0', [MARK_ORIGIN]: 'nacos', [MARK_PATH]: 'nacos', [MARK_TASK]: 'n2k' });
    expect(slice?.endpoints).toContainEqual({ addresses: [ipOf(0)], conditions: { ready: true, serving: true, terminating: false } });
  });

  it('rewrites nothing when nothing changed: what it wrote reads back as its own', async () => {
    // The status is recorded just after the write that the previous test saw.
    const last = await waitUntil(async () => (await status('n2k'))?.lastSyncAt as string | undefined, { message: 'the status of the first reconcile' });
    const before = writes(k8s);
    expect((await api(url, 'POST', '/api/v1/tasks/n2k/resync')).status).toBe(202);
    await waitUntil(async () => (await status('n2k')).lastSyncAt !== last, { message: 'a reconcile after resync' });
    expect(await status('n2k')).toMatchObject({ sourceInstances: 3, destinationInstances: 3, lastError: null });
    expect(writes(k8s)).toBe(before);
  });

  it('follows the service scaled from 3 to 150 instances, over slices of at most 100', async () => {
    for (let n = 3; n < 150; n += 1) register('payments', n);
    await waitUntil(() => managedAddresses(k8s, 'payments').length === 150, { ...HEAVY, message: '150 endpoints in Kubernetes' });
    const sizes = managedSlices(k8s, 'payments').map((s) => (s.endpoints as unknown[]).length).sort((a, b) => a - b);
    expect(sizes).toEqual([50, 100]);
    expect(managedAddresses(k8s, 'payments')).toEqual(Array.from({ length: 150 }, (_, n) => ipOf(n)).sort());
  });

  it('removes the endpoint of an instance that turns unhealthy', async () => {
    register('payments', 77, { healthy: false });
    await waitUntil(() => managedAddresses(k8s, 'payments').length === 149, { ...HEAVY, message: 'unhealthy instance gone from Kubernetes' });
    expect(managedAddresses(k8s, 'payments')).not.toContain(ipOf(77));
  });

  it('rides out the API server going away (watches cut, history compacted: 410) while scaling back to 3', async () => {
    const before = k8s.requests.length;
    k8s.setUnavailable(true);
    for (let n = 3; n < 150; n += 1) deregister('payments', n);
    await waitUntil(async () => (await status('n2k')).lastError?.includes('k8s'), { ...HEAVY, message: 'the failure shows in the status' });
    k8s.compact();
    k8s.setUnavailable(false);
    await waitUntil(() => managedAddresses(k8s, 'payments').length === 3, { ...HEAVY, message: 'back to three endpoints' });
    expect(managedAddresses(k8s, 'payments')).toEqual([0, 1, 2].map(ipOf).sort());
    expect(managedSlices(k8s, 'payments').every((s) => (s.endpoints as unknown[]).length > 0)).toBe(true);
    await waitUntil(async () => (await status('n2k')).lastError === null, { ...HEAVY, message: 'status clear again' });
    expect(k8s.requests.slice(before).some((r) => r.verb === 'watch' && r.status === 410)).toBe(true);
  });

  it('leaves a Service it did not create alone and reports the conflict', async () => {
    k8s.put('services', {
      metadata: { name: 'legacy', namespace: 'default' },
      spec: { selector: { app: 'legacy' }, ports: [{ name: 'http', port: 80, targetPort: 8080 }] },
    });
    const version = k8s.get('services', 'default', 'legacy')?.metadata.resourceVersion;
    register('legacy', 200);
    await defineTask(url, 'n2k-legacy', 'nacos', 'k8s', 'legacy');
    await waitUntil(async () => (await status('n2k-legacy'))?.lastError, { message: 'conflict reported' });
    expect((await status('n2k-legacy')).lastError).toMatch(/default\/legacy: a Service of that name exists that regsync did not create/);
    expect(k8s.get('services', 'default', 'legacy')?.metadata.resourceVersion).toBe(version);
    expect(managedSlices(k8s, 'legacy')).toEqual([]);
  });

  it('removes the Service and its slices when the task is deleted', async () => {
    expect((await api(url, 'DELETE', '/api/v1/tasks/n2k')).status).toBe(204);
    expect(k8s.get('services', 'default', 'payments')).toBeUndefined();
    expect(managedSlices(k8s, 'payments')).toEqual([]);
    expect(k8s.get('services', 'default', 'legacy')).toBeDefined();
  });
});
