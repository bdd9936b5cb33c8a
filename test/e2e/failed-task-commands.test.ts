import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNode, type RegsyncNode } from '../../src/node.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { beatenSince, beatsOf } from '../support/regsync-cluster.js';
import { addRegistry, api, copiesIn, registerNative, startFixture, startSync, stopFixture, testLogger, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { startTcpGate, type TcpGate } from '../support/tcp-gate.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * A command that stops a task to remove its copies (a delete; a replace that moves them elsewhere)
 * and then fails, because the destination is down, leaves the task running where it ran before, in
 * every process: its copies keep their beats and a later change of the source is still synced.
 * Two processes (API + worker, and a second worker) share the deployment.
 */
describe('a task command that fails to remove the copies', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let gate: TcpGate;
  let url: string;
  let second: RegsyncNode;
  let ip = 0;
  const natives: NativeInstance[] = [];
  const provide = async (address: string) => natives.push(await registerNative(() => a, 'orders', address, 8080));

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    await addRegistry(fx, 'c');
    gate = await startTcpGate(b.endpoint);
    url = (await startSync(fx, testLogger(), { shards: 2, replicas: 2 })).url as string;
    second = await startNode({ redisUrl: fx.redis.url, prefix: fx.prefix, roles: ['worker'], logger: testLogger(), confirmEmptyMs: 1_000 });
    const endpoints = { a: a.endpoint, b: gate.endpoint, c: (fx.registries.get('c') as RunningRegistry).endpoint };
    for (const [id, endpoint] of Object.entries(endpoints)) {
      expect((await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint], options: { requestTimeoutMs: 1_000 } })).status).toBe(201);
    }
    await provide('10.40.0.1');
    // No full sync within the test: only watches, commands and retries make reconciles.
    const task = { id: 'orders', source: 'a', destination: 'b', service: 'orders', options: { fullSyncIntervalMs: 300_000 } };
    expect((await api(url, 'POST', '/api/v1/tasks', task)).status).toBe(201);
    await waitUntil(() => copiesIn(b, 'orders').length === 1 && copiesIn(b, 'orders')[0]?.ephemeral, { message: 'the first copy in b' });
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await second?.close();
    await stopFixture(fx);
    await gate?.close();
  });

  /** With b back, the copies are beaten again and a new source instance reaches b: the task runs. */
  async function expectRunning(): Promise<void> {
    gate.open();
    const since = beatsOf(b, ['orders']);
    await waitUntil(() => beatenSince(b, ['orders'], since, 2), { message: 'beats of the copies in b again', timeoutMs: 20_000 });
    ip += 1;
    const added = `10.40.1.${ip}`;
    await provide(added);
    await waitUntil(() => copiesIn(b, 'orders').some((c) => c.ip === added), { message: `${added} copied to b`, timeoutMs: 20_000 });
    expect((await api(url, 'GET', '/api/v1/tasks/orders')).body).toMatchObject({ destination: 'b', state: 'running' });
  }

  it('DELETE /api/v1/tasks/:id', async () => {
    gate.cut();
    const res = await api(url, 'DELETE', '/api/v1/tasks/orders');
    expect(res.status, JSON.stringify(res.body)).toBe(502);
    expect(res.body.error.code).toBe('cleanup_failed');
    await expectRunning();
  });

  it('DELETE /v1/task/delete (nacos-sync)', async () => {
    gate.cut();
    const res = await api(url, 'DELETE', '/v1/task/delete?taskId=orders');
    expect(res.body.success, JSON.stringify(res.body)).toBe(false);
    await expectRunning();
  });

  it('PUT /api/v1/tasks/:id moving the copies to another destination', async () => {
    gate.cut();
    const res = await api(url, 'PUT', '/api/v1/tasks/orders', { source: 'a', destination: 'c', service: 'orders', options: { fullSyncIntervalMs: 300_000 } });
    expect(res.status, JSON.stringify(res.body)).toBe(502);
    expect(res.body.error.code).toBe('cleanup_failed');
    await expectRunning();
  });

  it('keeps beating the copies when the destination stays down through every retry of the restart', async () => {
    gate.cut();
    const res = await api(url, 'DELETE', '/api/v1/tasks/orders');
    expect(res.status, JSON.stringify(res.body)).toBe(502);
    // Every reconcile the restart queued has failed for good: only the task's beats can reach b now.
    const node = fx.node as RegsyncNode;
    await waitUntil(async () => (await node.queues.depth(0)) + (await node.queues.depth(1)) === 0, { message: 'the queued reconciles given up', timeoutMs: 20_000 });
    gate.open();
    const since = beatsOf(b, ['orders']);
    await waitUntil(() => beatenSince(b, ['orders'], since, 2), { message: 'beats of the copies in b again', timeoutMs: 20_000 });
  });
});
