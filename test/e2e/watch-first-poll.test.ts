import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createNacosAdapter } from '../../adapters/nacos/index.js';
import type { AdapterFactory } from '../../src/engine/adapter-pool.js';
import { startNode, type RegsyncNode } from '../../src/node.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { addRegistry, copiesIn, defineClusters, defineTask, startFixture, startSync, stopFixture, testLogger, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * The engine tells a source watch whether a read follows in this process (its first poll may then
 * come later: the reconcile's read subscribes in its place): so where the worker is the only live
 * replica of the service's shard, and not where another worker may run the reconcile.
 */
describe('watches told whether a read follows here', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let second: RegsyncNode | undefined;
  const watched: Array<{ node: string; service: string; readFollows: boolean | undefined }> = [];

  /** The Nacos adapter, recording every watch and what it was told. */
  const recording =
    (node: string): AdapterFactory =>
    (spec, deps) => {
      const adapter = createNacosAdapter(spec, deps);
      const watch = adapter.watch.bind(adapter);
      adapter.watch = (service, onChange, options) => {
        watched.push({ node, service: service.name, readFollows: options?.readFollows });
        return watch(service, onChange, options);
      };
      return adapter;
    };

  const seed = (service: string, ip: string): void => {
    a.store.register('public', 'DEFAULT_GROUP', service, { ip, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {} });
  };

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
  });
  afterAll(async () => {
    await second?.close();
    await stopFixture(fx);
  });

  it('says so while this worker is alone, and no longer once a second worker serves the shards', async () => {
    const first = await startSync(fx, testLogger(), { adapters: { nacos: recording('first') } });
    const url = first.url as string;
    await defineClusters(url, fx);
    seed('orders', '10.31.0.1');
    await defineTask(url, 'orders', 'a', 'b', 'orders');
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'orders copied by the lone worker' });
    const alone = watched.filter((w) => w.service === 'orders');
    expect(alone.length).toBeGreaterThan(0);
    expect(alone.every((w) => w.node === 'first' && w.readFollows === true)).toBe(true);

    second = await startNode({ redisUrl: fx.redis.url, prefix: fx.prefix, roles: ['worker'], logger: testLogger(), adapters: { nacos: recording('second') } });
    const shards = [...Array(first.deployment.shards).keys()];
    const nodes = [first, second];
    await waitUntil(() => nodes.every((n) => shards.every((s) => n.coordinator?.soleReplica(s) === false)), { message: 'both workers to serve every shard' });
    seed('payments', '10.31.0.2');
    await defineTask(url, 'payments', 'a', 'b', 'payments');
    await waitUntil(() => copiesIn(b, 'payments').length === 1, { message: 'payments copied' });
    const shared = watched.filter((w) => w.service === 'payments');
    expect(shared.length).toBeGreaterThan(0);
    expect(shared.every((w) => w.readFollows === false)).toBe(true);
  });
});
