import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_ORIGIN, MARK_PATH, MARK_TASK } from '../../src/model/types.js';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import {
  addRegistry,
  api,
  copiesIn,
  countChanges,
  defineGrpcClusters,
  defineTask,
  instancesIn,
  nativesIn,
  publishNative,
  registerNative,
  startFixture,
  startSync,
  stopFixture,
  type NativeInstance,
  type PublishedNative,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** Pushes of a changed service go out 50 ms after the change instead of Nacos' 500 ms. */
const fastPush = { grpc: { pushMergeWindowMs: 50 } };
/** Ephemeral HTTP instances expire quickly: a copy that needs beats would be gone within a second. */
const shortExpiry = { expiry: { unhealthyAfterMs: 500, expireAfterMs: 1_000, sweepIntervalMs: 100 }, beatIntervalMs: 300 };

/** The gRPC connections regsync holds to a registry. */
function regsyncConnections(registry: RunningRegistry): number {
  return registry.grpc?.connections().filter((c) => c.setup.clientVersion === 'regsync').length ?? 0;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read API answers loosely
async function serviceStatus(url: string, task: string): Promise<any> {
  return (await api(url, 'GET', `/api/v1/tasks/${task}`)).body.status.services[0];
}

/** Waits until every service sync of the tasks has reconciled after `since`. */
async function reconciledSince(url: string, taskIds: string[], since: number): Promise<void> {
  await waitUntil(
    async () => {
      for (const id of taskIds) {
        const services = (await api(url, 'GET', `/api/v1/tasks/${id}`)).body.status.services as Array<{ lastSyncAt: string | null }>;
        if (services.length === 0 || services.some((s) => !s.lastSyncAt || Date.parse(s.lastSyncAt) < since)) return false;
      }
      return true;
    },
    { message: `tasks ${taskIds.join(',')} reconciled` },
  );
}

/** Records whether `service` in `registry` ever shows no copy from now on (a copy that expired before being beaten). */
function watchForGaps(registry: RunningRegistry, service: string): { gaps: () => number } {
  let gaps = 0;
  let present = copiesIn(registry, service).length > 0;
  registry.store.on('change', () => {
    const now = copiesIn(registry, service).length > 0;
    if (present && !now) gaps += 1;
    present = now;
  });
  return { gaps: () => gaps };
}

/** Waits until an unbeaten ephemeral HTTP instance in `registry` has expired: more than its expiry window has passed. */
async function anExpiryWindowPasses(registry: RunningRegistry): Promise<void> {
  const res = await fetch(`${registry.url}/nacos/v1/ns/instance?serviceName=canary&ip=10.69.9.9&port=1`, { method: 'POST' });
  expect(await res.text()).toBe('ok');
  await waitUntil(() => instancesIn(registry, 'canary').length === 0, { message: 'the unbeaten canary expired' });
}

describe('A <-> B over gRPC', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  const natives: PublishedNative[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', { ...fastPush, ...shortExpiry });
    b = await addRegistry(fx, 'b', { ...fastPush, ...shortExpiry });
    url = (await startSync(fx)).url as string;
    await defineGrpcClusters(url, fx);
    await defineTask(url, 'ab', 'a', 'b', 'orders');
    await defineTask(url, 'ba', 'b', 'a', 'orders');
  });
  afterAll(async () => {
    for (const n of natives) n.close();
    await stopFixture(fx);
  });

  it('copies an instance published in A to B, marked with its origin, and never back to A', async () => {
    natives.push(await publishNative(a, 'orders', '10.60.0.1', 8080, { v: '1' }));
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy in B' });
    expect(copiesIn(b, 'orders')[0]).toMatchObject({
      ip: '10.60.0.1',
      port: 8080,
      ephemeral: true,
      healthy: true,
      metadata: { v: '1', [MARK_ORIGIN]: 'a', [MARK_PATH]: 'a', [MARK_TASK]: 'ab' },
    });
    await waitUntil(async () => (await serviceStatus(url, 'ba'))?.lastSyncAt, { message: 'reverse task ran' });
    expect(copiesIn(a, 'orders')).toEqual([]);
    expect(instancesIn(a, 'orders').map((i) => i.ip)).toEqual(['10.60.0.1']);
  });

  it('holds the copy with regsync’s connection: published once, never beaten, alive past the expiry window', async () => {
    expect(regsyncConnections(b)).toBe(1);
    expect(copiesIn(b, 'orders')[0]).toMatchObject({ publishers: 1, beats: 0 });
    await anExpiryWindowPasses(b);
    expect(copiesIn(b, 'orders')).toHaveLength(1);
    expect(copiesIn(b, 'orders')[0]).toMatchObject({ ip: '10.60.0.1', healthy: true, publishers: 1, beats: 0 });
    expect(fx.node?.heartbeats.stats().entries).toBe(0);
    expect(b.grpc?.stats().requests.BatchInstanceRequest).toBeGreaterThan(0);
  });

  it('copies the other way too', async () => {
    natives.push(await publishNative(b, 'orders', '10.60.1.1', 8080));
    await waitUntil(() => copiesIn(a, 'orders').some((i) => i.ip === '10.60.1.1'), { message: 'copy in A' });
    expect(copiesIn(a, 'orders')[0]).toMatchObject({ publishers: 1, metadata: { [MARK_ORIGIN]: 'b', [MARK_PATH]: 'b', [MARK_TASK]: 'ba' } });
    expect(copiesIn(b, 'orders').map((i) => i.ip)).toEqual(['10.60.0.1']);
    expect(nativesIn(b, 'orders').map((i) => i.ip)).toEqual(['10.60.1.1']);
  });

  it('removes the copy when the connection that published the source instance closes', async () => {
    const second = await publishNative(a, 'orders', '10.60.0.2', 8080);
    await waitUntil(() => copiesIn(b, 'orders').some((i) => i.ip === '10.60.0.2'), { message: 'second copy' });
    second.close();
    await waitUntil(() => !instancesIn(a, 'orders').some((i) => i.ip === '10.60.0.2'), { message: 'gone from A with its connection' });
    await waitUntil(() => !copiesIn(b, 'orders').some((i) => i.ip === '10.60.0.2'), { message: 'copy gone from B' });
    expect(copiesIn(b, 'orders').map((i) => i.ip)).toEqual(['10.60.0.1']);

    // The last source instance goes: held until a second read confirms it, then removed.
    natives.shift()?.close();
    await waitUntil(() => copiesIn(b, 'orders').length === 0, { message: 'last copy removed' });
    expect(nativesIn(b, 'orders').map((i) => i.ip)).toEqual(['10.60.1.1']);
    expect(copiesIn(a, 'orders').map((i) => i.ip)).toEqual(['10.60.1.1']);
  });

  it('withdraws the copies at once when a task is paused, publishes them again on resume, and removes them when it is deleted', async () => {
    expect(copiesIn(a, 'orders').map((i) => i.ip)).toEqual(['10.60.1.1']);
    expect((await api(url, 'POST', '/api/v1/tasks/ba/pause')).status).toBe(200);
    await waitUntil(() => copiesIn(a, 'orders').length === 0, { message: 'copy withdrawn on pause' });
    expect(regsyncConnections(a)).toBe(1);
    expect((await api(url, 'POST', '/api/v1/tasks/ba/resume')).status).toBe(200);
    await waitUntil(() => copiesIn(a, 'orders').length === 1, { message: 'copy back after resume' });
    expect(copiesIn(a, 'orders')[0]).toMatchObject({ ip: '10.60.1.1', publishers: 1 });
    expect((await api(url, 'DELETE', '/api/v1/tasks/ba')).status).toBe(204);
    await waitUntil(() => copiesIn(a, 'orders').length === 0, { message: 'copy removed on delete' });
    expect(nativesIn(b, 'orders').map((i) => i.ip)).toEqual(['10.60.1.1']);
  });
});

