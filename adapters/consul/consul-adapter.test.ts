import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { WatchEvent } from '../../src/model/adapter.js';
import { reachFailureOf, type Problem } from '../../src/model/service-status.js';
import type { ClusterSpec, Instance, ServiceKey } from '../../src/model/index.js';
import { startConsulServer, type ConsulServer, type ConsulServerOptions } from '../../test/support/consul-server.js';
import { freePort } from '../../test/support/ports.js';
import { makeCertificates, type TestCertificates } from '../../test/support/redis-tls.js';
import { makeTempDir, removeTempDir } from '../../test/support/server-process.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { ConsulApplyError } from './consul-apply-error.js';
import { createConsulAdapter, type ConsulAdapter } from './consul-adapter.js';
import { copyServiceId } from './consul-meta.js';
import { ConsulRequestError } from './consul-request-error.js';

const silent = pino({ level: 'silent' });

const key = (name: string): ServiceKey => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });

const instance = (ip: string, port = 8080, over: Partial<Instance> = {}): Instance => ({
  ip,
  port,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: {},
  ...over,
});

const servers: ConsulServer[] = [];
const adapters: ConsulAdapter[] = [];
const cleanups: Array<() => Promise<void> | void> = [];

afterEach(async () => {
  for (const a of adapters.splice(0)) await a.close();
  for (const s of servers.splice(0)) await s.close();
  for (const c of cleanups.splice(0)) await c();
});

async function server(options: ConsulServerOptions = {}): Promise<ConsulServer> {
  const s = await startConsulServer(options);
  servers.push(s);
  return s;
}

function connect(endpoints: string[], options: Record<string, unknown> = {}, spec: Partial<ClusterSpec> = {}): ConsulAdapter {
  const adapter = createConsulAdapter(
    { id: 'c1', kind: 'consul', endpoints, labels: {}, ...spec, options: { requestTimeoutMs: 2_000, backoffMaxMs: 200, blockingWaitMs: 5_000, ...options } },
    { logger: silent },
  );
  adapters.push(adapter);
  return adapter;
}

/** A service another tool registered on a node of its own, passing. */
function registerNative(s: ConsulServer, name: string, ip: string, port = 8080, node = 'node-a'): void {
  s.catalogRegister({
    Node: node,
    Address: '10.200.0.1',
    Service: { ID: `${name}-${ip}-${port}`, Service: name, Address: ip, Port: port },
    Check: { CheckID: `check-${name}-${ip}-${port}`, Name: 'alive', Status: 'passing', ServiceID: `${name}-${ip}-${port}` },
  });
}

/** The error a promise rejects with. */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected a rejection');
}

const healthReads = (s: ConsulServer, name: string) => s.requests.filter((r) => r.method === 'GET' && r.path === `/v1/health/service/${name}`);

/** A watch's calls, kept for the test to look at. */
function recorder(): { events: Array<WatchEvent | undefined>; onChange: (event?: WatchEvent) => void } {
  const events: Array<WatchEvent | undefined> = [];
  return { events, onChange: (event) => events.push(event) };
}

