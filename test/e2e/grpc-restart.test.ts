import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_TASK } from '../../src/model/types.js';
import { startNode, type RegsyncNode } from '../../src/node.js';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import {
  addRegistry,
  api,
  copiesIn,
  defineGrpcClusters,
  defineTask,
  instancesIn,
  publishNative,
  startFixture,
  startSync,
  stopFixture,
  testLogger,
  type PublishedNative,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { startRegsync, type RegsyncProcess } from '../support/regsync-process.js';
import { TestGrpcClient, wireHost } from '../support/grpc-client.js';
import { waitUntil } from '../support/wait-until.js';

const fastPush = { grpc: { pushMergeWindowMs: 50 } };

/** What `registry` shows for `service`: `ip:port publishers`, one entry per instance. */
function shown(registry: RunningRegistry, service: string): string[] {
  return instancesIn(registry, service)
    .map((i) => `${i.ip}:${i.port} ${i.publishers ?? 'http'}`)
    .sort();
}

/** The gRPC connections regsync holds to a registry. */
function regsyncConnections(registry: RunningRegistry): number {
  return registry.grpc?.connections().filter((c) => c.setup.clientVersion === 'regsync').length ?? 0;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read API answers loosely
async function serviceStatus(url: string, task: string): Promise<any> {
  return (await api(url, 'GET', `/api/v1/tasks/${task}`)).body.status.services[0];
}

describe('destination registry restarted on the same ports', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  const natives: PublishedNative[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', fastPush);
    b = await addRegistry(fx, 'b', fastPush);
    url = (await startSync(fx)).url as string;
    await defineGrpcClusters(url, fx);
    await defineTask(url, 'ab', 'a', 'b', 'orders');
  });
  afterAll(async () => {
    for (const n of natives) n.close();
    await stopFixture(fx);
  });

  it('gets every copy published again once, with no change at the source', async () => {
    natives.push(await publishNative(a, 'orders', '10.70.0.1', 8080), await publishNative(a, 'orders', '10.70.0.2', 8080));
    await waitUntil(() => copiesIn(b, 'orders').length === 2, { message: 'copies in B' });
    const sourcePublishes = a.grpc?.stats().requests.InstanceRequest;

    const { port, grpcPort } = b;
    await b.close();
    // In memory: B comes back empty, as a restarted Nacos forgets ephemeral instances.
    b = await startRegistry({ port, grpcPort: grpcPort as number, ...fastPush });
    fx.registries.set('b', b);
    expect(instancesIn(b, 'orders')).toEqual([]);

    await waitUntil(() => copiesIn(b, 'orders').length === 2, { timeoutMs: 15_000, message: 'copies back in B' });
    expect(shown(b, 'orders')).toEqual(['10.70.0.1:8080 1', '10.70.0.2:8080 1']);
    expect(copiesIn(b, 'orders').every((i) => i.metadata[MARK_TASK] === 'ab' && i.beats === 0)).toBe(true);
    expect(regsyncConnections(b)).toBe(1);
    expect(b.grpc?.stats().publishSets).toBe(1);
    // Nothing happened at the source: no publish, the same connections.
    expect(a.grpc?.stats().requests.InstanceRequest).toBe(sourcePublishes);
    expect(instancesIn(a, 'orders')).toHaveLength(2);

    // A full reconcile afterwards finds nothing to do twice.
    const since = Date.now();
    expect((await api(url, 'POST', '/api/v1/tasks/ab/resync')).status).toBe(202);
    await waitUntil(async () => Date.parse((await serviceStatus(url, 'ab'))?.lastSyncAt ?? '0') >= since, { message: 'resync ran' });
    expect(shown(b, 'orders')).toEqual(['10.70.0.1:8080 1', '10.70.0.2:8080 1']);
    expect((await serviceStatus(url, 'ab')).lastError).toBeNull();
  });

  it('catches up with source changes made while it was down', async () => {
    const { port, grpcPort } = b;
    await b.close();
    natives.push(await publishNative(a, 'orders', '10.70.0.3', 8080));
    natives.shift()?.close();
    await waitUntil(async () => String((await serviceStatus(url, 'ab'))?.lastError).includes('destination b'), { message: 'the write failure shows' });
    b = await startRegistry({ port, grpcPort: grpcPort as number, ...fastPush });
    fx.registries.set('b', b);
    await waitUntil(() => shown(b, 'orders').join() === '10.70.0.2:8080 1,10.70.0.3:8080 1', { timeoutMs: 15_000, message: 'B matches A' });
    await waitUntil(async () => (await serviceStatus(url, 'ab'))?.lastError === null, { timeoutMs: 15_000, message: 'status clear' });
    expect(shown(b, 'orders')).toEqual(['10.70.0.2:8080 1', '10.70.0.3:8080 1']);
    expect(regsyncConnections(b)).toBe(1);
  });
});

