import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_ORIGIN, MARK_PATH, MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import {
  addRegistry,
  api,
  copiesIn,
  defineClusters,
  defineTask,
  instancesIn,
  nativesIn,
  registerNative,
  startFixture,
  startSync,
  stopFixture,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * Two embedded registries synced both ways by regsync, with short expiry so that the heartbeat
 * proxy has to work for the copies to survive.
 */
describe('A <-> B', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  const natives: NativeInstance[] = [];
  const expiry = { expiry: { unhealthyAfterMs: 1_500, expireAfterMs: 3_000, sweepIntervalMs: 100 }, beatIntervalMs: 300 };

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', expiry);
    b = await addRegistry(fx, 'b', expiry);
    url = (await startSync(fx)).url as string;
    await defineClusters(url, fx);
    await defineTask(url, 'ab', 'a', 'b', 'orders');
    await defineTask(url, 'ba', 'b', 'a', 'orders');
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await stopFixture(fx);
  });

  it('copies an instance registered in A to B, marked with its origin, and never back to A', async () => {
    natives.push(await registerNative(() => a, 'orders', '10.20.0.1', 8080, { v: '1' }));
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy in B' });
    expect(copiesIn(b, 'orders')[0]).toMatchObject({
      ip: '10.20.0.1',
      port: 8080,
      ephemeral: true,
      healthy: true,
      metadata: { v: '1', [MARK_ORIGIN]: 'a', [MARK_PATH]: 'a', [MARK_TASK]: 'ab' },
    });
    // The reverse task saw the copy in B and did not send it back.
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/ba')).body.status.services[0]?.lastSyncAt, { message: 'reverse task ran' });
    expect(copiesIn(a, 'orders')).toEqual([]);
    expect(instancesIn(a, 'orders')).toHaveLength(1);
  });

  it('copies the other way too', async () => {
    natives.push(await registerNative(() => b, 'orders', '10.20.1.1', 8080));
    await waitUntil(() => copiesIn(a, 'orders').some((i) => i.ip === '10.20.1.1'), { message: 'copy in A' });
    expect(copiesIn(a, 'orders')[0]?.metadata).toMatchObject({ [MARK_ORIGIN]: 'b', [MARK_TASK]: 'ba' });
    expect(copiesIn(b, 'orders').map((i) => i.ip)).toEqual(['10.20.0.1']);
  });

  it('keeps the copies healthy through the heartbeat proxy long past the expiry window', async () => {
    const copy = () => copiesIn(b, 'orders').find((i) => i.ip === '10.20.0.1');
    // 20 beats at the registry's 300 ms interval span twice its 3 s expiry.
    await waitUntil(() => (copy()?.beats ?? 0) >= 20, { timeoutMs: 20_000, message: '20 beats on the copy' });
    expect(copy()?.healthy).toBe(true);
    expect(fx.node?.heartbeats.stats().entries).toBe(2);
  });

  it('removes the copy when the instance is deregistered in A', async () => {
    const n = await registerNative(() => a, 'orders', '10.20.0.2', 8080);
    await waitUntil(() => copiesIn(b, 'orders').some((i) => i.ip === '10.20.0.2'), { message: 'second copy' });
    await n.deregister();
    await waitUntil(() => !copiesIn(b, 'orders').some((i) => i.ip === '10.20.0.2'), { message: 'copy removed' });
    expect(copiesIn(b, 'orders').map((i) => i.ip)).toEqual(['10.20.0.1']);
  });

  it('removes the copy when the instance expires in A', async () => {
    const n = await registerNative(() => a, 'orders', '10.20.0.3', 8080);
    await waitUntil(() => copiesIn(b, 'orders').some((i) => i.ip === '10.20.0.3'), { message: 'third copy' });
    n.stop();
    await waitUntil(() => !instancesIn(a, 'orders').some((i) => i.ip === '10.20.0.3'), { message: 'expired in A' });
    await waitUntil(() => !copiesIn(b, 'orders').some((i) => i.ip === '10.20.0.3'), { message: 'copy gone from B' });
  });

  it('stops beating when a task is paused, and starts again on resume', async () => {
    expect((await api(url, 'POST', '/api/v1/tasks/ab/pause')).status).toBe(200);
    await waitUntil(() => copiesIn(b, 'orders').length === 0, { message: 'copies of a paused task expire' });
    expect((await api(url, 'POST', '/api/v1/tasks/ab/resume')).status).toBe(200);
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy back after resume' });
  });

  it('removes its copies at once when a task is deleted, leaving native instances alone', async () => {
    const natB = nativesIn(b, 'orders').map((i) => i.ip);
    expect(natB).toEqual(['10.20.1.1']);
    expect(copiesIn(b, 'orders')).toHaveLength(1);
    expect((await api(url, 'DELETE', '/api/v1/tasks/ab')).status).toBe(204);
    expect(copiesIn(b, 'orders')).toEqual([]);
    expect(nativesIn(b, 'orders').map((i) => i.ip)).toEqual(natB);
    expect((await api(url, 'GET', '/api/v1/tasks/ab')).status).toBe(404);
    // The other direction goes on.
    expect(copiesIn(a, 'orders').map((i) => i.ip)).toEqual(['10.20.1.1']);
  });
});
