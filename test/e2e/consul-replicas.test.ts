import Consul from 'consul';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNode, type NodeOptions, type RegsyncNode } from '../../src/node.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startConsulServer, type ConsulServer } from '../support/consul-server.js';
import { addRegistry, api, copiesIn, defineTask, persistent, startFixture, stopFixture, testLogger, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * Two regsync workers on one Redis, one shard served by both: the leader watches Consul with
 * blocking queries and beats the Nacos copies. When it stops, the other takes the shard over: its
 * own blocking queries bring the next change, the copies never lapse, and the copies it writes into
 * Consul are the same ones (one per instance, same service id), not a second set.
 */
describe('Consul across two regsync workers', () => {
  let fx: SyncFixture;
  let consulServer: ConsulServer;
  let consul: Consul;
  let nacos: RunningRegistry;
  const nodes: RegsyncNode[] = [];

  const leaderIndex = () => nodes.findIndex((n) => (n.coordinator?.ledShards() ?? []).includes(0));

  beforeAll(async () => {
    consulServer = await startConsulServer();
    consul = new Consul({ host: '127.0.0.1', port: consulServer.port });
    fx = await startFixture();
    // Nacos's own expiry (a copy goes unhealthy 15 s after its last beat); beats asked every 500 ms.
    nacos = await addRegistry(fx, 'nacos', { beatIntervalMs: 500 });
    const common: NodeOptions = { redisUrl: fx.redis.url, prefix: fx.prefix, logger: testLogger(), shards: 1, replicas: 2, leaseTtlMs: 2_000, confirmEmptyMs: 1_000 };
    for (let n = 0; n < 2; n += 1) nodes.push(await startNode({ ...common, listen: { host: '127.0.0.1', port: 0 } }));
    const url = nodes[0]?.url as string;
    for (const cluster of [
      { id: 'consul', kind: 'consul', endpoints: [consulServer.endpoint], options: { backoffMaxMs: 500 } },
      { id: 'nacos', kind: 'nacos', endpoints: [nacos.endpoint] },
    ]) {
      const res = await api(url, 'POST', '/api/v1/clusters', cluster);
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    }
  });
  afterAll(async () => {
    for (const node of nodes) await node.close();
    if (fx) await stopFixture(fx);
    consul?.destroy();
    await consulServer?.close();
  });

  it('hands the watch, the beats and the Consul copies over to the other worker when the leader stops', async () => {
    await waitUntil(() => leaderIndex() >= 0 && nodes.every((n) => n.coordinator?.soleReplica(0) === false), { message: 'a leader, and both workers serving the shard' });
    const url = nodes[0]?.url as string;
    await consul.agent.service.register({ name: 'web', id: 'web-1', address: '10.75.0.1', port: 8080, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
    nacos.store.register('public', 'DEFAULT_GROUP', 'orders', { ...persistent('10.75.1.1'), port: 9000 });
    // Only watches bring changes: no full sync within the test.
    await defineTask(url, 'c2n', 'consul', 'nacos', 'web', { options: { fullSyncIntervalMs: 3_600_000 } });
    await defineTask(url, 'n2c', 'nacos', 'consul', 'orders', { options: { fullSyncIntervalMs: 3_600_000 } });
    await waitUntil(() => copiesIn(nacos, 'web').length === 1 && copiesIn(nacos, 'web')[0]!.beats >= 2, { message: 'a beaten copy in Nacos' });
    await waitUntil(async () => (await consul.health.service({ service: 'orders', passing: true })).length === 1, { message: 'the copy in Consul' });
    const copyInConsul = consulServer.healthService('orders')[0]?.Service;

    const leader = leaderIndex();
    const survivor = nodes[1 - leader] as RegsyncNode;
    const beatsAtStop = copiesIn(nacos, 'web')[0]?.beats ?? 0;
    const stopped = performance.now();
    await nodes[leader]?.close();
    nodes.splice(leader, 1);
    await waitUntil(() => survivor.coordinator?.isLeading(0), { message: 'the other worker leads the shard' });
    const leading = performance.now();

    // The survivor's blocking queries bring the next changes, from either side.
    await consul.agent.service.register({ name: 'web', id: 'web-2', address: '10.75.0.2', port: 8080, check: { name: 'alive', ttl: '10m', status: 'passing' } as never });
    nacos.store.register('public', 'DEFAULT_GROUP', 'orders', { ...persistent('10.75.1.2'), port: 9000 });
    await waitUntil(() => copiesIn(nacos, 'web').length === 2, { message: 'the new Consul instance copied by the survivor' });
    console.log(`consul handover: the survivor led ${(leading - stopped).toFixed(0)} ms after the leader began to stop; a Consul change reached nacos ${(performance.now() - leading).toFixed(0)} ms later`);
    await waitUntil(async () => (await consul.health.service({ service: 'orders', passing: true })).length === 2, { message: 'the new Nacos instance copied by the survivor' });
    // The copies kept their beats through the handover, and the Consul copy is the same one.
    await waitUntil(() => copiesIn(nacos, 'web').every((c) => c.beats >= 1) && (copiesIn(nacos, 'web').find((c) => c.ip === '10.75.0.1')?.beats ?? 0) > beatsAtStop, { message: 'beats from the survivor' });
    expect(copiesIn(nacos, 'web').every((c) => c.healthy)).toBe(true);
    const orders = consulServer.healthService('orders');
    expect(orders.map((e) => `${e.Node.Node} ${e.Service.Address}`).sort()).toEqual(['regsync 10.75.1.1', 'regsync 10.75.1.2']);
    expect(orders.find((e) => e.Service.Address === '10.75.1.1')?.Service).toEqual(copyInConsul);
  });
});
