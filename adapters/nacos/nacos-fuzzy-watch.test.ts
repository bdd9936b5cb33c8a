import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServiceKey, ServicesChange } from '../../src/model/index.js';
import { startRegistry, type RegistryOptions, type RunningRegistry } from '../../src/registry/index.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createNacosAdapter, type NacosAdapter } from './nacos-adapter.js';

const silent = pino({ level: 'silent' });
const scope = { namespace: 'public', group: 'DEFAULT_GROUP' };
const names = (services: readonly ServiceKey[]) => services.map((s) => s.name).sort();
const keys = (services: readonly ServiceKey[]) => services.map((s) => `${s.namespace}/${s.group}/${s.name}`).sort();
const instance = { ip: '10.80.0.1', port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {} };

const registries: RunningRegistry[] = [];
const adapters: NacosAdapter[] = [];

afterEach(async () => {
  await Promise.all(adapters.splice(0).map((a) => a.close()));
  await Promise.all(registries.splice(0).map((r) => r.close()));
});

async function registry(options: RegistryOptions = {}): Promise<RunningRegistry> {
  const r = await startRegistry({ port: 0, ...options, grpc: { pushMergeWindowMs: 20, ...options.grpc } });
  registries.push(r);
  return r;
}

function adapter(r: Pick<RunningRegistry, 'endpoint' | 'grpcPort'>, options: Record<string, unknown> = {}, logger = silent): NacosAdapter {
  const a = createNacosAdapter(
    { id: 'fz', kind: 'nacos', endpoints: [r.endpoint], labels: {}, options: { apiVersion: 'grpc', grpcPort: r.grpcPort, requestTimeoutMs: 2_000, ...options } },
    { logger },
  );
  adapters.push(a);
  return a;
}

const add = (r: RunningRegistry, name: string, namespace = 'public', group = 'DEFAULT_GROUP') => r.store.register(namespace, group, name, instance);
const drop = (r: RunningRegistry, name: string, namespace = 'public', group = 'DEFAULT_GROUP') => r.store.deregister(namespace, group, name, instance.ip, instance.port, 'DEFAULT');
const requests = (r: RunningRegistry, type: string) => r.grpc?.stats().requests[type] ?? 0;

/** Warnings the adapter logs, as text. */
function capturingLogger(): { logger: pino.Logger; lines: string[] } {
  const lines: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  return { logger: pino({ level: 'warn' }, stream), lines };
}