describe('regsync restarted on the same Redis', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let native: PublishedNative | undefined;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', fastPush);
    b = await addRegistry(fx, 'b', fastPush);
  });
  afterAll(async () => {
    native?.close();
    await stopFixture(fx);
  });

  it('loses the copies with its connection, publishes them again from the new node, keeps tasks and statuses', async ({ annotate }) => {
    const first = await startSync(fx);
    await defineGrpcClusters(first.url as string, fx);
    await defineTask(first.url as string, 'ab', 'a', 'b', 'orders');
    native = await publishNative(a, 'orders', '10.71.0.1', 8080);
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy in B' });
    await waitUntil(async () => (await serviceStatus(first.url as string, 'ab'))?.lastSyncAt, { message: 'first reconcile recorded' });
    const before = await serviceStatus(first.url as string, 'ab');

    // Every time B shows the copy appear or vanish, from here on.
    const seen: Array<{ at: number; copies: number }> = [];
    b.store.on('change', () => {
      const copies = copiesIn(b, 'orders').length;
      if (copies !== seen.at(-1)?.copies) seen.push({ at: Date.now(), copies });
    });

    await first.close();
    fx.node = undefined;
    // The copies lived with the old node's connection.
    await waitUntil(() => copiesIn(b, 'orders').length === 0, { message: 'copy gone with the old connection' });
    expect(regsyncConnections(b)).toBe(0);

    const second = await startSync(fx);
    const url = second.url as string;
    const tasks = (await api(url, 'GET', '/api/v1/tasks')).body.items as Array<{ id: string; state: string }>;
    expect(tasks.map((t) => [t.id, t.state])).toEqual([['ab', 'running']]);
    const after = await serviceStatus(url, 'ab');
    expect(after).toMatchObject({ lastError: null, sourceInstances: before.sourceInstances });
    expect(Date.parse(after.lastSyncAt)).toBeGreaterThanOrEqual(Date.parse(before.lastSyncAt));

    await waitUntil(() => copiesIn(b, 'orders').length === 1, { timeoutMs: 15_000, message: 'copy back from the new node' });
    expect(shown(b, 'orders')).toEqual(['10.71.0.1:8080 1']);
    expect(regsyncConnections(b)).toBe(1);
    expect(seen.map((s) => s.copies)).toEqual([0, 1]);
    await annotate(`copies were gone from B for ${(seen[1]?.at ?? 0) - (seen[0]?.at ?? 0)} ms`);
  });
});

describe('two regsync replicas, one stopped', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let second: RegsyncNode | undefined;
  let native: PublishedNative | undefined;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', fastPush);
    b = await addRegistry(fx, 'b', fastPush);
  });
  afterAll(async () => {
    native?.close();
    await second?.close();
    await stopFixture(fx);
  });

  it('publishes every copy from both replicas, so that the copy stays while one of them goes', async () => {
    const first = await startSync(fx);
    await defineGrpcClusters(first.url as string, fx);
    await defineTask(first.url as string, 'ab', 'a', 'b', 'orders');
    native = await publishNative(a, 'orders', '10.72.0.1', 8080);
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy in B' });

    // Two replicas per shard (the default): the second worker publishes the same set.
    second = await startNode({ redisUrl: fx.redis.url, prefix: fx.prefix, roles: ['worker'], logger: testLogger(), confirmEmptyMs: 1_000 });
    await waitUntil(() => copiesIn(b, 'orders')[0]?.publishers === 2, { timeoutMs: 15_000, message: 'published by both replicas' });
    expect(regsyncConnections(b)).toBe(2);
    expect(shown(b, 'orders')).toEqual(['10.72.0.1:8080 2']);

    const seen: number[] = [];
    b.store.on('change', () => seen.push(copiesIn(b, 'orders').length));
    await first.close();
    fx.node = undefined;
    await waitUntil(() => regsyncConnections(b) === 1, { message: 'first replica’s connection gone' });
    expect(shown(b, 'orders')).toEqual(['10.72.0.1:8080 1']);
    expect(seen.filter((n) => n === 0)).toEqual([]);
  });
});

describe('source registry restarted on the same ports', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  const natives: PublishedNative[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', fastPush);
    b = await addRegistry(fx, 'b', fastPush);
    url = (await startSync(fx)).url as string;
    await defineGrpcClusters(url, fx);
    await defineTask(url, 'ab', 'a', 'b', 'orders');
  });
  afterAll(async () => {
    for (const n of natives) n.close();
    await stopFixture(fx);
  });

  it('subscribes again: the instances published in the new registry are copied', async () => {
    natives.push(await publishNative(a, 'orders', '10.73.0.1', 8080));
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy in B' });
    const { port, grpcPort } = a;
    await a.close();
    a = await startRegistry({ port, grpcPort: grpcPort as number, ...fastPush });
    fx.registries.set('a', a);
    // The application's SDK connects again and publishes its instance anew, with a second one.
    natives.push(await publishNative(a, 'orders', '10.73.0.1', 8080), await publishNative(a, 'orders', '10.73.0.2', 8080));
    await waitUntil(() => copiesIn(b, 'orders').length === 2, { timeoutMs: 15_000, message: 'both copies in B' });
    expect(shown(b, 'orders')).toEqual(['10.73.0.1:8080 1', '10.73.0.2:8080 1']);
    await waitUntil(() => regsyncConnections(a) === 1, { message: 'regsync subscribed to the new A' });
    // Pushes from the new A reach regsync: a removal there shows in B.
    natives.pop()?.close();
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'removal pushed' });
    expect(shown(b, 'orders')).toEqual(['10.73.0.1:8080 1']);
    await waitUntil(async () => (await serviceStatus(url, 'ab'))?.lastError === null, { message: 'status clear' });
  });
});


