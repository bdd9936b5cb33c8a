import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { addRegistry, api, copiesIn, defineTask, registerNative, startFixture, startSync, stopFixture, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * Two tasks writing one destination service from one process, over Nacos gRPC: the process's
 * connection holds one publish set per service, so the tasks' shares are merged into it; a change
 * of one task's share never drops the other's copies.
 */
describe('two tasks into one destination service over gRPC', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let c: RunningRegistry;
  let url: string;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    c = await addRegistry(fx, 'c', { grpc: { pushMergeWindowMs: 20 } });
    url = (await startSync(fx)).url as string;
    for (const [id, registry] of fx.registries) {
      const res = await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [registry.endpoint], options: { apiVersion: 'grpc', grpcPort: registry.grpcPort } });
      expect(res.status).toBe(201);
    }
    await defineTask(url, 'ac', 'a', 'c', 'orders');
    await defineTask(url, 'bc', 'b', 'c', 'orders');
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await stopFixture(fx);
  });

  const owners = () => copiesIn(c, 'orders').map((i) => `${i.metadata[MARK_TASK]}:${i.ip}`).sort();

  it('keeps both tasks’ copies in the one set, through changes of either', async () => {
    natives.push(await registerNative(() => a, 'orders', '10.31.0.1', 8080));
    natives.push(await registerNative(() => b, 'orders', '10.32.0.1', 8080));
    await waitUntil(() => owners().join() === 'ac:10.31.0.1,bc:10.32.0.1', { message: 'both copies in C' });
    expect(c.grpc?.stats().publishSets).toBe(1);

    natives.push(await registerNative(() => a, 'orders', '10.31.0.2', 8080));
    await waitUntil(() => owners().length === 3, { message: 'a second copy from A' });
    const fromB = natives[1] as NativeInstance;
    await fromB.deregister();
    await waitUntil(() => owners().join() === 'ac:10.31.0.1,ac:10.31.0.2', { message: "B's copy gone, A's kept" });
    // No copy beats: they live with regsync's connection.
    expect(copiesIn(c, 'orders').every((i) => i.beats === 0)).toBe(true);
  });
});