describe('NacosAdapter service lists by fuzzy watch (Nacos 3.x over gRPC)', () => {
  it('learns new and removed services by push and lists the scope from the pushed set, with no ServiceListRequest', async () => {
    const r = await registry();
    add(r, 'orders');
    const a = adapter(r, { serviceListPollIntervalMs: 600_000 });
    // What the engine does: list, then watch.
    expect(names(await a.listServices(scope))).toEqual(['orders']);
    let calls = 0;
    a.watchServices(scope, () => (calls += 1));
    await waitUntil(() => calls > 0, { message: 'the pushed set complete' });
    expect(a.stats()).toMatchObject({ pushedServiceLists: 1, watchedServiceLists: 0, grpc: { fuzzyPatterns: 1 } });
    expect(a.servicesPushed(scope)).toBe(true);
    const listed = requests(r, 'ServiceListRequest');

    add(r, 'users');
    await waitUntil(async () => names(await a.listServices(scope)).join() === 'orders,users', { message: 'users pushed' });
    await waitUntil(() => calls > 1, { message: 'told of users' });
    const afterAdd = calls;
    drop(r, 'orders');
    await waitUntil(async () => names(await a.listServices(scope)).join() === 'users', { message: 'orders gone' });
    await waitUntil(() => calls > afterAdd, { message: 'told of orders gone' });
    // Another group is another pattern: not in this scope.
    add(r, 'ledger', 'public', 'PAYMENTS');
    add(r, 'payments');
    await waitUntil(async () => names(await a.listServices(scope)).join() === 'payments,users');
    expect(requests(r, 'ServiceListRequest')).toBe(listed);
    expect(requests(r, 'NamingFuzzyWatchRequest')).toBe(1);
  });

  it('watches a `*` scope with a pattern per namespace, and a namespace created later too', async () => {
    const r = await registry({ namespaces: [{ id: 'staging', name: 'staging', description: '' }] });
    add(r, 'orders', 'public', 'G1');
    add(r, 'ledger', 'staging', 'G2');
    const a = adapter(r, { serviceListPollIntervalMs: 100 });
    const all = { namespace: '*', group: '*' };
    expect(keys(await a.listServices(all))).toEqual(['public/G1/orders', 'staging/G2/ledger']);
    let calls = 0;
    a.watchServices(all, () => (calls += 1));
    await waitUntil(() => calls > 0 && a.stats().grpc?.fuzzyPatterns === 2);
    add(r, 'users', 'staging', 'G3');
    await waitUntil(async () => keys(await a.listServices(all)).includes('staging/G3/users'));
    r.store.createNamespace({ id: 'later', name: 'later', description: '' });
    add(r, 'indexer', 'later', 'G4');
    await waitUntil(async () => keys(await a.listServices(all)).join() === 'later/G4/indexer,public/G1/orders,staging/G2/ledger,staging/G3/users', { message: 'the new namespace watched' });
    expect(a.stats().grpc?.fuzzyPatterns).toBe(3);
    expect(r.grpc?.stats().fuzzyWatch).toMatchObject({ patterns: 3, watches: 3 });
  });

  it('tells the watchers which services came and went, keyed as listServices answers them', async () => {
    const r = await registry({ namespaces: [{ id: 'staging', name: 'staging', description: '' }] });
    add(r, 'orders', 'staging', 'G1');
    const a = adapter(r, { serviceListPollIntervalMs: 600_000 });
    const all = { namespace: '*', group: '*' };
    const changes: Array<ServicesChange | undefined> = [];
    a.watchServices(all, (change) => changes.push(change));
    // Nothing said about which services (the watcher lists) once the namespaces are known, and once their patterns are complete.
    await waitUntil(() => changes.length === 2 && a.servicesPushed(all), { message: 'the pushed set complete' });
    expect(changes).toEqual([undefined, undefined]);
    add(r, 'users', 'staging', 'G2');
    await waitUntil(() => changes.some((c) => c?.added.some((s) => s.name === 'users')), { message: "told of users" });
    expect(changes.find((c) => c !== undefined)).toEqual({ added: [{ namespace: 'staging', group: 'G2', name: 'users' }], removed: [] });
    expect(keys(await a.listServices(all))).toEqual(['staging/G1/orders', 'staging/G2/users']);
    drop(r, 'orders', 'staging', 'G1');
    await waitUntil(() => changes.some((c) => c?.removed.some((s) => s.name === 'orders')), { message: 'told of orders gone' });
    expect(changes.filter((c) => c !== undefined).flatMap((c) => c.removed)).toEqual([{ namespace: 'staging', group: 'G1', name: 'orders' }]);
  });

  it('after the registry restarts on the same ports, watches again with what it holds and picks up new services', async () => {
    let r = await registry();
    const { port, grpcPort } = r;
    add(r, 'orders');
    const a = adapter(r, { serviceListPollIntervalMs: 600_000 });
    let calls = 0;
    a.watchServices(scope, () => (calls += 1));
    await waitUntil(async () => calls > 0 && names(await a.listServices(scope)).join() === 'orders');
    await r.close();
    registries.splice(registries.indexOf(r), 1);
    // While the connection is down the pushed set is not complete: a list is an error, never a stale answer.
    await waitUntil(() => a.stats().grpc?.state !== 'ready');
    await expect(a.listServices(scope)).rejects.toThrow();
    r = await registry({ port, grpcPort: grpcPort as number });
    add(r, 'orders');
    add(r, 'fresh');
    await waitUntil(async () => names(await a.listServices(scope).catch(() => [])).join() === 'fresh,orders', { timeoutMs: 15_000, message: 'fresh after the restart' });
    expect(a.stats().grpc?.reconnects).toBe(1);
    // The restarted registry was told what the adapter holds, as not initializing: one DIFF (ADD fresh), no INIT and FINISH.
    expect(r.grpc?.stats().fuzzyWatch?.syncsSent).toBe(1);
    // Lists made while the set was not confirmed yet went to the server; from now on none does.
    const listed = requests(r, 'ServiceListRequest');
    add(r, 'later');
    await waitUntil(async () => names(await a.listServices(scope)).join() === 'fresh,later,orders');
    drop(r, 'fresh');
    await waitUntil(async () => names(await a.listServices(scope)).join() === 'later,orders');
    expect(requests(r, 'ServiceListRequest')).toBe(listed);
    expect(requests(r, 'NamingFuzzyWatchRequest')).toBe(1);
  });

  it('polls the service list where the server offers no fuzzy watch (Nacos 2.x)', async () => {
    const r = await registry({ grpc: { fuzzyWatch: false } });
    add(r, 'orders');
    const a = adapter(r, { serviceListPollIntervalMs: 100 });
    expect(names(await a.listServices(scope))).toEqual(['orders']);
    let calls = 0;
    a.watchServices(scope, () => (calls += 1));
    await waitUntil(() => a.stats().watchedServiceLists === 1);
    add(r, 'users');
    await waitUntil(() => calls > 0, { message: 'the poll saw users' });
    expect(names(await a.listServices(scope))).toEqual(['orders', 'users']);
    expect(a.stats().pushedServiceLists).toBe(0);
    expect(a.servicesPushed(scope)).toBe(false);
    expect(requests(r, 'NamingFuzzyWatchRequest')).toBe(0);
    expect(requests(r, 'ServiceListRequest')).toBeGreaterThan(2);
  });

  it('falls back to polling, saying which Nacos property to raise, when more services match than the server holds (50311)', async () => {
    const r = await registry({ grpc: { fuzzyWatchMaxServices: 2 } });
    for (const name of ['s1', 's2', 's3']) add(r, name);
    const { logger, lines } = capturingLogger();
    const a = adapter(r, { serviceListPollIntervalMs: 100 }, logger);
    let calls = 0;
    a.watchServices(scope, () => (calls += 1));
    await waitUntil(() => a.stats().watchedServiceLists === 1, { message: 'polling' });
    expect(a.stats().pushedServiceLists).toBe(0);
    // Never the capped set: the whole list.
    expect(names(await a.listServices(scope))).toEqual(['s1', 's2', 's3']);
    add(r, 's4');
    await waitUntil(async () => names(await a.listServices(scope)).length === 4);
    expect(lines.filter((l) => l.includes('nacos.naming.fuzzy.watch.max.pattern.match.service.count'))).toHaveLength(1);
    // The refused pattern was cancelled at the server.
    await waitUntil(() => r.grpc?.stats().fuzzyWatch?.patterns === 0);
  });

  it('falls back to polling when the server holds its most patterns (50310)', async () => {
    const r = await registry({ grpc: { fuzzyWatchMaxPatterns: 1 } });
    add(r, 'orders');
    add(r, 'ledger', 'public', 'PAYMENTS');
    const { logger, lines } = capturingLogger();
    const a = adapter(r, { serviceListPollIntervalMs: 100 }, logger);
    let first = 0;
    a.watchServices(scope, () => (first += 1));
    await waitUntil(() => first > 0 && a.stats().pushedServiceLists === 1);
    const payments = { namespace: 'public', group: 'PAYMENTS' };
    a.watchServices(payments, () => {});
    await waitUntil(() => a.stats().watchedServiceLists === 1);
    expect(names(await a.listServices(payments))).toEqual(['ledger']);
    expect(lines.filter((l) => l.includes('nacos.naming.fuzzy.watch.max.pattern.count'))).toHaveLength(1);
    expect(a.stats().pushedServiceLists).toBe(1);
  });
});
