import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { MARK_TASK, type ClusterSpec, type Instance, type ServiceKey } from '../../src/model/index.js';
import { startRegistry, type RegistryOptions, type RunningRegistry } from '../../src/registry/index.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createNacosAdapter, type NacosAdapter } from './nacos-adapter.js';
import { NacosRequestError } from './nacos-request-error.js';

const silent = pino({ level: 'silent' });
const orders: ServiceKey = { namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' };

const registries: RunningRegistry[] = [];
const adapters: NacosAdapter[] = [];

afterEach(async () => {
  await Promise.all(adapters.splice(0).map((a) => a.close()));
  await Promise.all(registries.splice(0).map((r) => r.close()));
});

async function registry(options: RegistryOptions = {}): Promise<RunningRegistry> {
  const r = await startRegistry({ port: 0, grpc: { pushMergeWindowMs: 20 }, ...options });
  registries.push(r);
  return r;
}

function adapter(r: Pick<RunningRegistry, 'endpoint' | 'grpcPort'>, options: Record<string, unknown> = {}, spec: Partial<ClusterSpec> = {}): NacosAdapter {
  const a = createNacosAdapter(
    { id: 'g', kind: 'nacos', endpoints: [r.endpoint], labels: {}, options: { grpcPort: r.grpcPort, requestTimeoutMs: 2_000, ...options }, ...spec },
    { logger: silent },
  );
  adapters.push(a);
  return a;
}

const copy = (ip: string, metadata: Record<string, string> = {}, over: Partial<Instance> = {}): Instance => ({
  ip,
  port: 8080,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: { [MARK_TASK]: 't1', ...metadata },
  ...over,
});

/** What the registry shows for `orders` to an HTTP reader: address list, sorted. */
function shown(r: RunningRegistry, service: ServiceKey = orders): string[] {
  const s = r.store.getService(service.namespace, service.group, service.name);
  return s ? visible(r, service).map((i) => `${i.ip}:${i.port}`).sort() : [];
}

function visible(r: RunningRegistry, service: ServiceKey): Array<{ ip: string; port: number }> {
  return [...(r.store.getService(service.namespace, service.group, service.name)?.instances.values() ?? [])];
}

describe('NacosAdapter over gRPC', () => {
  it('auto picks gRPC where the gRPC port answers, HTTP v1 where it does not', async () => {
    const withGrpc = await registry();
    const grpc = adapter(withGrpc, { apiVersion: 'auto' });
    expect(await grpc.resolveApiVersion()).toBe('grpc');
    expect(await grpc.connectionBound()).toBe(true);
    expect(grpc.stats().grpc?.state).toBe('ready');

    const httpOnly = await registry({ grpcPort: false });
    const http = adapter(httpOnly, { apiVersion: 'auto', grpcPort: withGrpc.port + 2 });
    expect(await http.resolveApiVersion()).toBe('v1');
    expect(await http.connectionBound()).toBe(false);
    expect(http.stats().grpc).toBeUndefined();

    // Another registry's gRPC port where this one's would be: not taken for this one's.
    const other = adapter({ endpoint: httpOnly.endpoint, grpcPort: withGrpc.grpcPort }, { apiVersion: 'auto' });
    expect(await other.resolveApiVersion()).toBe('v1');
  });

  it('publishes an owner’s desired set whole, merges owners, and shrinks and clears it', async () => {
    const r = await registry();
    const a = adapter(r, { apiVersion: 'grpc' });
    await a.apply(orders, { upsert: [copy('10.0.0.1'), copy('10.0.0.2')], remove: [], desired: { owner: 't1|orders', instances: [copy('10.0.0.1'), copy('10.0.0.2')] } });
    await waitUntil(() => shown(r).length === 2);
    await a.publish(orders, 't2|orders', [copy('10.0.0.3', { [MARK_TASK]: 't2' })]);
    await waitUntil(() => shown(r).length === 3);
    await a.apply(orders, { upsert: [], remove: [copy('10.0.0.2')], desired: { owner: 't1|orders', instances: [copy('10.0.0.1')] } });
    await waitUntil(() => shown(r).join() === '10.0.0.1:8080,10.0.0.3:8080');
    expect(a.stats().grpc).toMatchObject({ publishSets: 1, publishedInstances: 2 });
    await a.publish(orders, 't1|orders', []);
    await a.publish(orders, 't2|orders', []);
    await waitUntil(() => shown(r).length === 0);
    expect(a.stats().grpc).toMatchObject({ publishSets: 0 });
    // The entry is gone at the server too, not left empty.
    expect(r.grpc?.stats().publishSets).toBe(0);
  });

  it('copies live with the connection; byte-identical sets from two connections show once and stay until the last goes', async () => {
    const r = await registry();
    const one = adapter(r, { apiVersion: 'grpc' });
    const two = adapter(r, { apiVersion: 'grpc' });
    const set = [copy('10.0.0.1', { zone: 'a', app: 'x' }), copy('10.0.0.2')];
    await one.publish(orders, 'k', set);
    // The same set, its metadata in another order: written identically.
    await two.publish(orders, 'k', [copy('10.0.0.2'), copy('10.0.0.1', { app: 'x', zone: 'a' })]);
    await waitUntil(() => (r.grpc?.stats().connections ?? 0) === 2);
    expect(visible(r, orders)).toHaveLength(2);
    await one.close();
    await waitUntil(() => (r.grpc?.stats().connections ?? 0) === 1);
    expect(shown(r)).toEqual(['10.0.0.1:8080', '10.0.0.2:8080']);
    await two.close();
    await waitUntil(() => shown(r).length === 0);
  });

  it('watches by subscription: a change pushed wakes the watcher and reads come from the push', async () => {
    const r = await registry();
    const writer = adapter(r, { apiVersion: 'v1' });
    await writer.apply(orders, { upsert: [copy('10.0.0.1', {}, { ephemeral: false })], remove: [] });
    const reader = adapter(r, { apiVersion: 'grpc' });
    let calls = 0;
    reader.watch(orders, () => (calls += 1));
    expect((await reader.listInstances(orders)).map((i) => i.ip)).toEqual(['10.0.0.1']);
    const queriesBefore = r.grpc?.stats().requests.ServiceQueryRequest ?? 0;
    await writer.apply(orders, { upsert: [copy('10.0.0.2', {}, { ephemeral: false })], remove: [] });
    await waitUntil(() => calls > 0);
    expect((await reader.listInstances(orders)).map((i) => i.ip).sort()).toEqual(['10.0.0.1', '10.0.0.2']);
    expect(r.grpc?.stats().requests.ServiceQueryRequest ?? 0).toBe(queriesBefore);
    expect(reader.stats().grpc?.pushesReceived).toBeGreaterThan(0);
  });

  it('after the registry restarts, connects again, publishes every set once more and watches again', async () => {
    let r = await registry();
    const { port, grpcPort } = r;
    const a = adapter(r, { apiVersion: 'grpc' });
    await a.publish(orders, 'k', [copy('10.0.0.1'), copy('10.0.0.2')]);
    let calls = 0;
    a.watch({ ...orders, name: 'users' }, () => (calls += 1));
    await a.listInstances({ ...orders, name: 'users' });
    await r.close();
    registries.splice(registries.indexOf(r), 1);
    r = await registry({ port, grpcPort });
    await waitUntil(() => shown(r).length === 2, { timeoutMs: 15_000 });
    expect(visible(r, orders)).toHaveLength(2);
    expect(a.stats().grpc?.reconnects).toBe(1);
    const writer = adapter(r, { apiVersion: 'v1' });
    await writer.apply({ ...orders, name: 'users' }, { upsert: [copy('10.0.0.9', {}, { ephemeral: false })], remove: [] });
    await waitUntil(() => calls > 0, { timeoutMs: 10_000 });
  });

  it('sends the login token in the headers; without credentials a secured registry refuses with 403', async () => {
    const r = await registry({ users: new Map([['nacos', 'secret']]) });
    const good = adapter(r, { apiVersion: 'grpc' }, { username: 'nacos', password: 'secret' });
    await good.publish(orders, 'k', [copy('10.0.0.1')]);
    await waitUntil(() => shown(r).length === 1);
    const anonymous = adapter(r, { apiVersion: 'grpc' });
    const error = await anonymous.listInstances(orders).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(NacosRequestError);
    expect((error as NacosRequestError).nacosCode).toBe(403);
  });

  it('writes persistent copies with PersistentInstanceRequest: they outlive the connection', async () => {
    const r = await registry();
    const a = adapter(r, { apiVersion: 'grpc' });
    const persistent = copy('10.0.0.5', {}, { ephemeral: false });
    await a.apply({ ...orders, name: 'db' }, { upsert: [persistent], remove: [], desired: { owner: 'k', instances: [persistent] } });
    await waitUntil(() => shown(r, { ...orders, name: 'db' }).length === 1);
    expect(r.grpc?.stats().requests.PersistentInstanceRequest).toBe(1);
    await a.close();
    expect(shown(r, { ...orders, name: 'db' })).toEqual(['10.0.0.5:8080']);
  });

  it('lists one group’s services with ServiceListRequest', async () => {
    const r = await registry();
    const a = adapter(r, { apiVersion: 'grpc', servicePageSize: 2 });
    for (const name of ['s1', 's2', 's3']) await a.publish({ ...orders, name }, 'k', [copy('10.0.0.1')]);
    await waitUntil(async () => (await a.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).length === 3);
    expect((await a.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).map((s) => s.name).sort()).toEqual(['s1', 's2', 's3']);
  });
});