describe('ConsulAdapter: ACL token', () => {
  it('rejects reads with a wrong token as consul-auth-failed, which the cluster view shows as auth_failed', async () => {
    const s = await server({ tokens: { 'the-right-token': 'write' } });
    const adapter = connect([s.endpoint], {}, { password: 'a-wrong-token' });
    for (const read of [() => adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' }), () => adapter.listInstances(key('orders'))]) {
      const err = await rejection(read());
      expect(err).toBeInstanceOf(ConsulRequestError);
      expect(err).toMatchObject({ code: 'consul-auth-failed', status: 403, clusterId: 'c1' });
      expect((err as Error).message).toMatch(/^consul cluster c1: GET \/v1\/(catalog\/services|health\/service\/orders): 403 ACL not found$/);
      expect((err as Error).message).not.toContain('a-wrong-token');
      // The problem the engine records for a failed source read (reconciler: `withCause`).
      const problem: Problem = { code: 'source_unreadable', side: 'source', cluster: 'c1', message: `cannot read source c1: ${(err as Error).message}`, cause: (err as ConsulRequestError).code };
      expect(reachFailureOf(problem)).toBe('auth_failed');
      // The message alone says it too (a 403).
      expect(reachFailureOf({ ...problem, cause: undefined })).toBe('auth_failed');
    }
    // The token was sent, as X-Consul-Token.
    expect(s.requests.length).toBeGreaterThan(0);
    expect(s.requests.every((r) => r.token === 'a-wrong-token')).toBe(true);
  });

  it("reads and writes with the right token, the cluster's password", async () => {
    const s = await server({ tokens: { 'the-right-token': 'write', 'a-read-token': 'read' } });
    registerNative(s, 'orders', '10.1.0.1');
    const adapter = connect([s.endpoint], {}, { password: 'the-right-token' });
    expect(await adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).toEqual([key('orders')]);
    expect((await adapter.listInstances(key('orders'))).map((i) => i.ip)).toEqual(['10.1.0.1']);
    await adapter.apply(key('orders'), { upsert: [instance('10.1.0.2')], remove: [] });
    expect(s.healthService('orders').map((e) => `${e.Node.Node}/${e.Service.Address}`)).toEqual(['node-a/10.1.0.1', 'regsync/10.1.0.2']);
    expect(s.requests.every((r) => r.token === 'the-right-token')).toBe(true);

    // A token that may only read: writes are refused with the code, and Consul's reason.
    const reader = connect([s.endpoint], {}, { password: 'a-read-token' });
    expect(await reader.listInstances(key('orders'))).toHaveLength(2);
    const err = await rejection(reader.apply(key('orders'), { upsert: [instance('10.1.0.3')], remove: [] }));
    expect(err).toBeInstanceOf(ConsulApplyError);
    const failure = (err as ConsulApplyError).failures[0]?.error;
    expect(failure).toBeInstanceOf(ConsulRequestError);
    expect(failure).toMatchObject({ code: 'consul-auth-failed', status: 403 });
    expect((failure as Error).message).toContain("lacks permission 'service:write'");
  });
});

describe('ConsulAdapter: endpoints', () => {
  it('fails over to the next endpoint when one does not answer, and sticks to the one that answered', async () => {
    const first = await server();
    const second = await server();
    registerNative(first, 'orders', '10.1.0.1');
    registerNative(second, 'orders', '10.2.0.1');
    await first.stop();
    const adapter = connect([first.endpoint, second.endpoint]);
    expect((await adapter.listInstances(key('orders'))).map((i) => i.ip)).toEqual(['10.2.0.1']);

    // The first answers again; the adapter keeps asking the second, which answered last.
    await first.start();
    for (let n = 0; n < 3; n += 1) expect((await adapter.listInstances(key('orders'))).map((i) => i.ip)).toEqual(['10.2.0.1']);
    await adapter.apply(key('orders'), { upsert: [instance('10.2.0.2')], remove: [] });
    expect(first.requests).toEqual([]);
    expect(healthReads(second, 'orders')).toHaveLength(4);

    // Until the second stops answering: then the first serves, and keeps serving.
    await second.stop();
    expect((await adapter.listInstances(key('orders'))).map((i) => i.ip)).toEqual(['10.1.0.1']);
    await second.start();
    expect((await adapter.listInstances(key('orders'))).map((i) => i.ip)).toEqual(['10.1.0.1']);
    expect(healthReads(second, 'orders')).toHaveLength(4);
  });

  it('rejects as consul-unreachable, naming the endpoints, when none answers', async () => {
    const adapter = connect([`127.0.0.1:${await freePort()}`, `127.0.0.1:${await freePort()}`]);
    const err = await rejection(adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' }));
    expect(err).toBeInstanceOf(ConsulRequestError);
    expect(err).toMatchObject({ code: 'consul-unreachable' });
    expect((err as Error).message).toMatch(/ECONNREFUSED/);
  });

  it('does not try another endpoint for an answer with an error status', async () => {
    const first = await server({ tokens: { t: 'write' } });
    const second = await server();
    const adapter = connect([first.endpoint, second.endpoint], {}, { password: 'wrong' });
    expect(await rejection(adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' }))).toMatchObject({ code: 'consul-auth-failed' });
    expect(second.requests).toEqual([]);
  });
});

describe('ConsulAdapter: Enterprise namespace and partition', () => {
  it('sends neither ns nor partition unless configured (Consul CE refuses both)', async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1');
    const adapter = connect([s.endpoint]);
    await adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' });
    const r = recorder();
    const stop = adapter.watch(key('orders'), r.onChange);
    await waitUntil(() => r.events.length === 1 && s.waitingQueries() === 1, { message: 'the watch to block' });
    await adapter.apply(key('orders'), { upsert: [instance('10.1.0.2')], remove: [] });
    // The blocking query is answered by the write (a request is listed once answered).
    await waitUntil(() => r.events.length === 2, { message: 'the watch told of the write' });
    stop();
    await adapter.apply(key('orders'), { upsert: [], remove: [instance('10.1.0.2')] });
    expect(s.requests.map((q) => `${q.method} ${q.path}${q.blocking ? ' (blocking)' : ''}`).sort()).toEqual([
      'GET /v1/catalog/services',
      'GET /v1/health/service/orders',
      'GET /v1/health/service/orders (blocking)',
      'PUT /v1/catalog/deregister',
      'PUT /v1/catalog/register',
    ]);
    for (const req of s.requests) {
      expect(req.status).toBe(200);
      expect(req.query).not.toHaveProperty('ns');
      expect(req.query).not.toHaveProperty('partition');
      expect(req.query).not.toHaveProperty('dc');
    }
  });

  it('sends them, and the datacenter, on every read when configured', async () => {
    const s = await server();
    const adapter = connect([s.endpoint], { consulNamespace: 'team-a', partition: 'p1', datacenter: 'dc1' });
    // The test Consul is CE: it answers 400, as Consul CE does.
    const err = await rejection(adapter.listInstances(key('orders')));
    expect(err).toMatchObject({ code: 'consul-refused', status: 400 });
    expect((err as Error).message).toContain('Namespaces are a Consul Enterprise feature');
    expect(await rejection(adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' }))).toMatchObject({ code: 'consul-refused' });
    expect(s.requests.map((r) => r.query)).toEqual([
      { ns: 'team-a', partition: 'p1', dc: 'dc1' },
      { ns: 'team-a', partition: 'p1', dc: 'dc1' },
    ]);
  });

  it('asks for stale reads only when configured', async () => {
    const s = await server();
    await connect([s.endpoint]).listServices({ namespace: 'public', group: 'DEFAULT_GROUP' });
    await connect([s.endpoint], { stale: true }).listServices({ namespace: 'public', group: 'DEFAULT_GROUP' });
    expect(s.requests.map((r) => r.query)).toEqual([{}, { stale: '' }]);
  });

  it('reads another datacenter only when it names one', async () => {
    const s = await server({ datacenter: 'east' });
    const adapter = connect([s.endpoint], { datacenter: 'west' });
    expect(await rejection(adapter.listInstances(key('orders')))).toMatchObject({ code: 'consul-server-error', status: 500 });
    expect(s.requests[0]?.query).toEqual({ dc: 'west' });
  });
});

describe('ConsulAdapter: which services', () => {
  it("hides Consul's own service `consul` by default, and shows it when ignoreServices is emptied", async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1');
    const adapter = connect([s.endpoint]);
    expect(await adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).toEqual([key('orders')]);
    expect(await adapter.listServices({ namespace: '*', group: '*' })).toEqual([key('orders')]);
    expect(await adapter.listInstances(key('consul'))).toEqual([]);
    const err = await rejection(adapter.apply(key('consul'), { upsert: [instance('10.1.0.9')], remove: [] }));
    expect(err).toBeInstanceOf(ConsulApplyError);
    expect((err as Error).message).toContain('service consul is in ignoreServices');
    expect(s.healthService('consul').map((e) => e.Node.Node)).toEqual(['consul-agent-1']);
    // Nothing was asked of Consul about it.
    expect(healthReads(s, 'consul')).toEqual([]);

    const all = connect([s.endpoint], { ignoreServices: [] });
    expect(await all.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).toEqual([key('consul'), key('orders')]);
    expect((await all.listInstances(key('consul'))).map((i) => `${i.ip}:${i.port}`)).toEqual(['127.0.0.1:8300']);
  });

  it("keys services under the cluster's namespace and group only", async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1');
    const adapter = connect([s.endpoint], { group: 'CONSUL' }, { namespace: 'prod' });
    expect(await adapter.listServices({ namespace: 'prod', group: 'CONSUL' })).toEqual([{ namespace: 'prod', group: 'CONSUL', name: 'orders' }]);
    expect(await adapter.listServices({ namespace: 'public', group: '*' })).toEqual([]);
    expect(await adapter.listInstances({ namespace: 'prod', group: 'DEFAULT_GROUP', name: 'orders' })).toEqual([]);
    expect(await adapter.listInstances({ namespace: 'prod', group: 'CONSUL', name: 'orders' })).toHaveLength(1);
  });
});

describe('ConsulAdapter: reads', () => {
  it('skips entries it cannot read as instances and names each in readIssues', async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1');
    s.catalogRegister({ Node: 'node-b', Address: '10.200.0.2', Service: { ID: 'orders-noport', Service: 'orders', Address: '10.1.0.9' } });
    const adapter = connect([s.endpoint]);
    expect((await adapter.listInstances(key('orders'))).map((i) => i.ip)).toEqual(['10.1.0.1']);
    expect(adapter.readIssues(key('orders'))).toEqual(['service "orders-noport" on node "node-b" has no port (0)']);
    s.catalogDeregister({ Node: 'node-b' });
    await adapter.listInstances(key('orders'));
    expect(adapter.readIssues(key('orders'))).toEqual([]);
  });
});

describe('ConsulAdapter: writes', () => {
  it('reads a copy back exactly as written, and writing it again changes nothing in Consul', async () => {
    const s = await server();
    const adapter = connect([s.endpoint]);
    const copy = instance('10.1.0.7', 9090, {
      weight: 2.5,
      ephemeral: false,
      cluster: 'SH',
      metadata: { 'regsync.origin': 'nacos-a', 'regsync.path': 'nacos-a', 'regsync.task': 't1', 'spring.boot.version': '3.2', '版本': '二', 'consul.tags': 'env=prod,v1' },
    });
    await adapter.apply(key('orders'), { upsert: [copy], remove: [] });
    expect(await adapter.listInstances(key('orders'))).toEqual([copy]);
    const [entry] = s.healthService('orders');
    expect(entry?.Node.Node).toBe('regsync');
    expect(entry?.Service.Tags).toEqual(['env=prod', 'v1']);
    expect(entry?.Checks.map((c) => `${c.CheckID}=${c.Status}`)).toEqual([`regsync:${copyServiceId('orders', copy)}=passing`]);
    const index = s.index();
    await adapter.apply(key('orders'), { upsert: [copy], remove: [] });
    expect(s.index()).toBe(index);
  });

  it('writes every copy it can and names the ones Consul would refuse', async () => {
    const s = await server();
    const adapter = connect([s.endpoint]);
    const good = instance('10.1.0.1');
    const bad = instance('10.1.0.2', 8080, { metadata: { big: 'x'.repeat(513) } });
    const err = await rejection(adapter.apply(key('orders'), { upsert: [bad, good], remove: [] }));
    expect(err).toBeInstanceOf(ConsulApplyError);
    expect((err as ConsulApplyError).failures.map((f) => f.target)).toEqual(['instance 10.1.0.2:8080#DEFAULT']);
    expect((err as Error).message).toContain("longer than Consul's 512 bytes");
    expect(s.healthService('orders').map((e) => e.Service.Address)).toEqual(['10.1.0.1']);
  });
});

describe('ConsulAdapter: removals', () => {
  it('refuses to remove an instance registered on another node, and deregisters nothing', async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1', 8080, 'node-a');
    const adapter = connect([s.endpoint]);
    const [native] = await adapter.listInstances(key('orders'));
    expect(native).toBeDefined();
    const err = await rejection(adapter.apply(key('orders'), { upsert: [], remove: [native as Instance] }));
    expect(err).toBeInstanceOf(ConsulApplyError);
    expect((err as ConsulApplyError).failures).toHaveLength(1);
    expect((err as ConsulApplyError).failures[0]).toMatchObject({ op: 'deregister', target: 'instance 10.1.0.1:8080#DEFAULT' });
    expect((err as Error).message).toContain("registered on node node-a, not regsync's regsync: left alone");
    expect(s.requests.filter((r) => r.path === '/v1/catalog/deregister')).toEqual([]);
    expect(s.healthService('orders').map((e) => e.Node.Node)).toEqual(['node-a']);
  });

  it("reads its own copy at an address consul-k8s's registration also holds, so its task can remove it, and never removes consul-k8s's", async () => {
    const s = await server();
    const adapter = connect([s.endpoint]);
    await adapter.apply(key('web'), { upsert: [instance('10.1.0.1', 8080, { metadata: { 'regsync.task': 't1' } })], remove: [] });
    s.catalogRegister({
      Node: 'k8s-sync',
      Address: '127.0.0.1',
      NodeMeta: { 'external-source': 'kubernetes' },
      Service: { ID: 'web-0a1b2c3d4e5f', Service: 'web', Address: '10.1.0.1', Port: 8080, Tags: ['k8s'], Meta: { 'external-source': 'kubernetes', 'external-k8s-ns': 'default' } },
    });
    const read = await adapter.listInstances(key('web'));
    expect(read).toHaveLength(1);
    expect(read[0]?.metadata).toEqual({ 'regsync.task': 't1' });
    expect(adapter.readIssues(key('web'))).toEqual(['10.1.0.1:8080#DEFAULT is registered on nodes k8s-sync and regsync; read the one on regsync']);
    await adapter.apply(key('web'), { upsert: [], remove: read });
    expect(s.healthService('web').map((e) => e.Node.Node)).toEqual(['k8s-sync']);
    // What is left is consul-k8s's, on its node: a removal of it is refused.
    const left = await adapter.listInstances(key('web'));
    const err = await rejection(adapter.apply(key('web'), { upsert: [], remove: left }));
    expect((err as Error).message).toContain("registered on node k8s-sync, not regsync's regsync: left alone");
    expect(s.healthService('web').map((e) => e.Node.Node)).toEqual(['k8s-sync']);
  });

  it("removes a copy of its own, and only on regsync's node, even when nothing was read first", async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1', 8080, 'node-a');
    const writer = connect([s.endpoint]);
    await writer.apply(key('orders'), { upsert: [instance('10.1.0.2')], remove: [] });
    expect(s.healthService('orders').map((e) => e.Service.ID)).toEqual(['orders-10.1.0.1-8080', copyServiceId('orders', instance('10.1.0.2'))]);
    // A fresh adapter (another replica) that read nothing: removals go to regsync's node by the stable id.
    const other = connect([s.endpoint]);
    await other.apply(key('orders'), { upsert: [], remove: [instance('10.1.0.2'), instance('10.1.0.1')] });
    expect(s.healthService('orders').map((e) => `${e.Node.Node}/${e.Service.Address}`)).toEqual(['node-a/10.1.0.1']);
  });
});

