import { afterEach, describe, expect, it } from 'vitest';
import { nacosKind } from '../../adapters/nacos/index.js';
import { startTcpGate, type TcpGate } from '../../test/support/tcp-gate.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { silentLogger } from '../log.js';
import type { ClusterSpec, ServiceKey } from '../model/types.js';
import { startRegistry, type RunningRegistry } from '../registry/index.js';
import { DnsCatalogue } from './catalogue.js';
import { DnsFeed } from './feed.js';

const logger = silentLogger();
const orders: ServiceKey = { namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' };
const instance = (ip: string, metadata: Record<string, string> = {}) => ({ ip, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata });

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function registry(): Promise<RunningRegistry> {
  const r = await startRegistry({ port: 0, grpc: { pushMergeWindowMs: 20 }, logger });
  cleanups.push(() => r.close());
  return r;
}

function grpcCluster(id: string, r: RunningRegistry, labels: Record<string, string> = {}): ClusterSpec {
  return { id, kind: 'nacos', endpoints: [r.endpoint], labels, options: { apiVersion: 'grpc', grpcPort: r.grpcPort, requestTimeoutMs: 2_000, serviceListPollIntervalMs: 200 } };
}

function feedOf(catalogue: DnsCatalogue, clusters: () => ClusterSpec[], extra: Partial<ConstructorParameters<typeof DnsFeed>[0]> = {}): DnsFeed {
  const feed = new DnsFeed({ catalogue, clusters: async () => clusters(), adapter: (spec) => nacosKind.create(spec, { logger }), logger, refreshMs: 60_000, retryMs: 100, ...extra });
  cleanups.push(() => feed.close());
  return feed;
}

const addresses = (catalogue: DnsCatalogue, key: ServiceKey = orders) => (catalogue.service(key)?.instances ?? []).map((i) => i.ip).sort();

describe('DnsFeed', () => {
  it('serves every service of a cluster and follows its changes through the watches', async () => {
    const r = await registry();
    r.store.register('public', 'DEFAULT_GROUP', 'orders', instance('10.50.0.1'));
    r.store.register('dev', 'blue', 'billing', instance('10.50.0.9'));
    const catalogue = new DnsCatalogue({ zone: 'regsync.internal' });
    const feed = feedOf(catalogue, () => [grpcCluster('sh', r, { site: 'sh' })]);
    await feed.start();
    expect(addresses(catalogue)).toEqual(['10.50.0.1']);
    expect(addresses(catalogue, { namespace: 'dev', group: 'blue', name: 'billing' })).toEqual(['10.50.0.9']);
    // The cluster's labels fill in what the instance's metadata lacks.
    expect(catalogue.service(orders)?.instances[0]?.metadata).toMatchObject({ site: 'sh' });
    expect(feed.status()).toEqual([expect.objectContaining({ id: 'sh', state: 'fresh', services: 2 })]);

    r.store.register('public', 'DEFAULT_GROUP', 'orders', instance('10.50.0.2'));
    await waitUntil(() => addresses(catalogue).length === 2);
    expect(addresses(catalogue)).toEqual(['10.50.0.1', '10.50.0.2']);
    // A new service is found by the service-list watch, without waiting for a refresh.
    r.store.register('public', 'DEFAULT_GROUP', 'payments', instance('10.50.0.3'));
    await waitUntil(() => addresses(catalogue, { ...orders, name: 'payments' }).length === 1);
    r.store.deregister('public', 'DEFAULT_GROUP', 'orders', '10.50.0.1', 8080, 'DEFAULT');
    await waitUntil(() => addresses(catalogue).length === 1);
    expect(addresses(catalogue)).toEqual(['10.50.0.2']);
  });

  it('serves the last good answers while the registry cannot be read, and says so', async () => {
    const r = await registry();
    r.store.register('public', 'DEFAULT_GROUP', 'orders', instance('10.51.0.1'));
    const gate: TcpGate = await startTcpGate(r.endpoint);
    cleanups.push(() => gate.close());
    const catalogue = new DnsCatalogue({ zone: 'regsync.internal' });
    const spec: ClusterSpec = { id: 'bj', kind: 'nacos', endpoints: [gate.endpoint], labels: {}, options: { apiVersion: 'v1', requestTimeoutMs: 1_000, pollIntervalMs: 100, serviceListPollIntervalMs: 100 } };
    const feed = feedOf(catalogue, () => [spec], { refreshMs: 200 });
    await feed.start();
    expect(addresses(catalogue)).toEqual(['10.51.0.1']);

    gate.cut();
    await waitUntil(() => feed.status()[0]?.state === 'stale');
    expect(catalogue.service(orders)?.staleSince).toBeDefined();
    expect(addresses(catalogue)).toEqual(['10.51.0.1']);
    expect(feed.status()[0]?.lastError).toMatch(/cannot/);

    r.store.register('public', 'DEFAULT_GROUP', 'orders', instance('10.51.0.2'));
    gate.open();
    await waitUntil(() => feed.status()[0]?.state === 'fresh' && addresses(catalogue).length === 2);
    expect(catalogue.service(orders)?.staleSince).toBeUndefined();
  });

  it('drops a cluster no longer chosen, and reads a changed one through a new adapter', async () => {
    const [a, b] = [await registry(), await registry()];
    a.store.register('public', 'DEFAULT_GROUP', 'orders', instance('10.52.0.1'));
    b.store.register('public', 'DEFAULT_GROUP', 'orders', instance('10.52.0.2'));
    b.store.register('public', 'DEFAULT_GROUP', 'stock', instance('10.52.0.3'));
    const catalogue = new DnsCatalogue({ zone: 'regsync.internal' });
    let clusters = [grpcCluster('x', a)];
    const feed = feedOf(catalogue, () => clusters);
    await feed.start();
    expect(addresses(catalogue)).toEqual(['10.52.0.1']);

    clusters = [grpcCluster('x', b)];
    feed.clusterChanged();
    await waitUntil(() => addresses(catalogue).join() === '10.52.0.2' && addresses(catalogue, { ...orders, name: 'stock' }).length === 1);

    clusters = [];
    feed.clusterChanged();
    await waitUntil(() => catalogue.stats().services === 0);
    expect(feed.status()).toEqual([]);
  });

  it('reports a cluster it has no adapter for, and keeps serving the others', async () => {
    const r = await registry();
    r.store.register('public', 'DEFAULT_GROUP', 'orders', instance('10.53.0.1'));
    const catalogue = new DnsCatalogue({ zone: 'regsync.internal' });
    const odd: ClusterSpec = { id: 'odd', kind: 'martian', endpoints: [], labels: {}, options: {} };
    const feed = new DnsFeed({
      catalogue,
      clusters: async () => [odd, grpcCluster('ok', r)],
      adapter: (spec) => {
        if (spec.kind !== 'nacos') throw new Error(`no adapter for kind ${spec.kind}`);
        return nacosKind.create(spec, { logger });
      },
      logger,
      retryMs: 100,
    });
    cleanups.push(() => feed.close());
    await feed.start();
    expect(addresses(catalogue)).toEqual(['10.53.0.1']);
    expect(feed.status()).toEqual([
      expect.objectContaining({ id: 'odd', state: 'failed', lastError: 'no adapter for kind martian' }),
      expect.objectContaining({ id: 'ok', state: 'fresh', services: 1 }),
    ]);
  });
});
