import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serviceSyncKey } from '../../src/model/index.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { RegsyncCluster } from '../support/regsync-cluster.js';
import { addRegistry, api, copiesIn, persistent, startFixture, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { startTcpGate, type TcpGate } from '../support/tcp-gate.js';
import { waitUntil } from '../support/wait-until.js';

/** Far longer than the test: only the recovery of failed service syncs can bring the change. */
const FULL_SYNC_MS = 600_000;

/**
 * Separate `regsync worker` processes on one Redis: the replicas whose reconciles failed while the
 * destination was down are gone when it comes back, and a worker started since (which knows the
 * failed service syncs only from Redis) runs them again within seconds of the destination answering.
 */
describe('recovery of failed service syncs across worker processes', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let gate: TcpGate;
  let cluster: RegsyncCluster;
  let redis: Redis;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    gate = await startTcpGate(b.endpoint);
    redis = new Redis(fx.redis.url);
    cluster = new RegsyncCluster(fx.redis.url, ['--shards', '1', '--replicas', '2', '--lease-ttl-ms', '2000']);
    await cluster.startApi();
    await cluster.startWorker('w1');
    await cluster.startWorker('w2');
  });
  afterAll(async () => {
    await cluster?.close();
    redis?.disconnect();
    await gate?.close();
    if (fx) await stopFixture(fx);
  });

  it('a worker that never failed them runs them once the destination answers', async () => {
    const url = cluster.url;
    for (const [id, endpoint] of [['a', a.endpoint], ['b', gate.endpoint]] as const) {
      const options = { apiVersion: 'v1', requestTimeoutMs: 1_000, pollIntervalMs: FULL_SYNC_MS };
      expect((await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint], options })).status).toBe(201);
    }
    a.store.register('public', 'DEFAULT_GROUP', 'orders', persistent('10.82.0.1'));
    const task = { id: 'a-to-b', source: 'a', destination: 'b', service: 'orders', options: { fullSyncIntervalMs: FULL_SYNC_MS } };
    expect((await api(url, 'POST', '/api/v1/tasks', task)).status).toBe(201);
    const ips = () => copiesIn(b, 'orders').map((i) => i.ip).sort().join();
    await waitUntil(() => ips() === '10.82.0.1', { message: 'the first copy', timeoutMs: 20_000 });

    const key = serviceSyncKey({ taskId: 'a-to-b', service: { namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' } });
    const failedJobs = () => redis.zcard('regsync:bull:shard-0:failed');
    gate.cut();
    a.store.register('public', 'DEFAULT_GROUP', 'orders', persistent('10.82.0.2'));
    // Every attempt of the change's reconcile failed, on w1 or w2.
    await waitUntil(async () => (await failedJobs()) >= 1, { message: 'the change given up', timeoutMs: 30_000 });

    // The replicas that failed it go; a new worker leads the shard (its first reconcile fails too).
    await cluster.stop('w1');
    await cluster.stop('w2');
    await cluster.startWorker('w3');
    await waitUntil(async () => (await failedJobs()) >= 2, { message: "w3's first reconcile given up", timeoutMs: 30_000 });
    expect(ips()).toBe('10.82.0.1');

    const back = performance.now();
    gate.open();
    await waitUntil(() => ips() === '10.82.0.1,10.82.0.2', { message: 'the change made during the outage', timeoutMs: 30_000 });
    // Nothing is left to run again.
    await waitUntil(async () => (await redis.sismember('regsync:failed-syncs:b', key)) === 0, { message: 'the failed service sync drained' });
    console.log(`replicas: the change reached the destination ${(performance.now() - back).toFixed(0)} ms after it answered again, through a worker started during the outage`);
  }, 120_000);
});