describe('ConsulAdapter: watches', () => {
  it('shares one blocking query per service between watches, each told of the first read and of changes', async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1');
    const adapter = connect([s.endpoint]);
    const a = recorder();
    const b = recorder();
    const stopA = adapter.watch(key('orders'), a.onChange);
    const stopB = adapter.watch(key('orders'), b.onChange);
    await waitUntil(() => a.events.length === 1 && b.events.length === 1 && s.waitingQueries() === 1, { message: 'both watches to get their first read and one query to block' });
    expect(a.events[0]?.firstRead?.map((i) => i.ip)).toEqual(['10.1.0.1']);
    expect(b.events[0]?.firstRead?.map((i) => i.ip)).toEqual(['10.1.0.1']);
    // A later watch gets the last read as its first, without a query of its own.
    const c = recorder();
    const stopC = adapter.watch(key('orders'), c.onChange);
    await waitUntil(() => c.events.length === 1, { message: 'the third watch to get its first read' });
    expect(c.events[0]?.firstRead?.map((i) => i.ip)).toEqual(['10.1.0.1']);
    expect(healthReads(s, 'orders').filter((r) => !r.blocking)).toHaveLength(1);
    expect(s.waitingQueries()).toBe(1);

    registerNative(s, 'orders', '10.1.0.2');
    await waitUntil(() => a.events.length === 2 && b.events.length === 2 && c.events.length === 2, { message: 'every watch told of the change' });
    expect([a.events[1], b.events[1], c.events[1]]).toEqual([undefined, undefined, undefined]);
    await waitUntil(() => s.waitingQueries() === 1, { message: 'one query to block again' });
    expect(healthReads(s, 'orders').filter((r) => !r.blocking)).toHaveLength(1);

    // Unsubscribing one keeps the query for the others; the last one ends it.
    stopA();
    stopB();
    registerNative(s, 'orders', '10.1.0.3');
    await waitUntil(() => c.events.length === 3, { message: 'the remaining watch told of the change' });
    expect(a.events).toHaveLength(2);
    expect(b.events).toHaveLength(2);
    stopC();
    await waitUntil(() => s.waitingQueries() === 0, { message: 'the blocking query to end' });
  });

  it('calls back only when the instances change, not for every answer', async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1');
    registerNative(s, 'payments', '10.3.0.1');
    const adapter = connect([s.endpoint]);
    const r = recorder();
    adapter.watch(key('orders'), r.onChange);
    await waitUntil(() => r.events.length === 1 && s.waitingQueries() === 1, { message: 'the watch to block' });
    const answered = healthReads(s, 'orders').length;
    // A write that moves the service's index without changing what it reads (a check's output).
    s.catalogRegister({ Node: 'node-a', SkipNodeUpdate: true, Check: { CheckID: 'check-orders-10.1.0.1-8080', Name: 'alive', Status: 'passing', ServiceID: 'orders-10.1.0.1-8080', Output: 'still fine' } });
    await waitUntil(() => healthReads(s, 'orders').length > answered && s.waitingQueries() === 1, { message: 'the query answered and blocking again' });
    expect(r.events).toHaveLength(1);
    s.setCheckStatus('node-a', 'check-orders-10.1.0.1-8080', 'critical');
    await waitUntil(() => r.events.length === 2, { message: 'the watch told of the health change' });
  });

  it('uses blocking queries (index and wait) after the first read, which waits on nothing', async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1');
    const adapter = connect([s.endpoint], { blockingWaitMs: 7_000 });
    const r = recorder();
    adapter.watch(key('orders'), r.onChange);
    await waitUntil(() => r.events.length === 1 && s.waitingQueries() === 1, { message: 'the watch to block' });
    registerNative(s, 'orders', '10.1.0.2');
    await waitUntil(() => r.events.length === 2 && s.waitingQueries() === 1, { message: 'the change seen and the watch blocking again' });
    const reads = healthReads(s, 'orders');
    expect(reads.length).toBeGreaterThanOrEqual(2);
    expect(reads[0]?.query).toEqual({});
    for (const read of reads.slice(1)) {
      expect(read.query.wait).toBe('7s');
      expect(Number(read.query.index)).toBeGreaterThan(0);
    }
    // The first blocking query waits on the index of the first answer.
    expect(reads[1]?.blocking).toBe(true);
  });

  it('never waits on index 0: a server that answers index 0 is asked to wait on 1', async () => {
    // Consul's blocking-query rule for a server that ever answers X-Consul-Index: 0 (the test Consul never does).
    const queries: Array<Record<string, string>> = [];
    const zero: Server = createServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (url.pathname === '/v1/health/service/orders') queries.push(Object.fromEntries(url.searchParams));
      res.writeHead(200, { 'Content-Type': 'application/json', 'X-Consul-Index': '0' });
      res.end('[]');
    });
    await new Promise<void>((resolve) => zero.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => zero.close(() => resolve())));
    const adapter = connect([`127.0.0.1:${(zero.address() as AddressInfo).port}`], { blockingMinIntervalMs: 20 });
    const r = recorder();
    const stop = adapter.watch(key('orders'), r.onChange);
    await waitUntil(() => queries.length >= 4, { message: 'a few queries' });
    stop();
    expect(queries[0]).toEqual({});
    for (const q of queries.slice(1)) expect(q).toMatchObject({ index: '1', wait: '5s' });
    // Answers that change nothing call back once, with the first read.
    expect(r.events).toEqual([{ firstRead: [] }]);
  });

  it('starts over when the index goes backwards (a snapshot restore), and still hears later changes', async () => {
    const s = await server({ startIndex: 100 });
    registerNative(s, 'orders', '10.1.0.1');
    const adapter = connect([s.endpoint]);
    const r = recorder();
    adapter.watch(key('orders'), r.onChange);
    await waitUntil(() => r.events.length === 1 && s.waitingQueries() === 1, { message: 'the watch to block' });
    // The waiting query is listed once answered.
    const before = healthReads(s, 'orders').length;
    expect(s.index()).toBeGreaterThan(100);

    s.resetIndex(3);
    // The waiting query is answered with index 3; the next asks without an index, then one blocks on 3.
    await waitUntil(() => s.waitingQueries() === 1 && healthReads(s, 'orders').length >= before + 2, { message: 'the watch to block again after the restore' });
    const after = healthReads(s, 'orders').slice(before);
    expect(Number(after[0]?.query.index)).toBeGreaterThan(100);
    expect(after[1]?.query).toEqual({});
    await adapter.listInstances(key('orders'));
    expect(s.waitingQueries()).toBe(1);
    expect(r.events).toHaveLength(1);

    // A change after the restore carries an index lower than any seen before it: still heard.
    registerNative(s, 'orders', '10.1.0.2');
    await waitUntil(() => r.events.length === 2, { message: 'the watch told of the change after the restore' });
    expect(s.index()).toBeLessThan(100);
    expect((await adapter.listInstances(key('orders'))).map((i) => i.ip)).toEqual(['10.1.0.1', '10.1.0.2']);
  });

  it('keeps watching through an outage: reads fail meanwhile, and a change made while down is heard after', async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1');
    const adapter = connect([s.endpoint]);
    const r = recorder();
    adapter.watch(key('orders'), r.onChange);
    await waitUntil(() => r.events.length === 1 && s.waitingQueries() === 1, { message: 'the watch to block' });
    await s.stop();
    // A read fails rather than answering nothing.
    expect(await rejection(adapter.listInstances(key('orders')))).toMatchObject({ code: 'consul-unreachable' });
    registerNative(s, 'orders', '10.1.0.2');
    await s.start();
    await waitUntil(() => r.events.length === 2, { message: 'the watch told of the change made while Consul was down' });
    expect(r.events[1]).toBeUndefined();
    expect((await adapter.listInstances(key('orders'))).map((i) => i.ip)).toEqual(['10.1.0.1', '10.1.0.2']);
  });

  it('tells a service-list watch when services come and go', async () => {
    const s = await server();
    const adapter = connect([s.endpoint]);
    let calls = 0;
    adapter.watchServices?.({ namespace: 'public', group: 'DEFAULT_GROUP' }, () => (calls += 1));
    await waitUntil(() => s.waitingQueries() === 1, { message: 'the list watch to block' });
    registerNative(s, 'orders', '10.1.0.1');
    await waitUntil(() => calls === 1, { message: 'told of the new service' });
    s.catalogDeregister({ Node: 'node-a', ServiceID: 'orders-10.1.0.1-8080' });
    await waitUntil(() => calls === 2, { message: 'told of the service gone' });
  });

  it('close() ends every blocking query and refuses further calls', async () => {
    const s = await server();
    registerNative(s, 'orders', '10.1.0.1');
    registerNative(s, 'payments', '10.3.0.1');
    const adapter = connect([s.endpoint]);
    adapter.watch(key('orders'), () => {});
    adapter.watch(key('payments'), () => {});
    adapter.watchServices?.({ namespace: 'public', group: 'DEFAULT_GROUP' }, () => {});
    await waitUntil(() => s.waitingQueries() === 3, { message: 'three queries blocking' });
    await adapter.close();
    await waitUntil(() => s.waitingQueries() === 0, { message: 'every blocking query ended' });
    expect(await rejection(adapter.listInstances(key('orders')))).toMatchObject({ code: 'consul-closed' });
    expect(() => adapter.watch(key('orders'), () => {})).toThrow(ConsulRequestError);
    await adapter.close();
  });
});