describe('ring A -> B -> C -> A over gRPC', () => {
  let fx: SyncFixture;
  let url: string;
  let regs: RunningRegistry[];
  let native: PublishedNative | undefined;

  beforeAll(async () => {
    fx = await startFixture();
    regs = [await addRegistry(fx, 'a', fastPush), await addRegistry(fx, 'b', fastPush), await addRegistry(fx, 'c', fastPush)];
    url = (await startSync(fx)).url as string;
    await defineGrpcClusters(url, fx);
    await defineTask(url, 'ab', 'a', 'b', 'ring');
    await defineTask(url, 'bc', 'b', 'c', 'ring');
    await defineTask(url, 'ca', 'c', 'a', 'ring');
  });
  afterAll(async () => {
    native?.close();
    await stopFixture(fx);
  });

  it('holds one copy per cluster and writes nothing more once converged', async () => {
    const [a, b, c] = regs as [RunningRegistry, RunningRegistry, RunningRegistry];
    native = await publishNative(a, 'ring', '10.61.0.1', 1);
    await waitUntil(() => copiesIn(b, 'ring').length === 1 && copiesIn(c, 'ring').length === 1, { message: 'copies in B and C' });
    expect(copiesIn(b, 'ring')[0]?.metadata[MARK_PATH]).toBe('a');
    expect(copiesIn(c, 'ring')[0]?.metadata[MARK_PATH]).toBe('a,b');
    await reconciledSince(url, ['ab', 'bc', 'ca'], 0);
    expect(instancesIn(a, 'ring').map((i) => [i.ip, i.metadata[MARK_TASK]])).toEqual([['10.61.0.1', undefined]]);

    const writes = regs.map(countChanges);
    const publishes = () => regs.map((r) => r.grpc?.stats().requests.BatchInstanceRequest ?? 0);
    const publishesBefore = publishes();
    const since = Date.now();
    for (const id of ['ab', 'bc', 'ca']) expect((await api(url, 'POST', `/api/v1/tasks/${id}/resync`)).status).toBe(202);
    await reconciledSince(url, ['ab', 'bc', 'ca'], since);
    expect(writes.map((w) => w.count())).toEqual([0, 0, 0]);
    expect(publishes()).toEqual(publishesBefore);
    expect(regs.map((r) => instancesIn(r, 'ring').length)).toEqual([1, 1, 1]);
    expect([b, c].map((r) => copiesIn(r, 'ring')[0]?.publishers)).toEqual([1, 1]);
  });
});

