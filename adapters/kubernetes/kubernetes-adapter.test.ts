import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterSpec, Instance, ServiceKey } from '../../src/model/index.js';
import { startK8sApiServer, type K8sApiServer, type K8sObject, managedSlices } from '../../test/support/k8s-api-server.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createKubernetesAdapter, type KubernetesAdapter } from './kubernetes-adapter.js';
import { KubernetesApplyError } from './kubernetes-apply-error.js';
import { KubernetesConfigError } from './kubernetes-config-error.js';
import { KubernetesRefusedError } from './kubernetes-refused-error.js';
import { KubernetesRequestError } from './kubernetes-request-error.js';

const silent = pino({ level: 'silent' });

const spec = (options: Record<string, unknown> = {}, extra: Partial<ClusterSpec> = {}): ClusterSpec => ({
  id: 'k8s-test',
  kind: 'kubernetes',
  endpoints: [],
  labels: {},
  options: { namespaceMap: { default: 'public' }, backoffInitialMs: 20, backoffMaxMs: 200, initialListTimeoutMs: 10_000, ...options },
  ...extra,
});

const key = (name: string, namespace = 'public', group = 'DEFAULT_GROUP'): ServiceKey => ({ namespace, group, name });

const instance = (over: Partial<Instance> = {}): Instance => ({
  ip: '10.30.0.1',
  port: 8080,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: {},
  ...over,
});

const marks = (task = 't1') => ({ 'regsync.origin': 'nacos-a', 'regsync.path': 'nacos-a', 'regsync.task': task });

