import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startRegistry } from '../../src/registry/index.js';
import {
  addRegistry,
  api,
  copiesIn,
  countChanges,
  defineClusters,
  defineTask,
  instancesIn,
  registerNative,
  startFixture,
  startSync,
  stopFixture,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** Waits until every service sync of the tasks has reconciled after `since`. */
async function reconciledSince(url: string, taskIds: string[], since: number): Promise<void> {
  await waitUntil(
    async () => {
      for (const id of taskIds) {
        const services = (await api(url, 'GET', `/api/v1/tasks/${id}`)).body.status.services as Array<{ lastSyncAt: string | null }>;
        if (services.length === 0 || services.some((s) => !s.lastSyncAt || Date.parse(s.lastSyncAt) < since)) return false;
      }
      return true;
    },
    { message: `tasks ${taskIds.join(',')} reconciled` },
  );
}

describe('ring A -> B -> C -> A', () => {
  let fx: SyncFixture;
  let url: string;
  let regs: RunningRegistry[];
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    regs = [await addRegistry(fx, 'a'), await addRegistry(fx, 'b'), await addRegistry(fx, 'c')];
    url = (await startSync(fx)).url as string;
    await defineClusters(url, fx);
    await defineTask(url, 'ab', 'a', 'b', 'ring');
    await defineTask(url, 'bc', 'b', 'c', 'ring');
    await defineTask(url, 'ca', 'c', 'a', 'ring');
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await stopFixture(fx);
  });

  it('holds one copy per cluster and writes nothing more once converged', async () => {
    const [a, b, c] = regs as [RunningRegistry, RunningRegistry, RunningRegistry];
    natives.push(await registerNative(() => a, 'ring', '10.30.0.1', 1, {}, 1_000));
    await waitUntil(() => copiesIn(b, 'ring').length === 1 && copiesIn(c, 'ring').length === 1, { message: 'copies in B and C' });
    expect(copiesIn(c, 'ring')[0]?.metadata['regsync.path']).toBe('a,b');
    expect(instancesIn(a, 'ring')).toHaveLength(1);
    await reconciledSince(url, ['ab', 'bc', 'ca'], 0);

    const writes = regs.map(countChanges);
    const since = Date.now();
    for (const id of ['ab', 'bc', 'ca']) expect((await api(url, 'POST', `/api/v1/tasks/${id}/resync`)).status).toBe(202);
    await reconciledSince(url, ['ab', 'bc', 'ca'], since);
    expect(writes.map((w) => w.count())).toEqual([0, 0, 0]);
    expect([instancesIn(a, 'ring'), instancesIn(b, 'ring'), instancesIn(c, 'ring')].map((l) => l.length)).toEqual([1, 1, 1]);
  });
});

describe('source outage', () => {
  let fx: SyncFixture;
  let url: string;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let native: NativeInstance;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', { expiry: { unhealthyAfterMs: 1_500, expireAfterMs: 3_000, sweepIntervalMs: 100 } });
    b = await addRegistry(fx, 'b', { expiry: { unhealthyAfterMs: 1_500, expireAfterMs: 3_000, sweepIntervalMs: 100 }, beatIntervalMs: 300 });
    url = (await startSync(fx)).url as string;
    // The empty-source guard on its own: no warm-up after the outage holds the removal (see source-warmup.test.ts).
    await defineClusters(url, fx, { warmupSeconds: 0 });
    await defineTask(url, 'ab', 'a', 'b', 'orders', { options: { fullSyncIntervalMs: 1_000 } });
  });
  afterAll(async () => {
    native?.stop();
    await stopFixture(fx);
  });

  it('keeps the copies alive while the source is down, and converges when it is back', async () => {
    native = await registerNative(() => a, 'orders', '10.40.0.1', 1);
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy in B' });
    const port = a.port;
    await a.close();
    const copy = () => copiesIn(b, 'orders')[0];
    const beatsAtOutage = copy()?.beats ?? 0;
    // Full syncs fail every second; the copy keeps beating through twice the expiry window.
    await waitUntil(() => (copy()?.beats ?? 0) >= beatsAtOutage + 20, { timeoutMs: 20_000, message: 'beats during the outage' });
    expect(copy()?.healthy).toBe(true);
    const task = (await api(url, 'GET', '/api/v1/tasks/ab')).body;
    expect(task.status.services[0].lastError).toContain('cannot read source a');

    // A comes back empty (in-memory); the application's next full beat re-creates its instance.
    a = await startRegistry({ port, expiry: { unhealthyAfterMs: 1_500, expireAfterMs: 3_000, sweepIntervalMs: 100 } });
    fx.registries.set('a', a);
    await waitUntil(() => instancesIn(a, 'orders').length === 1, { message: 'instance back in A' });
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/ab')).body.status.services[0].lastError === null, { message: 'task healthy again' });
    expect(copiesIn(b, 'orders').map((i) => i.ip)).toEqual(['10.40.0.1']);
  });

  it('holds the copies when the source suddenly lists nothing, and removes them once a second read confirms it', async () => {
    const status = async () => (await api(url, 'GET', '/api/v1/tasks/ab')).body.status.services[0];
    await native.deregister();
    await waitUntil(async () => String((await status()).lastError).includes('suddenly lists no instances'), { message: 'hold reported' });
    expect(copiesIn(b, 'orders').map((i) => i.ip)).toEqual(['10.40.0.1']);
    await waitUntil(() => copiesIn(b, 'orders').length === 0, { message: 'copies removed after confirmation' });
    await waitUntil(async () => (await status()).lastError === null, { message: 'status clear' });
    expect((await status()).sourceInstances).toBe(0);
  });
});
