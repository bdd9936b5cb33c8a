import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNode, type NodeOptions, type RegsyncNode } from '../../src/node.js';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { startRedisSentinel, type RedisSentinelSet } from '../support/redis-sentinel.js';
import { api, copiesIn, defineTask, instancesIn, registerNative, testLogger, type NativeInstance } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * Ephemeral HTTP instances expire quickly: a copy not beaten for 2.5 s is gone, well within the
 * outage a failover causes (the sentinels take a second to call the primary down, then vote).
 */
const shortExpiry = { expiry: { unhealthyAfterMs: 1_500, expireAfterMs: 2_500, sweepIntervalMs: 100 }, beatIntervalMs: 300 };
const SHARDS = 2;

/**
 * From now on, every moment a copy of `service` in `registry` seen before is missing or one is
 * unhealthy, and every copy whose beat count went down (registered anew); each change of the
 * registry is looked at.
 */
function watchCopies(registry: RunningRegistry, service: string): { gaps: string[]; reRegistered: string[] } {
  const gaps: string[] = [];
  const reRegistered: string[] = [];
  const beats = new Map<string, number>();
  registry.store.on('change', () => {
    const copies = copiesIn(registry, service);
    for (const ip of beats.keys()) if (!copies.some((c) => c.ip === ip)) gaps.push(`${ip} missing`);
    for (const copy of copies) {
      if (!copy.healthy) gaps.push(`${copy.ip} unhealthy`);
      const before = beats.get(copy.ip) ?? 0;
      if (copy.beats < before) reRegistered.push(copy.ip);
      beats.set(copy.ip, copy.beats);
    }
  });
  return { gaps, reRegistered };
}

/*
 * Redis behind Sentinel (a primary, a replica, three sentinels), kill -9 of the primary under
 * steady sync between two registries whose ephemeral copies expire a second after their last beat.
 * Two workers (one with the API) lead the shards. While the sentinels fail over, the leaders keep
 * beating what they lead (the lease grace); when the new primary answers, leadership goes on and
 * the sync with it: no copy vanishes or turns unhealthy, none is registered anew, changes made
 * during and after the failover are copied, and the tasks and their status are intact.
 */
