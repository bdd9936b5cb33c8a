import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClusterSpec, ServiceKey } from '../../src/model/index.js';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { formOf, type ParamValues } from '../../test/support/http.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createNacosAdapter, type NacosAdapter } from './nacos-adapter.js';
import { NacosRequestError } from './nacos-request-error.js';

const silent = pino({ level: 'silent' });

const clusterSpec = (endpoint: string, options: Record<string, unknown>): ClusterSpec => ({
  id: 'nacos-wild',
  kind: 'nacos',
  endpoints: [endpoint],
  labels: {},
  options,
});

const keyOf = (s: ServiceKey) => `${s.namespace}/${s.group}/${s.name}`;
const keys = (services: readonly ServiceKey[]) => services.map(keyOf).sort();

/** A stand-in server answering each `METHOD /path` as scripted (for servers that refuse or lack an API). */
async function startScripted(
  route: (method: string, path: string, req: IncomingMessage) => [number, unknown],
): Promise<{ endpoint: string; paths: string[]; close(): Promise<void> }> {
  const paths: string[] = [];
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0] ?? '';
    paths.push(`${req.method ?? 'GET'} ${path}`);
    const [status, body] = route(req.method ?? 'GET', path, req);
    req.resume();
    res.writeHead(status, { 'content-type': 'application/json' }).end(typeof body === 'string' ? body : JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    paths,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function registryWithNamespace(id: string): Promise<RunningRegistry> {
  const registry = await startRegistry({ port: 0 });
  closers.push(() => registry.close());
  // Created the way an operator does, through the console API.
  const res = await fetch(`${registry.url}/nacos/v1/console/namespaces`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: formOf({ customNamespaceId: id, namespaceName: id }).toString(),
  });
  expect(res.status).toBe(200);
  return registry;
}

function adapterFor(endpoint: string, options: Record<string, unknown>): NacosAdapter {
  const adapter = createNacosAdapter(clusterSpec(endpoint, options), { logger: silent });
  closers.push(() => adapter.close());
  return adapter;
}

/** Registers one instance through the v1 open API (an official client's call). */
async function register(registry: RunningRegistry, params: ParamValues): Promise<void> {
  const res = await fetch(`${registry.url}/nacos/v1/ns/instance`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: formOf({ port: 8080, ephemeral: false, ...params }).toString(),
  });
  expect(res.status).toBe(200);
}

async function remove(registry: RunningRegistry, params: { serviceName: string; groupName: string; namespaceId: string; ip: string }): Promise<void> {
  const call = (path: string, extra: ParamValues) =>
    fetch(`${registry.url}${path}?${formOf({ ...params, ...extra }).toString()}`, { method: 'DELETE' }).then((r) => expect(r.status).toBe(200));
  await call('/nacos/v1/ns/instance', { port: 8080, ephemeral: false });
  // An empty service stays listed until Nacos cleans it up; deleting it is what makes it vanish now.
  await call('/nacos/v1/ns/service', {});
}

