import { ApiException, CoreV1Api, DiscoveryV1Api, Watch, type V1Service } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLabelSelector, startK8sApiServer, type K8sApiServer, type K8sObject } from './k8s-api-server.js';
import { waitUntil } from './wait-until.js';

const service = (namespace: string, name: string, labels: Record<string, string> = {}): K8sObject => ({
  metadata: { name, namespace, labels },
  spec: { ports: [{ name: 'http', port: 80, targetPort: 8080, protocol: 'TCP' }], selector: { app: name } },
});

const slice = (namespace: string, name: string, service: string, ips: string[]): K8sObject => ({
  metadata: { name, namespace, labels: { 'kubernetes.io/service-name': service } },
  addressType: 'IPv4',
  ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
});

/** A watch opened with the real client's `Watch`, recording what it sees. */
interface Recorded {
  events: Array<{ type: string; object: { metadata?: { name?: string; resourceVersion?: string }; code?: number } }>;
  done: Promise<unknown>;
  controller: AbortController;
}

async function record(server: K8sApiServer, path: string, query: Record<string, string | number | boolean>): Promise<Recorded> {
  const events: Recorded['events'] = [];
  let finish!: (err: unknown) => void;
  const done = new Promise<unknown>((resolve) => {
    finish = resolve;
  });
  const controller = await new Watch(server.kubeConfig()).watch(path, query, (type, object) => events.push({ type, object }), (err) => finish(err));
  return { events, done, controller };
}

const statusOf = async (p: Promise<unknown>): Promise<number | undefined> =>
  p.then(
    () => undefined,
    (err: unknown) => (err instanceof ApiException ? (err as ApiException<unknown>).code : -1),
  );