describe('Redis Sentinel: kill -9 of the primary under steady sync', () => {
  let sentinel: RedisSentinelSet;
  let a: RunningRegistry;
  let b: RunningRegistry;
  const nodes: RegsyncNode[] = [];
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    sentinel = await startRedisSentinel({ downAfterMs: 3_000 });
    a = await startRegistry({ port: 0, ...shortExpiry });
    b = await startRegistry({ port: 0, ...shortExpiry });
    const common: NodeOptions = {
      redisUrl: sentinel.url,
      logger: testLogger(),
      shards: SHARDS,
      replicas: 2,
      leaseTtlMs: 2_000,
      redisGraceMs: 20_000,
      confirmEmptyMs: 1_000,
    };
    nodes.push(await startNode({ ...common, listen: { host: '127.0.0.1', port: 0 } }));
    nodes.push(await startNode({ ...common, roles: ['worker'] }));
  }, 60_000);
  afterAll(async () => {
    for (const n of natives) n.stop();
    for (const node of nodes) await node.close();
    await a?.close();
    await b?.close();
    await sentinel?.cleanup();
  });

  it('keeps every copy alive through the failover, copies the changes made during and after it, and leads on without duplicates', async () => {
    const url = nodes[0]?.url as string;
    for (const [id, registry] of [['a', a], ['b', b]] as const) {
      expect((await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [registry.endpoint] })).status).toBe(201);
    }
    await defineTask(url, 'ab', 'a', 'b', 'orders');
    for (const ip of ['10.90.0.1', '10.90.0.2']) natives.push(await registerNative(() => a, 'orders', ip, 8080));
    await waitUntil(() => copiesIn(b, 'orders').length === 2 && copiesIn(b, 'orders').every((c) => c.beats >= 3), { timeoutMs: 20_000, message: 'two beaten copies in B' });
    await waitUntil(() => ledShards().length === SHARDS, { message: 'every shard led' });
    const leasesBefore = await nodes[0]!.coordinator!.snapshot();

    let leasesAfter: typeof leasesBefore | undefined;
    const watch = watchCopies(b, 'orders');
    // Whether a leader was seen past its lease's deadline but still keeping its copies alive, and
    // every moment two nodes kept one shard's copies alive.
    let graceSeen = false;
    const doubled: string[] = [];
    const sampler = setInterval(() => {
      for (let s = 0; s < SHARDS; s += 1) {
        const keeping = nodes.filter((n) => n.coordinator?.keepsAlive(s));
        if (keeping.length > 1) doubled.push(`shard ${s}`);
        if (keeping.some((n) => !n.coordinator?.isLeading(s))) graceSeen = true;
      }
    }, 20);
    try {
      const failover = sentinel.killPrimaryAndWaitForFailover();
      // A change while Redis fails over: the source's watch sees it, the queue takes it once Redis is back.
      natives.push(await registerNative(() => a, 'orders', '10.90.0.3', 8080));
      const newPrimary = await failover;
      expect(newPrimary).toBe(sentinel.nodes[1]?.port);
      await waitUntil(() => copiesIn(b, 'orders').length === 3, { timeoutMs: 30_000, message: 'the change made during the failover copied' });

      // A change after the failover.
      natives.push(await registerNative(() => a, 'orders', '10.90.0.4', 8080));
      await waitUntil(() => copiesIn(b, 'orders').length === 4, { timeoutMs: 30_000, message: 'the change made after the failover copied' });

      // Leadership went on: one leader per shard, as Redis says, and the copies still beaten.
      await waitUntil(() => ledShards().length === SHARDS && nodes.every((n) => n.coordinator?.ledShards().every((s) => n.coordinator?.isLeading(s))), {
        message: 'every shard led again within its lease',
      });
      leasesAfter = await nodes[0]!.coordinator!.snapshot();
      for (const shard of leasesAfter) expect(nodes.find((n) => n.coordinator?.ledShards().includes(shard.shard))?.id).toBe(shard.leader);
      const beats = new Map(copiesIn(b, 'orders').map((c) => [c.ip, c.beats]));
      await waitUntil(() => copiesIn(b, 'orders').every((c) => c.beats > (beats.get(c.ip) ?? 0)), { message: 'every copy beaten after the failover' });
    } finally {
      clearInterval(sampler);
    }
    expect(watch.gaps).toEqual([]);
    expect(graceSeen).toBe(true);
    expect(doubled).toEqual([]);
    // The leaders whose leases ran out during the failover took them back: same leader, same token.
    expect(leasesAfter?.map((l) => [l.shard, l.leader, l.token])).toEqual(leasesBefore.map((l) => [l.shard, l.leader, l.token]));
    expect(watch.reRegistered).toEqual([]);
    // One copy per instance, nothing else.
    expect(instancesIn(b, 'orders').map((i) => i.ip).sort()).toEqual(['10.90.0.1', '10.90.0.2', '10.90.0.3', '10.90.0.4']);

    // Tasks, clusters and status intact.
    const task = (await api(url, 'GET', '/api/v1/tasks/ab')).body;
    expect(task).toMatchObject({ id: 'ab', source: 'a', destination: 'b', state: 'running' });
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/ab')).body.status.services[0]?.destinationInstances === 4, { message: 'the status counts four copies' });
    const status = (await api(url, 'GET', '/api/v1/tasks/ab')).body.status.services[0];
    expect(status.lastError).toBeNull();
    expect((await api(url, 'GET', '/api/v1/clusters')).body.items.map((c: { id: string }) => c.id).sort()).toEqual(['a', 'b']);
  }, 120_000);

  /** Every shard led by some node, each once. */
  function ledShards(): number[] {
    return nodes.flatMap((n) => n.coordinator?.ledShards() ?? []).sort();
  }
});