/** A Service as `kubectl apply` would create it. */
const nativeService = (name: string, over: { namespace?: string; annotations?: Record<string, string>; ports?: Array<Record<string, unknown>>; type?: string } = {}): K8sObject => ({
  metadata: { name, namespace: over.namespace ?? 'default', annotations: over.annotations ?? {} },
  spec: {
    type: over.type ?? 'ClusterIP',
    selector: { app: name },
    ports: over.ports ?? [
      { name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' },
      { name: 'grpc', port: 9090, targetPort: 9091, protocol: 'TCP' },
    ],
  },
});

interface EndpointSpec {
  ip: string | string[];
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  node?: string;
  zone?: string;
  hostname?: string;
  pod?: string;
}

/** An EndpointSlice as the EndpointSlice controller writes it. */
const nativeSlice = (service: string, suffix: string, endpoints: EndpointSpec[], over: { namespace?: string; addressType?: string } = {}): K8sObject => ({
  metadata: {
    name: `${service}-${suffix}`,
    namespace: over.namespace ?? 'default',
    labels: { 'kubernetes.io/service-name': service, 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io' },
  },
  addressType: over.addressType ?? 'IPv4',
  ports: [
    { name: 'http', port: 8080, protocol: 'TCP' },
    { name: 'grpc', port: 9091, protocol: 'TCP' },
  ],
  endpoints: endpoints.map((e) => ({
    addresses: Array.isArray(e.ip) ? e.ip : [e.ip],
    conditions: { ready: e.ready ?? true, serving: e.serving ?? e.ready ?? true, terminating: e.terminating ?? false },
    ...(e.node ? { nodeName: e.node } : {}),
    ...(e.zone ? { zone: e.zone } : {}),
    ...(e.hostname ? { hostname: e.hostname } : {}),
    ...(e.pod ? { targetRef: { kind: 'Pod', name: e.pod, namespace: over.namespace ?? 'default' } } : {}),
  })),
});

const byAddress = (a: Instance, b: Instance) => a.ip.localeCompare(b.ip) || a.port - b.port;
const writesTo = (server: K8sApiServer) => server.requests.filter((r) => ['create', 'update', 'delete'].includes(r.verb)).length;
const endpointCount = (slices: K8sObject[]) => slices.reduce((n, s) => n + (s.endpoints as unknown[]).length, 0);

describe('KubernetesAdapter (contract, against the test API server)', () => {
  let server: K8sApiServer;
  const adapters: KubernetesAdapter[] = [];
  const make = (options: Record<string, unknown> = {}) => {
    const adapter = createKubernetesAdapter(spec(options), { logger: silent, kubeConfig: () => server.kubeConfig() });
    adapters.push(adapter);
    return adapter;
  };

  beforeAll(async () => {
    server = await startK8sApiServer({ namespaces: ['default', 'team-a', 'kube-system'] });
  });
  afterEach(async () => {
    await Promise.all(adapters.splice(0).map((a) => a.close()));
  });
  afterAll(async () => {
    await server?.close();
  });

  it('lists the services exported from the mapped namespace, by exported name', async () => {
    server.put('services', nativeService('ls-plain'));
    server.put('services', nativeService('ls-renamed', { annotations: { 'regsync.io/service-name': 'ls-exported' } }));
    server.put('services', nativeService('ls-optout', { annotations: { 'regsync.io/sync': 'false' } }));
    server.put('services', nativeService('ls-external', { type: 'ExternalName', ports: [] }));
    server.put('services', nativeService('ls-team', { namespace: 'team-a' }));
    server.put('services', nativeService('ls-system', { namespace: 'kube-system' }));
    server.put('services', nativeService('kubernetes'));
    const adapter = make();
    const names = (await adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).map((s) => s.name);
    expect(names).toContain('ls-plain');
    expect(names).toContain('ls-exported');
    expect(names).not.toContain('ls-renamed');
    expect(names).not.toContain('ls-optout');
    expect(names).not.toContain('ls-external');
    expect(names).not.toContain('kubernetes');
    expect(names).not.toContain('ls-team');
    // Unmapped namespaces map to themselves; denied ones to nothing.
    expect(await adapter.listServices({ namespace: 'team-a', group: 'DEFAULT_GROUP' })).toEqual([{ namespace: 'team-a', group: 'DEFAULT_GROUP', name: 'ls-team' }]);
    expect(await adapter.listServices({ namespace: 'kube-system', group: 'DEFAULT_GROUP' })).toEqual([]);
    expect(await adapter.listServices({ namespace: 'team-a', group: 'OTHER' })).toEqual([]);
    // `default` is mapped to `public`, so the key `default` reaches no namespace.
    expect(await adapter.listServices({ namespace: 'default', group: 'DEFAULT_GROUP' })).toEqual([]);

    const optIn = make({ syncByDefault: false });
    server.put('services', nativeService('ls-optin', { annotations: { 'regsync.io/sync': 'true' } }));
    expect((await optIn.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).map((s) => s.name)).toEqual(['ls-optin']);
  });

  it('lists every allowed namespace for a * namespace, each service under its namespace\'s target', async () => {
    server.put('services', nativeService('wc-default'));
    server.put('services', nativeService('wc-team', { namespace: 'team-a' }));
    server.put('services', nativeService('wc-system', { namespace: 'kube-system' }));
    server.put('endpointslices', nativeSlice('wc-team', 'a', [{ ip: '10.31.0.1' }], { namespace: 'team-a' }));
    const ours = (services: ServiceKey[]) => services.filter((s) => s.name.startsWith('wc-')).map((s) => `${s.namespace}/${s.group}/${s.name}`);
    const adapter = make();
    expect(ours(await adapter.listServices({ namespace: '*', group: '*' }))).toEqual(['public/DEFAULT_GROUP/wc-default', 'team-a/DEFAULT_GROUP/wc-team']);
    expect(ours(await adapter.listServices({ namespace: '*', group: 'DEFAULT_GROUP' }))).toEqual(['public/DEFAULT_GROUP/wc-default', 'team-a/DEFAULT_GROUP/wc-team']);
    expect(ours(await adapter.listServices({ namespace: 'team-a', group: '*' }))).toEqual(['team-a/DEFAULT_GROUP/wc-team']);
    expect(await adapter.listServices({ namespace: '*', group: 'OTHER' })).toEqual([]);
    // A listed key reads back.
    expect((await adapter.listInstances(key('wc-team', 'team-a'))).map((i) => i.ip)).toEqual(['10.31.0.1']);

    // Mapped namespaces keep their mapping; namespaces listed one by one are covered one by one.
    const mapped = make({ namespaceMap: { default: 'public', 'team-a': { namespace: 'public', group: 'TEAM-A' } } });
    expect(ours(await mapped.listServices({ namespace: 'public', group: '*' }))).toEqual(['public/DEFAULT_GROUP/wc-default', 'public/TEAM-A/wc-team']);
    expect(ours(await mapped.listServices({ namespace: '*', group: 'TEAM-A' }))).toEqual(['public/TEAM-A/wc-team']);
    const listed = make({ allowNamespaces: ['team-a', 'kube-system'], denyNamespaces: ['kube-system'] });
    expect(ours(await listed.listServices({ namespace: '*', group: '*' }))).toEqual(['team-a/DEFAULT_GROUP/wc-team']);
  });

  it('tells a * service-list watcher about services appearing in any covered namespace', async () => {
    for (const options of [{}, { allowNamespaces: ['default', 'team-a'] }]) {
      const adapter = make(options);
      let all = 0;
      let otherGroup = 0;
      adapter.watchServices({ namespace: '*', group: '*' }, () => (all += 1));
      adapter.watchServices({ namespace: '*', group: 'OTHER' }, () => (otherGroup += 1));
      await adapter.listServices({ namespace: '*', group: '*' });
      const base = all;
      const name = `wc-appearing-${Object.keys(options).length}`;
      server.put('services', nativeService(name, { namespace: 'team-a' }));
      await waitUntil(() => all > base, { message: `new service in team-a (${JSON.stringify(options)})` });
      expect((await adapter.listServices({ namespace: '*', group: '*' })).map((s) => s.name)).toContain(name);
      expect(otherGroup).toBe(0);
    }
  });

  it('maps every field of a listed instance: one per address on the chosen port, union of the slices', async () => {
    server.put('services', nativeService('orders', { annotations: { 'regsync.io/metadata': '{"team":"core","n":1}', 'regsync.io/meta-version': 'v2', 'regsync.io/weight': '3' } }));
    server.put('endpointslices', nativeSlice('orders', 'a', [
      { ip: '10.1.0.1', node: 'node-1', zone: 'zone-a', pod: 'orders-1', hostname: 'orders-1' },
      { ip: '10.1.0.2', ready: false, serving: false, node: 'node-2', zone: 'zone-b', pod: 'orders-2' },
    ]));
    server.put('endpointslices', nativeSlice('orders', 'b', [
      { ip: '10.1.0.3', ready: false, serving: true, terminating: true, pod: 'orders-3' },
      { ip: ['10.1.0.4', '10.1.0.5'] },
      // The same address in two slices (the controller moving it) counts once, healthy.
      { ip: '10.1.0.1', ready: false },
    ]));
    server.put('endpointslices', nativeSlice('orders', 'v6', [{ ip: 'fd00::1' }], { addressType: 'IPv6' }));
    server.put('endpointslices', nativeSlice('orders', 'fqdn', [{ ip: 'orders.example.com' }], { addressType: 'FQDN' }));
    const adapter = make();
    const listed = (await adapter.listInstances(key('orders'))).sort(byAddress);
    const common = { 'k8s.namespace': 'default', 'k8s.service': 'orders', 'k8s.port-name': 'http', team: 'core', n: '1', version: 'v2' };
    expect(listed).toEqual([
      instance({ ip: '10.1.0.1', weight: 3, metadata: { ...common, 'k8s.node': 'node-1', 'k8s.zone': 'zone-a', 'k8s.pod': 'orders-1', 'k8s.hostname': 'orders-1' } }),
      instance({ ip: '10.1.0.2', weight: 3, healthy: false, metadata: { ...common, 'k8s.node': 'node-2', 'k8s.zone': 'zone-b', 'k8s.pod': 'orders-2' } }),
      // Terminating is not healthy, even while still serving.
      instance({ ip: '10.1.0.3', weight: 3, healthy: false, metadata: { ...common, 'k8s.pod': 'orders-3' } }),
      instance({ ip: '10.1.0.4', weight: 3, metadata: common }),
      instance({ ip: '10.1.0.5', weight: 3, metadata: common }),
      instance({ ip: 'fd00::1', weight: 3, metadata: common }),
    ]);
    expect(adapter.readIssues(key('orders'))).toEqual([]);

    // The port: annotation by name or number, else options.portName, else the first.
    const grpcByDefault = make({ portName: 'grpc' });
    expect((await grpcByDefault.listInstances(key('orders')))[0]?.port).toBe(9091);
    expect((await make({ portName: 'nope' }).listInstances(key('orders')))[0]?.port).toBe(8080);
    server.put('services', { ...nativeService('orders', { annotations: { 'regsync.io/port': 'grpc' } }) });
    await waitUntil(async () => (await adapter.listInstances(key('orders')))[0]?.port === 9091, { message: 'grpc port by annotation' });
    server.put('services', { ...nativeService('orders', { annotations: { 'regsync.io/port': '80' } }) });
    await waitUntil(async () => (await adapter.listInstances(key('orders')))[0]?.port === 8080, { message: 'port by number' });
    server.put('services', { ...nativeService('orders', { annotations: { 'regsync.io/port': 'nope' } }) });
    await waitUntil(async () => (await adapter.listInstances(key('orders'))).length === 0, { message: 'no such port' });
    expect(adapter.readIssues(key('orders')).join()).toMatch(/regsync.io\/port names no port/);
  });

  it('reads a service that does not exist, or a namespace it may not read, as empty', async () => {
    const adapter = make();
    expect(await adapter.listInstances(key('never-there'))).toEqual([]);
    server.put('services', nativeService('sys', { namespace: 'kube-system' }));
    server.put('endpointslices', nativeSlice('sys', 'a', [{ ip: '10.9.0.1' }], { namespace: 'kube-system' }));
    expect(await adapter.listInstances(key('sys', 'kube-system'))).toEqual([]);
  });

  it('writes a Service without selector plus EndpointSlices it marks, reads them back exactly, and deletes them with the last instance', async () => {
    const adapter = make();
    const k = key('Pay_Service');
    const a = instance({ ip: '10.30.1.1', weight: 2.5, cluster: 'SH', metadata: { ...marks(), zone: 'a' } });
    const b = instance({ ip: '10.30.1.2', port: 9000, ephemeral: false, metadata: marks() });
    await adapter.apply(k, { upsert: [a, b], remove: [] });

    const svc = server.list('services', 'default').find((s) => s.metadata.annotations?.['regsync.io/service-name'] === 'Pay_Service');
    expect(svc?.metadata.name).toMatch(/^pay-service-[0-9a-f]{8}$/);
    const name = svc?.metadata.name as string;
    expect(svc?.metadata.labels).toEqual({ 'app.kubernetes.io/managed-by': 'regsync' });
    expect(svc?.spec).toMatchObject({
      type: 'ClusterIP',
      ports: [
        { name: 'port-8080', port: 8080, targetPort: 8080, protocol: 'TCP' },
        { name: 'port-9000', port: 9000, targetPort: 9000, protocol: 'TCP' },
      ],
    });
    expect((svc?.spec as { selector?: unknown }).selector).toBeUndefined();
    const slices = managedSlices(server, name);
    expect(slices).toHaveLength(2);
    for (const s of slices) {
      expect(s.metadata.ownerReferences).toEqual([expect.objectContaining({ kind: 'Service', name, uid: svc?.metadata.uid })]);
      expect(JSON.parse(s.metadata.annotations?.['regsync.io/instances'] as string)).toBeTypeOf('object');
    }
    expect((await adapter.listInstances(k)).sort(byAddress)).toEqual([a, b]);

    // The same plan again writes nothing.
    const before = writesTo(server);
    await adapter.apply(k, { upsert: [a, b], remove: [] });
    expect(writesTo(server)).toBe(before);

    // An update rewrites the one slice it is in; a removal deletes a slice left empty, and the port goes from the Service.
    const a2 = { ...a, healthy: false, metadata: { ...marks(), zone: 'b' } };
    const seen = server.requests.length;
    await adapter.apply(k, { upsert: [a2], remove: [b] });
    const writes = server.requests.slice(seen).filter((r) => ['create', 'update', 'delete'].includes(r.verb));
    expect(writes.map((r) => `${r.verb} ${r.resource}`).sort()).toEqual(['delete endpointslices', 'update endpointslices', 'update services']);
    expect((server.get('services', 'default', name)?.spec as { ports: unknown[] }).ports).toEqual([{ name: 'port-8080', port: 8080, targetPort: 8080, protocol: 'TCP' }]);
    expect(await adapter.listInstances(k)).toEqual([a2]);
    expect(managedSlices(server, name)).toHaveLength(1);
    expect((managedSlices(server, name)[0]?.endpoints as unknown[])[0]).toEqual({ addresses: ['10.30.1.1'], conditions: { ready: false, serving: false, terminating: false } });

    // Removing what is already gone succeeds; the last removal deletes the Service too.
    await adapter.apply(k, { upsert: [], remove: [b, a2] });
    await adapter.apply(k, { upsert: [], remove: [a2] });
    expect(server.get('services', 'default', name)).toBeUndefined();
    expect(managedSlices(server, name)).toEqual([]);
    expect(await adapter.listInstances(k)).toEqual([]);
  });

  it('splits more than maxEndpointsPerSlice endpoints over several slices, and moves as little as it can', async () => {
    const adapter = make();
    const k = key('wide');
    const many = Array.from({ length: 150 }, (_, n) => instance({ ip: `10.31.${n >> 8}.${n & 255}`, metadata: marks() }));
    await adapter.apply(k, { upsert: many, remove: [] });
    const sizes = () => managedSlices(server, 'wide').map((s) => (s.endpoints as unknown[]).length).sort((x, y) => x - y);
    expect(sizes()).toEqual([50, 100]);
    expect((await adapter.listInstances(k)).length).toBe(150);

    // One instance gone: one slice rewritten, the other untouched.
    const versions = () => Object.fromEntries(managedSlices(server, 'wide').map((s) => [s.metadata.name, s.metadata.resourceVersion]));
    const v1 = versions();
    await adapter.apply(k, { upsert: [], remove: [many[0] as Instance] });
    const v2 = versions();
    expect(Object.keys(v2).filter((n) => v1[n] !== v2[n])).toHaveLength(1);
    // A new one fills the gap rather than opening a slice.
    await adapter.apply(k, { upsert: [instance({ ip: '10.31.9.9', metadata: marks() })], remove: [] });
    expect(sizes()).toEqual([50, 100]);

    // Back to three.
    const keep = (await adapter.listInstances(k)).slice(0, 3);
    const drop = (await adapter.listInstances(k)).slice(3);
    await adapter.apply(k, { upsert: [], remove: drop });
    expect(endpointCount(managedSlices(server, 'wide'))).toBe(3);
    expect(sizes().every((n) => n > 0)).toBe(true);
    expect(await adapter.listInstances(k)).toEqual(keep);
  });

  it('leaves a Service it did not create alone and says so', async () => {
    server.put('services', nativeService('legacy'));
    server.put('endpointslices', nativeSlice('legacy', 'a', [{ ip: '10.1.9.1' }]));
    const svcVersion = server.get('services', 'default', 'legacy')?.metadata.resourceVersion;
    const adapter = make();
    const error = await adapter.apply(key('legacy'), { upsert: [instance({ ip: '10.32.0.1', metadata: marks() })], remove: [] }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(KubernetesRefusedError);
    expect(error).toMatchObject({ code: 'kubernetes-not-owned', target: 'default/legacy' });
    expect((error as Error).message).toMatch(/regsync did not create/);
    expect(server.get('services', 'default', 'legacy')?.metadata.resourceVersion).toBe(svcVersion);
    expect(server.list('endpointslices', 'default').filter((s) => s.metadata.labels?.['kubernetes.io/service-name'] === 'legacy')).toHaveLength(1);
    // Its own instances still read (they are not the task's: the engine reports a conflict on a shared address).
    expect((await adapter.listInstances(key('legacy'))).map((i) => i.ip)).toEqual(['10.1.9.1']);
  });

  it('refuses namespaces it may not write, and names it cannot map', async () => {
    const adapter = make();
    await expect(adapter.apply(key('x', 'kube-system'), { upsert: [instance()], remove: [] })).rejects.toMatchObject({ code: 'kubernetes-namespace-denied' });
    await expect(adapter.apply(key('x', 'public', 'OTHER_GROUP'), { upsert: [instance()], remove: [] })).rejects.toMatchObject({ code: 'kubernetes-namespace-unmapped' });
    await expect(adapter.apply(key('x', 'Not_A_Namespace'), { upsert: [instance()], remove: [] })).rejects.toBeInstanceOf(KubernetesRefusedError);
    // An empty plan needs nothing.
    await adapter.apply(key('x', 'kube-system'), { upsert: [], remove: [] });
  });

  it('writes every instance it can and reports the ones it cannot', async () => {
    const adapter = make();
    const good = instance({ ip: '10.33.0.1', metadata: marks() });
    const bad = instance({ ip: 'not an address', metadata: marks() });
    const host = instance({ ip: 'db-1.example.com', metadata: marks() });
    const error = await adapter.apply(key('partly'), { upsert: [bad, good, host], remove: [] }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(KubernetesApplyError);
    expect((error as KubernetesApplyError).failures).toEqual([expect.objectContaining({ op: 'write', target: 'instance not an address:8080#DEFAULT' })]);
    expect((await adapter.listInstances(key('partly'))).sort(byAddress)).toEqual([good, host]);
    expect(managedSlices(server, 'partly').map((s) => s.addressType).sort()).toEqual(['FQDN', 'IPv4']);
  });

  it('keeps what another writer added in between: a stale write is refused, read again and retried', async () => {
    const adapter = make();
    const k = key('shared');
    const mine = instance({ ip: '10.34.0.1', metadata: marks('t1') });
    const theirs = instance({ ip: '10.34.0.2', metadata: marks('t2') });
    await adapter.apply(k, { upsert: [mine], remove: [] });
    // Another regsync writes its instance just before ours lands: our replace carries a stale resourceVersion.
    const late = instance({ ip: '10.34.0.3', metadata: marks('t1') });
    let raced = false;
    server.beforeNext('update', 'endpointslices', () => {
      raced = true;
      // What the other writer's replace does, applied at once.
      const [current] = managedSlices(server, 'shared');
      const entries = JSON.parse(current?.metadata.annotations?.['regsync.io/instances'] as string) as Record<string, unknown>;
      entries['10.34.0.2:8080#DEFAULT'] = { ip: '10.34.0.2', port: 8080, weight: 1, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: marks('t2') };
      server.put('endpointslices', {
        ...(current as K8sObject),
        metadata: { ...(current as K8sObject).metadata, annotations: { 'regsync.io/instances': JSON.stringify(entries) } },
        endpoints: [...((current as K8sObject).endpoints as unknown[]), { addresses: ['10.34.0.2'], conditions: { ready: true, serving: true, terminating: false } }],
      });
    });
    const conflictsBefore = server.requests.filter((r) => r.status === 409).length;
    await adapter.apply(k, { upsert: [late], remove: [] });
    expect(raced).toBe(true);
    expect((await adapter.listInstances(k)).sort(byAddress)).toEqual([mine, theirs, late]);
    expect(server.requests.filter((r) => r.status === 409).length).toBeGreaterThan(conflictsBefore);
  });

  it('calls the watchers of a service when its Service or slices change, and only those', async () => {
    server.put('services', nativeService('watched'));
    server.put('services', nativeService('unwatched'));
    const adapter = make();
    let calls = 0;
    const stop = adapter.watch(key('watched'), () => (calls += 1));
    await adapter.listInstances(key('watched'));
    server.put('endpointslices', nativeSlice('unwatched', 'a', [{ ip: '10.35.0.9' }]));
    server.put('endpointslices', nativeSlice('watched', 'a', [{ ip: '10.35.0.1' }]));
    await waitUntil(() => calls === 1, { message: 'one call for the watched slice' });
    server.put('services', nativeService('watched', { annotations: { 'regsync.io/meta-x': 'y' } }));
    await waitUntil(() => calls === 2, { message: 'a call for the Service' });
    expect((await adapter.listInstances(key('watched')))[0]?.metadata.x).toBe('y');
    stop();
    server.put('endpointslices', nativeSlice('watched', 'a', [{ ip: '10.35.0.2' }]));
    await waitUntil(async () => (await adapter.listInstances(key('watched')))[0]?.ip === '10.35.0.2', { message: 'change seen' });
    expect(calls).toBe(2);
  });

  it('tells service-list watchers when a service appears, is renamed or opts out', async () => {
    const adapter = make();
    let calls = 0;
    adapter.watchServices({ namespace: 'team-a', group: 'DEFAULT_GROUP' }, () => (calls += 1));
    await adapter.listServices({ namespace: 'team-a', group: 'DEFAULT_GROUP' });
    const base = calls;
    server.put('services', nativeService('appearing', { namespace: 'team-a' }));
    await waitUntil(() => calls === base + 1, { message: 'new service' });
    expect((await adapter.listServices({ namespace: 'team-a', group: 'DEFAULT_GROUP' })).map((s) => s.name)).toContain('appearing');
    server.put('services', nativeService('appearing', { namespace: 'team-a', annotations: { 'regsync.io/sync': 'false' } }));
    await waitUntil(() => calls === base + 2, { message: 'opted out' });
    expect((await adapter.listServices({ namespace: 'team-a', group: 'DEFAULT_GROUP' })).map((s) => s.name)).not.toContain('appearing');
  });

  it('rejects reads until the first full list, instead of answering empty', async () => {
    server.put('services', nativeService('early'));
    server.put('endpointslices', nativeSlice('early', 'a', [{ ip: '10.36.0.1' }]));
    server.setUnavailable(true);
    const adapter = make();
    try {
      const err = await adapter.listInstances(key('early')).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(KubernetesRequestError);
      expect(err).toMatchObject({ code: 'kubernetes-not-ready', status: 503 });
      await expect(adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).rejects.toMatchObject({ code: 'kubernetes-not-ready' });
    } finally {
      server.setUnavailable(false);
    }
    await waitUntil(async () => (await adapter.listInstances(key('early'))).length === 1, { message: 'reads once the server answers' });
  });

  it('restarts a failing watch with backoff, fails reads meanwhile, and calls every watcher once it works again', async () => {
    server.put('services', nativeService('flaky'));
    server.put('endpointslices', nativeSlice('flaky', 'a', [{ ip: '10.37.0.1' }]));
    const adapter = make();
    let calls = 0;
    adapter.watch(key('flaky'), () => (calls += 1));
    expect(await adapter.listInstances(key('flaky'))).toHaveLength(1);
    server.setUnavailable(true);
    await waitUntil(() => !adapter.stats().informers['*']?.services.healthy, { message: 'watch failing' });
    await expect(adapter.listInstances(key('flaky'))).rejects.toMatchObject({ code: 'kubernetes-not-ready' });
    const failuresSeen = adapter.stats().informers['*']?.services.failures ?? 0;
    await waitUntil(() => (adapter.stats().informers['*']?.services.failures ?? 0) > failuresSeen, { message: 'retried' });
    server.setUnavailable(false);
    await waitUntil(() => adapter.stats().informers['*']?.services.healthy && adapter.stats().informers['*']?.endpointSlices.healthy, {
      message: 'watch recovered',
    });
    await waitUntil(() => calls > 0, { message: 'watchers told' });
    expect(await adapter.listInstances(key('flaky'))).toHaveLength(1);
  });

  it.each(['http', 'event'] as const)('relists after 410 Gone (%s) and sees what changed meanwhile', async (mode) => {
    server.put('services', nativeService(`gone-${mode}`));
    server.put('endpointslices', nativeSlice(`gone-${mode}`, 'a', [{ ip: '10.38.0.1' }]));
    const adapter = make();
    const k = key(`gone-${mode}`);
    let calls = 0;
    adapter.watch(k, () => (calls += 1));
    expect(await adapter.listInstances(k)).toHaveLength(1);
    const relists = adapter.stats().informers['*']?.endpointSlices.relists ?? 0;
    server.staleWatch = mode;
    try {
      // The watch ends, a change lands and the history is compacted before the watch comes back
      // (all in one tick): only a relist can see the change.
      await waitUntil(() => server.openWatches('endpointslices') > 0, { message: 'watch open' });
      server.cutWatches();
      server.put('endpointslices', nativeSlice(`gone-${mode}`, 'a', [{ ip: '10.38.0.1' }, { ip: '10.38.0.2' }]));
      server.compact();
      await waitUntil(() => (adapter.stats().informers['*']?.endpointSlices.relists ?? 0) > relists, { message: 'relisted' });
      await waitUntil(() => calls > 0, { message: 'watcher told by the relist' });
      expect((await adapter.listInstances(k)).map((i) => i.ip)).toEqual(['10.38.0.1', '10.38.0.2']);
      expect(adapter.stats().informers['*']?.endpointSlices.failures).toBe(0);
    } finally {
      server.staleWatch = 'http';
    }
  });

  it('resumes from a bookmark without relisting when events of other namespaces moved the resourceVersion on', async () => {
    const run = async (withBookmark: boolean) => {
      const adapter = make({ allowNamespaces: ['team-a'] });
      server.put('services', nativeService('marked', { namespace: 'team-a' }));
      expect(await adapter.listServices({ namespace: 'team-a', group: 'DEFAULT_GROUP' })).toContainEqual(expect.objectContaining({ name: 'marked' }));
      await waitUntil(() => server.openWatches('services') > 0, { message: 'watch open' });
      const informer = () => adapter.stats().informers['team-a']?.services;
      const lists = informer()?.lists ?? 0;
      for (let n = 0; n < 5; n += 1) server.put('services', nativeService(`noise-${n}`));
      if (withBookmark) {
        const resourceVersion = String(server.resourceVersion());
        expect(server.bookmark()).toBeGreaterThan(0);
        await waitUntil(() => informer()?.resourceVersion === resourceVersion, { message: 'bookmark applied' });
      }
      server.compact();
      server.cutWatches();
      await waitUntil(() => (informer()?.watches ?? 0) >= 2 && server.openWatches('services') > 0 && adapter.stats().informers['team-a']?.services.healthy, {
        message: 'watching again',
      });
      await waitUntil(() => (withBookmark ? true : (informer()?.lists ?? 0) > lists), { message: 'relist without bookmark' });
      const relisted = (informer()?.lists ?? 0) - lists;
      await adapter.close();
      return relisted;
    };
    expect(await run(true)).toBe(0);
    expect(await run(false)).toBe(1);
  });

  it('rejects every call once closed, and closes twice without harm', async () => {
    const adapter = make();
    expect(await adapter.listInstances(key('closing'))).toEqual([]);
    await adapter.close();
    await adapter.close();
    await expect(adapter.listInstances(key('closing'))).rejects.toMatchObject({ code: 'kubernetes-closed' });
    await expect(adapter.apply(key('closing'), { upsert: [instance()], remove: [] })).rejects.toMatchObject({ code: 'kubernetes-closed' });
    expect(adapter.watch(key('closing'), () => {})).toBeTypeOf('function');
  });

  it('rejects reads and writes when the API server cannot be reached', async () => {
    const gone = await startK8sApiServer();
    await gone.close();
    const offline = createKubernetesAdapter(spec({ initialListTimeoutMs: 5_000 }), { logger: silent, kubeConfig: () => gone.kubeConfig() });
    try {
      await expect(offline.listInstances(key('x'))).rejects.toMatchObject({ code: 'kubernetes-not-ready' });
      await expect(offline.apply(key('x'), { upsert: [instance()], remove: [] })).rejects.toMatchObject({ code: 'kubernetes-unreachable' });
    } finally {
      await offline.close();
    }
  });
});

describe('KubernetesAdapter configuration', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'regsync-k8s-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads a kubeconfig file and its context', async () => {
    const server = await startK8sApiServer();
    try {
      const path = join(dir, 'config');
      await writeFile(path, server.kubeconfigYaml());
      server.put('services', nativeService('from-file'));
      const adapter = createKubernetesAdapter(spec({ kubeconfig: path, context: 'test' }), { logger: silent });
      try {
        expect((await adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).map((s) => s.name)).toEqual(['from-file']);
        expect(adapter.stats().server).toBe(server.url);
      } finally {
        await adapter.close();
      }
      expect(() => createKubernetesAdapter(spec({ kubeconfig: path, context: 'nope' }), { logger: silent })).toThrow(/no context nope/);
    } finally {
      await server.close();
    }
  });

  it('talks to a plain http:// server, as kubectl proxy serves, without insecure-skip-tls-verify', async () => {
    const server = await startK8sApiServer();
    try {
      const path = join(dir, 'proxy-config');
      const yaml = server.kubeconfigYaml();
      expect(yaml).toContain(`server: ${server.url}`);
      expect(server.url.startsWith('http://')).toBe(true);
      const plain = yaml.replace(/^\s*insecure-skip-tls-verify: true\n/m, '');
      expect(plain).not.toContain('insecure-skip-tls-verify');
      await writeFile(path, plain);
      server.put('services', nativeService('via-proxy'));
      const adapter = createKubernetesAdapter(spec({ kubeconfig: path }), { logger: silent });
      try {
        const scope = { namespace: 'public', group: 'DEFAULT_GROUP' };
        expect((await adapter.listServices(scope)).map((s) => s.name)).toEqual(['via-proxy']);
        // Writes and watches go over the same plain HTTP.
        await adapter.apply(key('written'), { upsert: [instance()], remove: [] });
        await waitUntil(async () => (await adapter.listServices(scope)).some((s) => s.name === 'written'), { message: 'the written service is seen' });
      } finally {
        await adapter.close();
      }
    } finally {
      await server.close();
    }
  });

  it('refuses bad definitions before connecting', () => {
    const make = (options: Record<string, unknown>, extra: Partial<ClusterSpec> = {}) => () => createKubernetesAdapter(spec(options, extra), { logger: silent });
    expect(make({}, { kind: 'nacos' })).toThrow(KubernetesConfigError);
    expect(make({ kubeconfig: join(dir, 'missing') })).toThrow(/cannot read/);
    expect(make({ maxEndpointsPerSlice: 0, kubeconfig: join(dir, 'missing') })).toThrow(/options.maxEndpointsPerSlice/);
    expect(make({ namespaceMap: { a: 'public', b: 'public' } })).toThrow(/one-to-one/);
    const previous = process.env.KUBERNETES_SERVICE_HOST;
    delete process.env.KUBERNETES_SERVICE_HOST;
    try {
      expect(make({})).toThrow(/not running in a pod/);
    } finally {
      if (previous !== undefined) process.env.KUBERNETES_SERVICE_HOST = previous;
    }
  });
});