describe('test Kubernetes API server, through @kubernetes/client-node', () => {
  let server: K8sApiServer;
  let core: CoreV1Api;
  let discovery: DiscoveryV1Api;

  beforeAll(async () => {
    server = await startK8sApiServer({ namespaces: ['default', 'team-a'] });
    core = server.kubeConfig().makeApiClient(CoreV1Api);
    discovery = server.kubeConfig().makeApiClient(DiscoveryV1Api);
  });
  afterAll(async () => {
    await server?.close();
  });

  it('lists with a resourceVersion, per namespace and across namespaces, with label selectors', async () => {
    server.put('services', service('default', 'list-a', { tier: 'web' }));
    server.put('services', service('team-a', 'list-b', { tier: 'db' }));
    server.put('services', service('team-a', 'list-c'));
    const all = await core.listServiceForAllNamespaces({});
    expect(all.metadata?.resourceVersion).toBe(String(server.resourceVersion()));
    expect(all.items.map((s) => `${s.metadata?.namespace}/${s.metadata?.name}`)).toEqual(['default/list-a', 'team-a/list-b', 'team-a/list-c']);
    expect(all.items[0]?.metadata?.uid).toBeTruthy();
    expect(all.items[0]?.spec?.clusterIP).toMatch(/^10\.96\./);

    const teamA = await core.listNamespacedService({ namespace: 'team-a' });
    expect(teamA.items.map((s) => s.metadata?.name)).toEqual(['list-b', 'list-c']);
    const selected = await core.listServiceForAllNamespaces({ labelSelector: 'tier' });
    expect(selected.items.map((s) => s.metadata?.name)).toEqual(['list-a', 'list-b']);
    expect((await core.listServiceForAllNamespaces({ labelSelector: 'tier=db' })).items.map((s) => s.metadata?.name)).toEqual(['list-b']);
    expect((await core.listServiceForAllNamespaces({ labelSelector: '!tier' })).items.map((s) => s.metadata?.name)).toEqual(['list-c']);
    expect((await core.listServiceForAllNamespaces({ labelSelector: 'tier in (web,db),tier!=web' })).items.map((s) => s.metadata?.name)).toEqual(['list-b']);
    expect(() => parseLabelSelector('tier=(')).toThrow(/unable to parse/);
  });

  it('streams ADDED, MODIFIED and DELETED from a list resourceVersion, and BOOKMARKs when asked', async () => {
    const from = (await discovery.listNamespacedEndpointSlice({ namespace: 'default' })).metadata?.resourceVersion as string;
    const watch = await record(server, '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices', {
      resourceVersion: from,
      allowWatchBookmarks: true,
      labelSelector: 'kubernetes.io/service-name=orders',
    });
    server.put('endpointslices', slice('default', 'orders-1', 'orders', ['10.0.0.1']));
    server.put('endpointslices', slice('default', 'other-1', 'other', ['10.0.0.9']));
    server.put('endpointslices', slice('team-a', 'orders-1', 'orders', ['10.0.0.8']));
    server.put('endpointslices', slice('default', 'orders-1', 'orders', ['10.0.0.1', '10.0.0.2']));
    server.remove('endpointslices', 'default', 'orders-1');
    await waitUntil(() => watch.events.length === 3, { message: 'three events' });
    expect(watch.events.map((e) => `${e.type} ${e.object.metadata?.name}`)).toEqual(['ADDED orders-1', 'MODIFIED orders-1', 'DELETED orders-1']);
    expect(watch.events.map((e) => Number(e.object.metadata?.resourceVersion))).toEqual([...watch.events.map((e) => Number(e.object.metadata?.resourceVersion))].sort((a, b) => a - b));

    expect(server.bookmark()).toBe(1);
    await waitUntil(() => watch.events.length === 4, { message: 'bookmark' });
    expect(watch.events[3]).toMatchObject({ type: 'BOOKMARK', object: { metadata: { resourceVersion: String(server.resourceVersion()) } } });
    watch.controller.abort();
    await watch.done;
  });

  it('replays history to a watch that resumes from an older resourceVersion, and sends an object leaving the selector as DELETED', async () => {
    server.put('services', service('default', 'moving', { sync: 'yes' }));
    const from = String(server.resourceVersion());
    server.put('services', service('default', 'moving', { sync: 'no' }));
    server.put('services', service('default', 'moving', { sync: 'yes' }));
    const watch = await record(server, '/api/v1/services', { resourceVersion: from, labelSelector: 'sync=yes' });
    await waitUntil(() => watch.events.length === 2, { message: 'replayed events' });
    expect(watch.events.map((e) => `${e.type} ${e.object.metadata?.name}`)).toEqual(['DELETED moving', 'ADDED moving']);
    watch.controller.abort();
  });

  it('answers a watch from a compacted resourceVersion with HTTP 410', async () => {
    const old = String(server.resourceVersion());
    server.put('services', service('default', 'gone-1'));
    server.compact();
    server.staleWatch = 'http';
    const watch = await record(server, '/api/v1/services', { resourceVersion: old });
    const err = (await watch.done) as { statusCode?: number };
    expect(err.statusCode).toBe(410);
    expect(watch.events).toEqual([]);
    // The current resourceVersion is still fine.
    const fresh = await record(server, '/api/v1/services', { resourceVersion: String(server.resourceVersion()) });
    server.put('services', service('default', 'gone-2'));
    await waitUntil(() => fresh.events.length === 1, { message: 'event after compaction' });
    fresh.controller.abort();
  });

  it('answers a watch from a compacted resourceVersion with an ERROR event carrying a 410 Status, then ends it', async () => {
    const old = String(server.resourceVersion());
    server.put('services', service('default', 'gone-3'));
    server.compact();
    server.staleWatch = 'event';
    try {
      const watch = await record(server, '/api/v1/services', { resourceVersion: old });
      expect(await watch.done).toBeNull();
      expect(watch.events).toEqual([{ type: 'ERROR', object: expect.objectContaining({ kind: 'Status', code: 410, reason: 'Expired' }) }]);
    } finally {
      server.staleWatch = 'http';
    }
  });

  it('drops the oldest events past maxHistory', async () => {
    const small = await startK8sApiServer({ maxHistory: 3 });
    try {
      const from = String(small.resourceVersion());
      for (let n = 0; n < 5; n += 1) small.put('services', service('default', `s${n}`));
      const stale = await record(small, '/api/v1/services', { resourceVersion: from });
      expect(((await stale.done) as { statusCode?: number }).statusCode).toBe(410);
      const recent = await record(small, '/api/v1/services', { resourceVersion: String(small.resourceVersion() - 3) });
      await waitUntil(() => recent.events.length === 3, { message: 'the three kept events' });
      recent.controller.abort();
    } finally {
      await small.close();
    }
  });

  it('creates, replaces and deletes, refusing stale versions and existing names with 409, missing objects with 404', async () => {
    const body = service('default', 'writes') as unknown as V1Service;
    const created = await core.createNamespacedService({ namespace: 'default', body });
    expect(created.metadata?.resourceVersion).toBe(String(server.resourceVersion()));
    expect(await statusOf(core.createNamespacedService({ namespace: 'default', body }))).toBe(409);
    expect(await statusOf(core.createNamespacedService({ namespace: 'nowhere', body }))).toBe(404);

    const v1 = created.metadata?.resourceVersion as string;
    const replaced = await core.replaceNamespacedService({
      namespace: 'default',
      name: 'writes',
      body: { ...created, metadata: { ...created.metadata, labels: { v: '2' } } },
    });
    expect(replaced.metadata?.labels).toEqual({ v: '2' });
    expect(replaced.metadata?.uid).toBe(created.metadata?.uid);
    expect(replaced.spec?.clusterIP).toBe(created.spec?.clusterIP);
    expect(Number(replaced.metadata?.resourceVersion)).toBeGreaterThan(Number(v1));
    const stale = { ...created, metadata: { ...created.metadata, resourceVersion: v1, labels: { v: 'stale' } } };
    expect(await statusOf(core.replaceNamespacedService({ namespace: 'default', name: 'writes', body: stale }))).toBe(409);
    expect(server.get('services', 'default', 'writes')?.metadata.labels).toEqual({ v: '2' });
    expect(await statusOf(core.replaceNamespacedService({ namespace: 'default', name: 'nope', body: { ...stale, metadata: { name: 'nope' } } }))).toBe(404);

    expect(await statusOf(core.deleteNamespacedService({ namespace: 'default', name: 'writes', body: { preconditions: { resourceVersion: v1 } } }))).toBe(409);
    await core.deleteNamespacedService({ namespace: 'default', name: 'writes', body: { preconditions: { resourceVersion: replaced.metadata?.resourceVersion as string } } });
    expect(server.get('services', 'default', 'writes')).toBeUndefined();
    expect(await statusOf(core.deleteNamespacedService({ namespace: 'default', name: 'writes' }))).toBe(404);
    expect(await statusOf(core.readNamespacedService({ namespace: 'default', name: 'writes' }))).toBe(404);

    const s = await discovery.createNamespacedEndpointSlice({ namespace: 'default', body: slice('default', 'writes-1', 'writes', ['10.1.0.1']) as never });
    expect(s.addressType).toBe('IPv4');
    expect(await statusOf(discovery.createNamespacedEndpointSlice({ namespace: 'default', body: { ...slice('default', 'bad', 'writes', []), addressType: 'IPv5' } as never }))).toBe(422);
    await discovery.deleteNamespacedEndpointSlice({ namespace: 'default', name: 'writes-1' });
    expect(server.list('endpointslices', 'default').map((o) => o.metadata.name)).not.toContain('writes-1');
  });

  it('cuts open watches cleanly or abruptly, and ends a watch after timeoutSeconds', async () => {
    const rv = String(server.resourceVersion());
    const clean = await record(server, '/api/v1/services', { resourceVersion: rv });
    const abrupt = await record(server, '/apis/discovery.k8s.io/v1/endpointslices', { resourceVersion: rv });
    await waitUntil(() => server.openWatches() === 2, { message: 'two open watches' });
    expect(server.openWatches('services')).toBe(1);
    server.cutWatches('end');
    expect(await clean.done).toBeNull();
    expect(await abrupt.done).toBeNull();

    const broken = await record(server, '/api/v1/services', { resourceVersion: rv });
    await waitUntil(() => server.openWatches() === 1, { message: 'watch open' });
    expect(server.cutWatches('destroy')).toBe(1);
    expect(await broken.done).toBeInstanceOf(Error);

    const timed = await record(server, '/api/v1/services', { resourceVersion: String(server.resourceVersion()), timeoutSeconds: 1 });
    expect(await timed.done).toBeNull();
  });

  it('runs a hook just before the next matching write, so that a test can win a race against the client', async () => {
    const created = await core.createNamespacedService({ namespace: 'default', body: service('default', 'raced') as unknown as V1Service });
    server.beforeNext('update', 'services', () => {
      server.put('services', service('default', 'raced', { by: 'someone-else' }));
    });
    const attempt = core.replaceNamespacedService({ namespace: 'default', name: 'raced', body: { ...created, metadata: { ...created.metadata, labels: { by: 'me' } } } });
    expect(await statusOf(attempt)).toBe(409);
    expect(server.get('services', 'default', 'raced')?.metadata.labels).toEqual({ by: 'someone-else' });
  });

  it('answers 503 while unavailable', async () => {
    server.setUnavailable(true);
    try {
      expect(await statusOf(core.listServiceForAllNamespaces({}))).toBe(503);
    } finally {
      server.setUnavailable(false);
    }
    expect((await core.listServiceForAllNamespaces({})).items.length).toBeGreaterThan(0);
    expect(server.requests.some((r) => r.verb === 'list' && r.status === 503)).toBe(true);
  });
});