describe('service "*" over gRPC', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  const natives = new Map<string, PublishedNative>();
  const copied = (): string[] =>
    b.store
      .listServices('public')
      .filter((s) => [...s.instances.values()].some((i) => i.metadata[MARK_TASK] === 'everything'))
      .map((s) => s.name)
      .sort();

  beforeAll(async () => {
    fx = await startFixture();
    // Empty services leave A's service list quickly, as they do in Nacos (after a while).
    a = await addRegistry(fx, 'a', { ...fastPush, expiry: { emptyServiceTtlMs: 300, sweepIntervalMs: 100 } });
    b = await addRegistry(fx, 'b', fastPush);
    for (const name of ['s1', 's2', 's3']) natives.set(name, await publishNative(a, name, '10.62.0.1', 8080, { name }));
    url = (await startSync(fx)).url as string;
    await defineGrpcClusters(url, fx, {}, { serviceListPollIntervalMs: 300 });
    await defineTask(url, 'everything', 'a', 'b', '*');
  });
  afterAll(async () => {
    for (const n of natives.values()) n.close();
    await stopFixture(fx);
  });

  it('copies every service of the group', async () => {
    await waitUntil(() => copied().join() === 's1,s2,s3', { message: 'three services copied' });
    expect(copiesIn(b, 's2')).toMatchObject([{ ip: '10.62.0.1', publishers: 1, metadata: { name: 's2', [MARK_TASK]: 'everything' } }]);
  });

  it('picks up a service that appears', async () => {
    natives.set('s4', await publishNative(a, 's4', '10.62.0.4', 8080));
    await waitUntil(() => copied().join() === 's1,s2,s3,s4', { message: 's4 copied' });
  });

  it('drops a service that vanishes, with its copy and its service sync', async () => {
    natives.get('s2')?.close();
    natives.delete('s2');
    await waitUntil(() => copied().join() === 's1,s3,s4', { message: 'copy of s2 gone' });
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/everything')).body.status.services.length === 3, {
      message: 'service sync of s2 forgotten',
    });
    expect(copiesIn(b, 's1')).toHaveLength(1);
  });
});