describe.each(['v1', 'v3'] as const)('NacosAdapter wildcard scopes over %s', (apiVersion) => {
  /** Services in three groups and two namespaces (public and a created one). */
  const seeded = [
    'public/DEFAULT_GROUP/orders',
    'public/DEFAULT_GROUP/users',
    'public/PAYMENTS/ledger',
    'public/SEARCH/indexer',
    'staging/DEFAULT_GROUP/orders',
    'staging/PAYMENTS/ledger',
  ];
  const seed = async (registry: RunningRegistry) => {
    let n = 0;
    for (const entry of seeded) {
      const [namespaceId = '', groupName = '', serviceName = ''] = entry.split('/');
      n += 1;
      await register(registry, { namespaceId, groupName, serviceName, ip: `10.70.0.${n}` });
    }
  };

  it('lists every service of every namespace and group, each with its real namespace and group', async () => {
    const registry = await registryWithNamespace('staging');
    await seed(registry);
    const adapter = adapterFor(registry.endpoint, { apiVersion });
    expect(keys(await adapter.listServices({ namespace: '*', group: '*' }))).toEqual(seeded);
    expect(keys(await adapter.listServices({ namespace: 'public', group: '*' }))).toEqual(seeded.filter((k) => k.startsWith('public/')));
    expect(keys(await adapter.listServices({ namespace: '*', group: 'DEFAULT_GROUP' }))).toEqual(seeded.filter((k) => k.includes('/DEFAULT_GROUP/')));
    expect(keys(await adapter.listServices({ namespace: '*', group: 'PAYMENTS' }))).toEqual(['public/PAYMENTS/ledger', 'staging/PAYMENTS/ledger']);
    // A concrete namespace keeps the spelling asked for (the empty one is public), and so does a group.
    expect(keys(await adapter.listServices({ namespace: '', group: '*' }))).toEqual(seeded.filter((k) => k.startsWith('public/')).map((k) => k.slice('public'.length)));
    expect(await adapter.listServices({ namespace: 'staging', group: 'NO-SUCH-GROUP' })).toEqual([]);
    // A namespace with nothing in it lists nothing, and a new one is found at the next list.
    await registryNamespace(registry, 'empty');
    expect(keys(await adapter.listServices({ namespace: '*', group: '*' }))).toEqual(seeded);
  });

  it('pages through more services than one page holds', async () => {
    const registry = await registryWithNamespace('bulk');
    const groups = ['DEFAULT_GROUP', 'G-A', 'G-B'];
    const expected: string[] = [];
    for (let n = 0; n < 250; n += 1) {
      const namespaceId = n % 2 === 0 ? 'public' : 'bulk';
      const group = groups[n % 3] ?? 'DEFAULT_GROUP';
      registry.store.register(namespaceId, group, `svc-${n}`, {
        ip: '10.70.1.1', port: 1, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {},
      });
      expected.push(`${namespaceId}/${group}/svc-${n}`);
    }
    const adapter = adapterFor(registry.endpoint, { apiVersion, servicePageSize: 7 });
    const all = await adapter.listServices({ namespace: '*', group: '*' });
    expect(all).toHaveLength(250);
    expect(keys(all)).toEqual(expected.sort());
    expect(keys(await adapter.listServices({ namespace: 'bulk', group: '*' }))).toEqual(expected.filter((k) => k.startsWith('bulk/')));
  });

  it('watches a wildcard scope: calls back when a service appears in another group and namespace, and when one vanishes', async () => {
    const registry = await registryWithNamespace('staging');
    await seed(registry);
    const adapter = adapterFor(registry.endpoint, { apiVersion, serviceListPollIntervalMs: 50 });
    const scope = { namespace: '*', group: '*' };
    let calls = 0;
    // What the engine does: list, then watch; the list is the baseline.
    expect(keys(await adapter.listServices(scope))).toEqual(seeded);
    const stop = adapter.watchServices(scope, () => (calls += 1));
    expect(adapter.stats().watchedServiceLists).toBe(1);

    await register(registry, { namespaceId: 'staging', groupName: 'NEW-GROUP', serviceName: 'appeared', ip: '10.70.2.1' });
    await waitUntil(() => calls === 1, { message: 'a service appearing in a new group of another namespace is noticed' });
    expect(keys(await adapter.listServices(scope))).toContain('staging/NEW-GROUP/appeared');

    await remove(registry, { namespaceId: 'public', groupName: 'SEARCH', serviceName: 'indexer', ip: '10.70.0.4' });
    await waitUntil(() => calls === 2, { message: 'a service vanishing is noticed' });
    expect(keys(await adapter.listServices(scope))).not.toContain('public/SEARCH/indexer');

    stop();
    expect(adapter.stats().watchedServiceLists).toBe(0);
  });

  it('watches a scope of one group across namespaces, and ignores other groups', async () => {
    const registry = await registryWithNamespace('staging');
    await seed(registry);
    const adapter = adapterFor(registry.endpoint, { apiVersion, serviceListPollIntervalMs: 50 });
    let payments = 0;
    let everything = 0;
    adapter.watchServices({ namespace: '*', group: 'PAYMENTS' }, () => (payments += 1));
    adapter.watchServices({ namespace: '*', group: '*' }, () => (everything += 1));
    // No list first: each watch's first poll only records the baseline, so keep adding services
    // until a later poll sees one.
    let probes = 0;
    await waitUntil(async () => {
      probes += 1;
      await register(registry, { namespaceId: 'staging', groupName: 'OTHER', serviceName: `probe-${probes}`, ip: '10.70.3.1' });
      return everything > 0;
    }, { intervalMs: 100, message: 'the all-groups watch noticed a service in OTHER' });
    expect(payments).toBe(0);
    await register(registry, { namespaceId: 'staging', groupName: 'PAYMENTS', serviceName: 'refunds', ip: '10.70.3.2' });
    await waitUntil(() => payments === 1, { message: 'the PAYMENTS watch noticed refunds' });
  });
});

async function registryNamespace(registry: RunningRegistry, id: string): Promise<void> {
  const res = await fetch(`${registry.url}/nacos/v3/admin/core/namespace`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: formOf({ namespaceId: id, namespaceName: id }).toString(),
  });
  expect(res.status).toBe(200);
}

