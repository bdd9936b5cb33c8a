import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_ORIGIN, MARK_PATH, MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startK8sApiServer, type K8sApiServer, type K8sObject } from '../support/k8s-api-server.js';
import { addRegistry, api, copiesIn, defineClusters, defineTask, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** Heavy steps (150 endpoints through the engine) on a busy two-core machine. */
const HEAVY = { timeoutMs: 90_000, intervalMs: 200 };

const service = (name: string): K8sObject => ({
  metadata: { name, namespace: 'default' },
  spec: { selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }] },
});

/** The slices the EndpointSlice controller would write for `count` pods (100 per slice), `notReady` listing the pods that are not ready. */
const slicesFor = (name: string, count: number, notReady: ReadonlySet<number> = new Set()): K8sObject[] => {
  const out: K8sObject[] = [];
  for (let start = 0; start < count; start += 100) {
    const pods = Array.from({ length: Math.min(100, count - start) }, (_, i) => start + i);
    out.push({
      metadata: {
        name: `${name}-${String.fromCharCode(97 + start / 100)}`,
        namespace: 'default',
        labels: { 'kubernetes.io/service-name': name, 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io' },
      },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
      endpoints: pods.map((n) => ({
        addresses: [`10.244.${n >> 8}.${(n & 255) + 1}`],
        conditions: { ready: !notReady.has(n), serving: !notReady.has(n), terminating: false },
        nodeName: `node-${n % 3}`,
        zone: `zone-${n % 2}`,
        targetRef: { kind: 'Pod', name: `${name}-${n}`, namespace: 'default' },
      })),
    });
  }
  return out;
};

/** Makes the cluster's slices of `name` exactly these (as the controller does when scaling). */
function setSlices(server: K8sApiServer, name: string, slices: K8sObject[]): void {
  const keep = new Set(slices.map((s) => s.metadata.name));
  for (const s of slices) server.put('endpointslices', s);
  for (const old of server.list('endpointslices', 'default')) {
    if (old.metadata.labels?.['kubernetes.io/service-name'] === name && !keep.has(old.metadata.name)) server.remove('endpointslices', 'default', old.metadata.name as string);
  }
}

/**
 * Kubernetes -> Nacos through regsync, with the real client against the test API server (reached
 * through a kubeconfig file, as in production) and an embedded Nacos registry, on real Redis.
 */
describe('Kubernetes -> Nacos', () => {
  let fx: SyncFixture;
  let k8s: K8sApiServer;
  let nacos: RunningRegistry;
  let url: string;
  let dir: string;

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
      // A short source warm-up: the scale-down while the API server is away waits 2 s, not 40 (see source-warmup.test.ts).
      options: { kubeconfig: join(dir, 'kubeconfig'), namespaceMap: { default: 'public' }, backoffInitialMs: 50, backoffMaxMs: 500, warmupSeconds: 2 },
    });
    expect(res.status).toBe(201);
    k8s.put('services', service('orders'));
    setSlices(k8s, 'orders', slicesFor('orders', 3));
    await defineTask(url, 'k2n', 'k8s', 'nacos', 'orders');
  });
  afterAll(async () => {
    await stopFixture(fx);
    await k8s?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const ips = () => copiesIn(nacos, 'orders').map((i) => i.ip).sort();

  it('copies every ready pod address of a Service to Nacos, marked and with its node and zone', async () => {
    await waitUntil(() => copiesIn(nacos, 'orders').length === 3, { message: 'three copies in Nacos' });
    const copy = copiesIn(nacos, 'orders').find((i) => i.ip === '10.244.0.1');
    expect(copy).toMatchObject({
      port: 8080,
      healthy: true,
      ephemeral: true,
      metadata: {
        [MARK_ORIGIN]: 'k8s',
        [MARK_PATH]: 'k8s',
        [MARK_TASK]: 'k2n',
        'k8s.namespace': 'default',
        'k8s.service': 'orders',
        'k8s.node': 'node-0',
        'k8s.zone': 'zone-0',
        'k8s.pod': 'orders-0',
      },
    });
  });

  it('follows the Service scaled from 3 to 150 endpoints', async () => {
    setSlices(k8s, 'orders', slicesFor('orders', 150));
    await waitUntil(() => copiesIn(nacos, 'orders').length === 150, { ...HEAVY, message: '150 copies in Nacos' });
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/k2n')).body.status.services[0]?.sourceInstances === 150, { message: 'status counts 150' });
    expect(new Set(copiesIn(nacos, 'orders').map((i) => i.metadata['k8s.zone']))).toEqual(new Set(['zone-0', 'zone-1']));
  });

  it('removes the copy of a pod that turns not ready', async () => {
    setSlices(k8s, 'orders', slicesFor('orders', 150, new Set([120])));
    await waitUntil(() => copiesIn(nacos, 'orders').length === 149, { ...HEAVY, message: 'not-ready pod gone from Nacos' });
    expect(ips()).not.toContain('10.244.0.121');
  });

  it('relists after the watch is cut and answered 410 Gone, and scales back to 3', async () => {
    const before = k8s.requests.length;
    // The API server goes away, the Service shrinks meanwhile, and the history is compacted: the
    // watch cannot resume and must relist.
    k8s.setUnavailable(true);
    setSlices(k8s, 'orders', slicesFor('orders', 3));
    k8s.compact();
    k8s.setUnavailable(false);
    await waitUntil(() => copiesIn(nacos, 'orders').length === 3, { ...HEAVY, message: 'back to three copies' });
    expect(ips()).toEqual(['10.244.0.1', '10.244.0.2', '10.244.0.3']);
    const after = k8s.requests.slice(before);
    expect(after.some((r) => r.verb === 'watch' && r.resource === 'endpointslices' && r.status === 410)).toBe(true);
    expect(after.some((r) => r.verb === 'list' && r.resource === 'endpointslices' && r.status === 200)).toBe(true);
  });

  it('never sends the copies back: a reverse task writes nothing into Kubernetes', async () => {
    await defineTask(url, 'n2k', 'nacos', 'k8s', 'orders');
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/n2k')).body.status.services[0]?.lastSyncAt, { message: 'reverse task ran' });
    const reverse = (await api(url, 'GET', '/api/v1/tasks/n2k')).body.status.services[0];
    expect(reverse).toMatchObject({ sourceInstances: 3, destinationInstances: 0, lastError: null });
    expect(k8s.list('services', 'default').map((s) => s.metadata.name)).toEqual(['orders']);
    expect(k8s.requests.filter((r) => ['create', 'update', 'delete'].includes(r.verb))).toEqual([]);
  });
});