describe('auth over gRPC', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  let native: PublishedNative | undefined;
  const users = new Map([['nacos', 's3cret']]);

  beforeAll(async () => {
    fx = await startFixture();
    // Tokens live 2 s: regsync has to renew its login while it syncs.
    a = await addRegistry(fx, 'a', { ...fastPush, users, tokenTtlSeconds: 2 });
    b = await addRegistry(fx, 'b', { ...fastPush, users, tokenTtlSeconds: 2 });
    url = (await startSync(fx)).url as string;
    await defineGrpcClusters(url, fx, { username: 'nacos', password: 's3cret' });
  });
  afterAll(async () => {
    native?.close();
    await stopFixture(fx);
  });

  it('syncs with the cluster’s credentials', async () => {
    native = await publishNative(a, 'orders', '10.63.0.1', 8080, {}, { username: 'nacos', password: 's3cret' });
    await defineTask(url, 'ab', 'a', 'b', 'orders');
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy in B' });
    expect(copiesIn(b, 'orders')[0]).toMatchObject({ ip: '10.63.0.1', publishers: 1, metadata: { [MARK_TASK]: 'ab' } });
    expect(regsyncConnections(b)).toBe(1);
  });

  it('shows a wrong password in the task status', async () => {
    const res = await api(url, 'POST', '/api/v1/clusters', {
      id: 'b-bad',
      kind: 'nacos',
      endpoints: [b.endpoint],
      username: 'nacos',
      password: 'not-the-password',
      options: { apiVersion: 'grpc', grpcPort: b.grpcPort },
    });
    expect(res.status).toBe(201);
    await defineTask(url, 'a-bad', 'a', 'b-bad', 'orders');
    await waitUntil(async () => (await serviceStatus(url, 'a-bad'))?.lastError, { message: 'error in the status' });
    const status = await serviceStatus(url, 'a-bad');
    expect(status.lastError).toMatch(/b-bad/);
    expect(status.lastError).toMatch(/auth|login|password|credential|403/i);
    // The good task goes on.
    expect(copiesIn(b, 'orders').map((i) => i.metadata[MARK_TASK])).toEqual(['ab']);
  });

  it('goes on syncing once the tokens it started with have expired', async () => {
    // A token taken now expires no earlier than any token regsync holds from before.
    const login = await fetch(`${b.url}/nacos/v1/auth/login`, { method: 'POST', body: new URLSearchParams({ username: 'nacos', password: 's3cret' }) });
    const { accessToken } = (await login.json()) as { accessToken: string };
    const accepted = async () => (await fetch(`${b.url}/nacos/v1/ns/instance/list?serviceName=orders&accessToken=${accessToken}`)).status === 200;
    expect(await accepted()).toBe(true);
    await waitUntil(async () => !(await accepted()), { message: 'the token expired' });
    const second = await publishNative(a, 'orders', '10.63.0.2', 8080, {}, { username: 'nacos', password: 's3cret' });
    try {
      await waitUntil(() => copiesIn(b, 'orders').some((i) => i.ip === '10.63.0.2'), { message: 'copy made with a renewed token' });
      expect((await serviceStatus(url, 'ab')).lastError).toBeNull();
    } finally {
      second.close();
    }
  });
});