describe('ConsulAdapter: TLS', () => {
  let certs: TestCertificates;
  beforeAll(() => {
    certs = makeCertificates(makeTempDir('regsync-consul-tls-'));
  });
  afterAll(() => removeTempDir(certs.dir));

  async function tlsServer(): Promise<{ s: ConsulServer; c: TestCertificates }> {
    const c = certs;
    const s = await server({ tls: { key: readFileSync(c.serverKey, 'utf8'), cert: readFileSync(c.serverCert, 'utf8') } });
    registerNative(s, 'orders', '10.1.0.1');
    return { s, c };
  }

  it('connects over HTTPS with the CA of tlsCaFile, reads and writes', async () => {
    const { s, c } = await tlsServer();
    const adapter = connect([s.endpoint], { tlsCaFile: c.ca });
    expect((await adapter.listInstances(key('orders'))).map((i) => i.ip)).toEqual(['10.1.0.1']);
    await adapter.apply(key('orders'), { upsert: [instance('10.1.0.2')], remove: [] });
    expect(s.healthService('orders')).toHaveLength(2);
    // By the name in the certificate too.
    const byName = connect([s.endpoint], { tlsCaFile: c.ca, tlsServerName: 'localhost' });
    expect(await byName.listInstances(key('orders'))).toHaveLength(2);
  });

  it('refuses a server whose certificate it cannot verify, naming the certificate problem', async () => {
    const { s, c } = await tlsServer();
    const noCa = connect([s.endpoint], { scheme: 'https' });
    const err = await rejection(noCa.listInstances(key('orders')));
    expect(err).toBeInstanceOf(ConsulRequestError);
    expect(err).toMatchObject({ code: 'consul-unreachable' });
    expect((err as Error).message).toMatch(/: 127\.0\.0\.1:\d+: UNABLE_TO_VERIFY_LEAF_SIGNATURE \(unable to verify the first certificate\)$/);
    expect(s.requests).toEqual([]);

    const wrongName = connect([s.endpoint], { tlsCaFile: c.ca, tlsServerName: 'consul.example.com' });
    const named = await rejection(wrongName.listInstances(key('orders')));
    expect((named as Error).message).toContain("ERR_TLS_CERT_ALTNAME_INVALID (Hostname/IP does not match certificate's altnames: Host: consul.example.com.");

    // Plain HTTP to an HTTPS agent gets no answer it can read.
    const plain = connect([s.endpoint]);
    expect(await rejection(plain.listInstances(key('orders')))).toBeInstanceOf(ConsulRequestError);
    // tlsSkipVerify accepts any certificate (tests only).
    const skip = connect([s.endpoint], { tlsSkipVerify: true });
    expect(await skip.listInstances(key('orders'))).toHaveLength(1);
  });

  it('refuses a tlsCaFile it cannot read when the adapter is built, naming the option', async () => {
    expect(() => connect(['127.0.0.1:8501'], { tlsCaFile: '/nonexistent/ca.pem' })).toThrow(/invalid options\.tlsCaFile: cannot read \/nonexistent\/ca\.pem/);
  });
});