describe('kill -9 of one of two regsync processes, and its replacement', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  const procs: RegsyncProcess[] = [];
  let app: TestGrpcClient | undefined;
  /** Enough services that, over 32 shards, some land on shards the replacement takes over. */
  const services = Array.from({ length: 40 }, (_, n) => `svc-${n}`);
  const up = ['up', '--redis', '', '--listen', '127.0.0.1:0', '--shards', '32'];
  /** Publisher counts of the copies in B, one per service (0: no copy). */
  const publishers = () => services.map((s) => copiesIn(b, s).reduce((n, i) => n + (i.publishers ?? 0), 0));
  /** True once both processes publish every copy; throws with the publisher counts otherwise (the timeout shows them). */
  const publishedByBoth = () => {
    const counts = publishers();
    if (counts.every((n) => n === 2)) return true;
    throw new Error(`publishers per service: ${services.map((s, n) => `${s}=${counts[n]}`).filter((_, n) => counts[n] !== 2).join(' ')}`);
  };
  /** Services that showed no copy in B at some moment since `watchGaps()`, and the longest time one was gone. */
  const vanished = new Set<string>();
  const goneSince = new Map<string, number>();
  let longestGapMs = 0;
  const watchGaps = () =>
    b.store.on('change', () => {
      for (const s of services) {
        const gone = copiesIn(b, s).length === 0;
        if (gone && !goneSince.has(s)) goneSince.set(s, Date.now());
        if (gone) vanished.add(s);
        if (!gone && goneSince.has(s)) {
          longestGapMs = Math.max(longestGapMs, Date.now() - (goneSince.get(s) as number));
          goneSince.delete(s);
        }
      }
    });

  beforeAll(async () => {
    fx = await startFixture();
    up[2] = fx.redis.url;
    a = await addRegistry(fx, 'a', fastPush);
    b = await addRegistry(fx, 'b', fastPush);
    // One application connection publishing an instance of every service.
    app = await TestGrpcClient.connect(a.grpcEndpoint as string);
    for (const [n, s] of services.entries()) {
      const answer = await app.naming('InstanceRequest', s, { type: 'registerInstance', instance: wireHost(`10.74.0.${n + 1}`, 8080) });
      expect(answer.body.success).toBe(true);
    }
    procs.push(await startRegsync(up), await startRegsync(up));
    const url = (procs[0] as RegsyncProcess).url;
    await defineGrpcClusters(url, fx);
    await defineTask(url, 'all', 'a', 'b', '*');
    // Two replicas per shard (the default) and two processes: both publish every copy.
    try {
      await waitUntil(() => publishedByBoth(), { timeoutMs: 30_000, message: 'every copy published by both processes' });
    } catch (err) {
      for (const p of procs) console.error(`--- regsync output\n${p.output()}`);
      throw err;
    }
  }, 60_000);
  afterAll(async () => {
    app?.close();
    for (const p of procs) await p.stop();
    await stopFixture(fx);
  });

  it('removes no copy and shows no address twice when one process is killed', async () => {
    watchGaps();
    await (procs[0] as RegsyncProcess).proc.kill();
    await waitUntil(() => regsyncConnections(b) === 1, { message: 'the killed process’s connection gone' });
    expect(publishers().every((n) => n === 1)).toBe(true);
    expect(services.map((s) => copiesIn(b, s).length)).toEqual(services.map(() => 1));
    expect([...vanished]).toEqual([]);
  });

  it('keeps every copy while a replacement, started before the killed process is forgotten, takes shards over', async ({ annotate }) => {
    procs[0] = await startRegsync(up);
    await waitUntil(() => publishers().every((n) => n === 2), { timeoutMs: 30_000, message: 'every copy published by both live processes' });
    expect(regsyncConnections(b)).toBe(2);
    if (vanished.size > 0) await annotate(`${vanished.size} of ${services.length} services showed no copy, for up to ${longestGapMs} ms`);
    // A shard whose replicas became the dead process and the new one was withdrawn by the survivor before the
    // new one had published it.
    expect([...vanished]).toEqual([]);
  });
});