describe('a registry without gRPC, apiVersion auto', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  let native: PublishedNative | undefined;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', fastPush);
    b = await addRegistry(fx, 'b', { ...shortExpiry, grpcPort: false });
    url = (await startSync(fx)).url as string;
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'a', kind: 'nacos', endpoints: [a.endpoint], options: { apiVersion: 'grpc', grpcPort: a.grpcPort } })).status).toBe(201);
    // No grpcPort: auto probes the HTTP port + 1000, where nothing answers.
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'b', kind: 'nacos', endpoints: [b.endpoint], options: { apiVersion: 'auto', heartbeatIntervalMs: 300 } })).status).toBe(201);
    await defineTask(url, 'ab', 'a', 'b', 'orders');
  });
  afterAll(async () => {
    native?.close();
    await stopFixture(fx);
  });

  it('falls back to HTTP v1: copies registered and kept alive by beats', async () => {
    native = await publishNative(a, 'orders', '10.64.0.1', 8080);
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy in B' });
    const gaps = watchForGaps(b, 'orders');
    const copy = () => copiesIn(b, 'orders')[0];
    expect(copy()?.publishers).toBeUndefined();
    // 10 beats at 300 ms span three times B's 1 s expiry.
    await waitUntil(() => (copy()?.beats ?? 0) >= 10, { timeoutMs: 15_000, message: '10 beats on the copy' });
    expect(copy()).toMatchObject({ ip: '10.64.0.1', healthy: true, metadata: { [MARK_TASK]: 'ab' } });
    expect(gaps.gaps()).toBe(0);
    expect(fx.node?.heartbeats.stats().entries).toBe(1);
    expect((await serviceStatus(url, 'ab')).lastError).toBeNull();
  });
});

describe('gRPC and HTTP clusters mixed', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  let grpcNative: PublishedNative | undefined;
  let httpNative: NativeInstance | undefined;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', { ...fastPush, ...shortExpiry });
    // B serves gRPC too, but regsync is told to speak v1 to it.
    b = await addRegistry(fx, 'b', { ...fastPush, ...shortExpiry });
    url = (await startSync(fx)).url as string;
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'a', kind: 'nacos', endpoints: [a.endpoint], options: { apiVersion: 'grpc', grpcPort: a.grpcPort } })).status).toBe(201);
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'b', kind: 'nacos', endpoints: [b.endpoint], options: { apiVersion: 'v1', heartbeatIntervalMs: 300 } })).status).toBe(201);
    await defineTask(url, 'ab', 'a', 'b', 'orders');
    await defineTask(url, 'ba', 'b', 'a', 'orders');
  });
  afterAll(async () => {
    grpcNative?.close();
    httpNative?.stop();
    await stopFixture(fx);
  });

  it('copies a gRPC source into an HTTP destination, beaten on HTTP', async () => {
    grpcNative = await publishNative(a, 'orders', '10.65.0.1', 8080);
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy in B' });
    const gaps = watchForGaps(b, 'orders');
    const copy = () => copiesIn(b, 'orders')[0];
    await waitUntil(() => (copy()?.beats ?? 0) >= 10, { timeoutMs: 15_000, message: '10 beats on the copy' });
    expect(copy()).toMatchObject({ ip: '10.65.0.1', healthy: true, metadata: { [MARK_ORIGIN]: 'a', [MARK_TASK]: 'ab' } });
    expect(copy()?.publishers).toBeUndefined();
    expect(gaps.gaps()).toBe(0);
    expect(regsyncConnections(b)).toBe(0);
  });

  it('copies an HTTP source into a gRPC destination, published there', async () => {
    httpNative = await registerNative(() => b, 'orders', '10.65.1.1', 8080);
    await waitUntil(() => copiesIn(a, 'orders').length === 1, { message: 'copy in A' });
    await anExpiryWindowPasses(a);
    expect(copiesIn(a, 'orders')).toMatchObject([{ ip: '10.65.1.1', healthy: true, publishers: 1, beats: 0, metadata: { [MARK_ORIGIN]: 'b', [MARK_TASK]: 'ba' } }]);
    expect(regsyncConnections(a)).toBe(1);
    // Only the HTTP copy in B is beaten; neither copy went back.
    expect(fx.node?.heartbeats.stats().entries).toBe(1);
    expect(copiesIn(b, 'orders').map((i) => i.ip)).toEqual(['10.65.0.1']);
    expect(nativesIn(a, 'orders').map((i) => i.ip)).toEqual(['10.65.0.1']);
  });
});

