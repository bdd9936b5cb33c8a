import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { beatenSince, beatsOf, RegsyncCluster, settledProbe, watchCopies } from '../support/regsync-cluster.js';
import { addRegistry, api, copiesIn, defineTask, registerNative, startFixture, stopFixture, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

const TIMEOUT = 30_000;
const SERVICES = Array.from({ length: 12 }, (_, i) => `r${i}`);

/*
 * An upgrade as an operator rolls it: three `regsync worker` processes (8 shards, 2 replicas, 2 s
 * lease), each stopped with SIGTERM and started again in turn, under steady sync from A to B. B
 * marks an ephemeral copy unhealthy after 8 s without a beat, so a copy whose beats stop during a
 * hand-over shows; none may, and a change made after each restart is copied.
 */
describe('rolling restart of the workers', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let cluster: RegsyncCluster;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b', { beatIntervalMs: 1_000, expiry: { unhealthyAfterMs: 8_000, expireAfterMs: 16_000 } });
    cluster = new RegsyncCluster(fx.redis.url, ['--shards', '8', '--replicas', '2', '--lease-ttl-ms', '2000']);
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await cluster?.close();
    if (fx) await stopFixture(fx);
  });

  it('restarts 3 workers one by one: no copy in B vanishes or turns unhealthy, changes keep landing', async () => {
    onTestFailed(() => console.log(cluster.logs()));
    await cluster.startApi();
    await Promise.all(['w1', 'w2', 'w3'].map((id) => cluster.startWorker(id)));
    for (const [id, endpoint] of [['a', a.endpoint], ['b', b.endpoint]]) {
      expect((await api(cluster.url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint] })).status).toBe(201);
    }
    for (const [i, s] of SERVICES.entries()) natives.push(await registerNative(() => a, s, `10.61.0.${i + 1}`, 8080, {}, 1_000));
    await defineTask(cluster.url, 'roll', 'a', 'b', '*');
    await waitUntil(() => SERVICES.every((s) => copiesIn(b, s).length === 1 && (copiesIn(b, s)[0]?.beats ?? 0) >= 3), {
      timeoutMs: TIMEOUT,
      message: 'one copy of each service in B, beaten 3 times',
    });
    await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment of 3 workers' });

    const watch = watchCopies(b, SERVICES);
    try {
      for (const [round, id] of ['w1', 'w2', 'w3'].entries()) {
        expect(await cluster.stop(id)).toBe(0);
        await cluster.startWorker(id);
        await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: `a settled deployment after restarting ${id}` });
        const service = SERVICES[round] as string;
        natives.push(await registerNative(() => a, service, `10.61.1.${round + 1}`, 8080, {}, 1_000));
        await waitUntil(() => copiesIn(b, service).some((c) => c.ip === `10.61.1.${round + 1}`), { timeoutMs: TIMEOUT, message: `the change made after restarting ${id} copied` });
      }
      const beats = beatsOf(b, SERVICES);
      await waitUntil(() => beatenSince(b, SERVICES, beats, 2), { timeoutMs: TIMEOUT, message: 'every copy beaten twice more after the last restart' });
    } finally {
      watch.stop();
    }
    expect(watch.violations).toEqual([]);
    expect(SERVICES.map((s) => copiesIn(b, s).length)).toEqual(SERVICES.map((_, i) => (i < 3 ? 2 : 1)));
  }, 180_000);
});
