import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startRegsync, type RegsyncProcess } from '../support/regsync-process.js';
import {
  addRegistry,
  api,
  copiesIn,
  defineClusters,
  defineTask,
  registerNative,
  startFixture,
  stopFixture,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** kill -9 of a `regsync up` process and a new one in its place, registries at Nacos' default expiry. */
describe('regsync killed and restarted', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let first: RegsyncProcess | undefined;
  let second: RegsyncProcess | undefined;
  let native: NativeInstance;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b', { beatIntervalMs: 1_000 });
  });
  afterAll(async () => {
    native?.stop();
    await first?.stop();
    await second?.stop();
    await stopFixture(fx);
  });

  it('keeps tasks, keeps the copies healthy and duplicates nothing', async () => {
    const up = ['up', '--redis', fx.redis.url, '--listen', '127.0.0.1:0'];
    first = await startRegsync(up);
    await defineClusters(first.url, fx);
    await defineTask(first.url, 'ab', 'a', 'b', 'orders');
    native = await registerNative(() => a, 'orders', '10.50.0.1', 1, {}, 1_000);
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'copy in B' });
    await waitUntil(() => (copiesIn(b, 'orders')[0]?.beats ?? 0) >= 1, { message: 'first beat' });

    // Every visible change of the copy in B from here on is recorded.
    const seen: string[] = [];
    b.store.on('change', () => {
      const copies = copiesIn(b, 'orders');
      seen.push(copies.map((c) => `${c.ip}:${c.healthy}`).join(',') || 'none');
    });

    await first.proc.kill();
    const beatsAtKill = copiesIn(b, 'orders')[0]?.beats ?? 0;
    second = await startRegsync(up);
    const tasks = (await api(second.url, 'GET', '/api/v1/tasks')).body.items as Array<{ id: string; state: string }>;
    expect(tasks.map((t) => [t.id, t.state])).toEqual([['ab', 'running']]);
    await waitUntil(() => (copiesIn(b, 'orders')[0]?.beats ?? 0) >= beatsAtKill + 3, { timeoutMs: 15_000, message: 'beats from the new process' });

    expect(seen).toEqual([]);
    const all = [...(b.store.getService('public', 'DEFAULT_GROUP', 'orders')?.instances.values() ?? [])];
    expect(all.map((i) => [i.ip, i.healthy, i.metadata[MARK_TASK]])).toEqual([['10.50.0.1', true, 'ab']]);
  });
});