describe('hub A -> C <- B over gRPC, C restarted', () => {
  let fx: SyncFixture;
  let c: RunningRegistry;
  let url: string;
  const natives: PublishedNative[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    await addRegistry(fx, 'a', fastPush);
    await addRegistry(fx, 'b', fastPush);
    c = await addRegistry(fx, 'c', fastPush);
    url = (await startSync(fx)).url as string;
    await defineGrpcClusters(url, fx);
    await defineTask(url, 'ac', 'a', 'c', 'orders');
    await defineTask(url, 'bc', 'b', 'c', 'orders');
  });
  afterAll(async () => {
    for (const n of natives) n.close();
    await stopFixture(fx);
  });

  it('merges both tasks’ copies of one service over one connection, before and after C restarts', async () => {
    const [a, b] = [fx.registries.get('a'), fx.registries.get('b')] as [RunningRegistry, RunningRegistry];
    natives.push(await publishNative(a, 'orders', '10.66.0.1', 8080), await publishNative(b, 'orders', '10.66.1.1', 8080));
    const both = () => copiesIn(c, 'orders').map((i) => `${i.ip} ${i.metadata[MARK_TASK]} ${i.publishers}`).sort();
    await waitUntil(() => copiesIn(c, 'orders').length === 2, { message: 'both copies in C' });
    expect(both()).toEqual(['10.66.0.1 ac 1', '10.66.1.1 bc 1']);
    expect(regsyncConnections(c)).toBe(1);

    const { port, grpcPort } = c;
    await c.close();
    c = await startRegistry({ port, grpcPort: grpcPort as number, ...fastPush });
    fx.registries.set('c', c);
    await waitUntil(() => copiesIn(c, 'orders').length === 2, { timeoutMs: 15_000, message: 'both copies back in C' });
    expect(both()).toEqual(['10.66.0.1 ac 1', '10.66.1.1 bc 1']);
    expect(regsyncConnections(c)).toBe(1);
  });
});

describe('a destination switched from v1 to gRPC', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  let native: PublishedNative | undefined;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', fastPush);
    b = await addRegistry(fx, 'b', { ...fastPush, ...shortExpiry });
    url = (await startSync(fx)).url as string;
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'a', kind: 'nacos', endpoints: [a.endpoint], options: { apiVersion: 'grpc', grpcPort: a.grpcPort } })).status).toBe(201);
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'b', kind: 'nacos', endpoints: [b.endpoint], options: { apiVersion: 'v1', heartbeatIntervalMs: 300 } })).status).toBe(201);
    await defineTask(url, 'ab', 'a', 'b', 'orders');
  });
  afterAll(async () => {
    native?.close();
    await stopFixture(fx);
  });

  it('ends with the copy published once over gRPC, not beaten and shown twice', async () => {
    native = await publishNative(a, 'orders', '10.67.0.1', 8080);
    await waitUntil(() => (copiesIn(b, 'orders')[0]?.beats ?? 0) >= 1, { message: 'beaten copy in B' });
    const res = await api(url, 'PUT', '/api/v1/clusters/b', { id: 'b', kind: 'nacos', endpoints: [b.endpoint], options: { apiVersion: 'grpc', grpcPort: b.grpcPort } });
    expect(res.status).toBeLessThan(300);
    await waitUntil(() => copiesIn(b, 'orders').some((i) => i.publishers === 1), { message: 'copy published over gRPC' });
    // The HTTP registration is no longer beaten: it goes, by deregistration or expiry.
    await anExpiryWindowPasses(b);
    expect(copiesIn(b, 'orders')).toMatchObject([{ ip: '10.67.0.1', publishers: 1, healthy: true }]);
    expect(fx.node?.heartbeats.stats().entries).toBe(0);
  });
});