describe('NacosAdapter wildcard scopes against servers that cannot list', () => {
  const errorOf = (promise: Promise<unknown>) => promise.then(() => undefined, (e: unknown) => e);

  it('v1: a refused catalog list names the endpoint, the cluster, the scope and the reason', async () => {
    const server = await startScripted((_method, path) => {
      if (path === '/nacos/v1/ns/catalog/services') return [403, 'authorization failed!'];
      if (path === '/nacos/v1/ns/service/list') return [200, { count: 1, doms: ['orders'] }];
      return [500, 'unexpected'];
    });
    closers.push(() => server.close());
    const adapter = adapterFor(server.endpoint, { apiVersion: 'v1' });
    const err = await errorOf(adapter.listServices({ namespace: 'dev', group: '*' }));
    expect(err).toBeInstanceOf(NacosRequestError);
    expect(err).toMatchObject({ code: 'nacos-http-error', status: 403, clusterId: 'nacos-wild', endpoint: server.endpoint, path: '/nacos/v1/ns/catalog/services' });
    expect((err as Error).message).toBe(
      `nacos cluster nacos-wild: GET /nacos/v1/ns/catalog/services at ${server.endpoint} failed: HTTP 403 ` +
        `group "*" needs the list of every service of namespace dev (the cluster's user lacks the permission): authorization failed!`,
    );
    // A concrete group still lists as before.
    expect(await adapter.listServices({ namespace: 'dev', group: 'G' })).toEqual([{ namespace: 'dev', group: 'G', name: 'orders' }]);
  });

  it('v1: a server without the namespace list (nor the v3 one) says which lists it lacks', async () => {
    const server = await startScripted(() => [404, '{"timestamp":"2024-01-01","status":404,"error":"Not Found","path":"/nacos/x"}']);
    closers.push(() => server.close());
    const adapter = adapterFor(server.endpoint, { apiVersion: 'v1' });
    const err = await errorOf(adapter.listServices({ namespace: '*', group: 'DEFAULT_GROUP' }));
    expect(err).toMatchObject({ code: 'nacos-http-error', status: 404, path: '/nacos/v1/console/namespaces', endpoint: server.endpoint });
    expect((err as Error).message).toMatch(
      /^nacos cluster nacos-wild: GET \/nacos\/v1\/console\/namespaces at .* failed: HTTP 404 namespace "\*" needs the list of every namespace \(this server does not offer it\): not served \(nor \/nacos\/v3\/admin\/core\/namespace\/list, HTTP 404\)/,
    );
    expect(server.paths).toEqual(['GET /nacos/v1/console/namespaces', 'GET /nacos/v3/admin/core/namespace/list']);
  });

  it('v1 on Nacos 3.0/3.1 (catalog and console answer 410): lists through the v3 admin API instead', async () => {
    const gone = [410, { code: 20003, message: 'Current API will be deprecated', data: null }] as [number, unknown];
    const server = await startScripted((_method, path, req) => {
      if (path === '/nacos/v1/ns/catalog/services' || path === '/nacos/v1/console/namespaces') return gone;
      if (path === '/nacos/v3/admin/core/namespace/list') {
        return [200, { code: 0, message: 'success', data: [{ namespace: 'public', namespaceShowName: 'public' }, { namespace: 'dev', namespaceShowName: 'dev' }] }];
      }
      if (path === '/nacos/v3/admin/ns/service/list') {
        const params = new URLSearchParams((req.url ?? '').split('?')[1] ?? '');
        expect(params.get('groupNameParam')).toBeNull();
        const ns = params.get('namespaceId');
        const pageItems = [{ name: `${ns ?? ''}-svc`, groupName: ns === 'dev' ? 'DEV_GROUP' : 'DEFAULT_GROUP', ipCount: 1 }];
        return [200, { code: 0, message: 'success', data: { totalCount: 1, pageNumber: 1, pagesAvailable: 1, pageItems } }];
      }
      return [500, 'unexpected'];
    });
    closers.push(() => server.close());
    const adapter = adapterFor(server.endpoint, { apiVersion: 'v1' });
    expect(keys(await adapter.listServices({ namespace: '*', group: '*' }))).toEqual(['dev/DEV_GROUP/dev-svc', 'public/DEFAULT_GROUP/public-svc']);
  });

  it('v3: a refused namespace list names the endpoint, the cluster and the reason', async () => {
    const server = await startScripted((_method, path) => {
      if (path === '/nacos/v3/admin/core/namespace/list') return [403, { code: 403, message: 'authorization failed!', data: null }];
      return [500, 'unexpected'];
    });
    closers.push(() => server.close());
    const adapter = adapterFor(server.endpoint, { apiVersion: 'v3' });
    const err = await errorOf(adapter.listServices({ namespace: '*', group: '*' }));
    expect(err).toMatchObject({ code: 'nacos-http-error', status: 403, nacosCode: 403, path: '/nacos/v3/admin/core/namespace/list', clusterId: 'nacos-wild' });
    expect((err as Error).message).toContain('namespace "*" needs the list of every namespace (the cluster\'s user lacks the permission): authorization failed!');
  });

  it('an unreadable answer is an error, never a shorter list', async () => {
    const server = await startScripted((_method, path) => {
      if (path === '/nacos/v1/console/namespaces') return [200, { code: 200, data: [{ namespace: '' }, { namespaceShowName: 'no id' }] }];
      if (path === '/nacos/v1/ns/catalog/services') return [200, { count: 2, serviceList: [{ name: 'a', groupName: 'G' }, { groupName: 'G' }] }];
      return [500, 'unexpected'];
    });
    closers.push(() => server.close());
    const adapter = adapterFor(server.endpoint, { apiVersion: 'v1' });
    await expect(adapter.listServices({ namespace: '*', group: 'G' })).rejects.toMatchObject({ code: 'nacos-bad-response', path: '/nacos/v1/console/namespaces' });
    await expect(adapter.listServices({ namespace: 'public', group: '*' })).rejects.toMatchObject({ code: 'nacos-bad-response', path: '/nacos/v1/ns/catalog/services' });
  });
});
