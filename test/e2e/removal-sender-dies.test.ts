import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { RegsyncCluster } from '../support/regsync-cluster.js';
import { addRegistry, api, copiesIn, registerNative, startFixture, stopFixture, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { startTcpGate, type TcpGate } from '../support/tcp-gate.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * `regsync api` is killed (-9) while it removes a task's copies for a DELETE: the workers it had
 * told to stop the task run it again once the removal's fence in Redis lapses, as the store still
 * holds the task, so it does not stay stopped everywhere until a restart.
 */
describe('the API process dies while it removes the copies of a task', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let gate: TcpGate;
  let cluster: RegsyncCluster;
  let redis: Redis;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    gate = await startTcpGate(b.endpoint);
    redis = new Redis(fx.redis.url);
    cluster = new RegsyncCluster(fx.redis.url, ['--shards', '2', '--replicas', '2', '--lease-ttl-ms', '2000']);
    await cluster.startApi();
    await cluster.startWorker('w1');
    await cluster.startWorker('w2');
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await cluster?.close();
    redis?.disconnect();
    await gate?.close();
    if (fx) await stopFixture(fx);
  });

  it('runs the task again in the workers', async () => {
    const url = cluster.url;
    for (const [id, endpoint] of [['a', a.endpoint], ['b', gate.endpoint]] as const) {
      expect((await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint], options: { requestTimeoutMs: 60_000 } })).status).toBe(201);
    }
    natives.push(await registerNative(() => a, 'orders', '10.50.0.1', 8080));
    const task = { id: 'orders', source: 'a', destination: 'b', service: 'orders', options: { fullSyncIntervalMs: 300_000 } };
    expect((await api(url, 'POST', '/api/v1/tasks', task)).status).toBe(201);
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'the first copy in b', timeoutMs: 20_000 });

    gate.hold();
    const deleting = api(url, 'DELETE', '/api/v1/tasks/orders').catch(() => undefined);
    await waitUntil(async () => (await redis.exists('regsync:removing:orders')) === 1, { message: 'the removal under way' });
    await (cluster.api as NonNullable<typeof cluster.api>).proc.kill();
    await deleting;
    gate.open();

    natives.push(await registerNative(() => a, 'orders', '10.50.0.2', 8080));
    await waitUntil(() => copiesIn(b, 'orders').some((c) => c.ip === '10.50.0.2'), { message: 'a new source instance copied to b', timeoutMs: 45_000 });
  }, 90_000);
});
