import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MARK_TASK, type SourceWarmupRecord, type TaskSpec } from '../model/index.js';
import { FakeAdapter, instance } from '../../test/support/fake-adapter.js';
import { MemoryEngineStore } from '../../test/support/memory-engine-store.js';
import { harnessCluster, harnessTask, harnessWorker, SERVICE, type HarnessWorker } from '../../test/support/reconciler-harness.js';
import type { SourceWarmupMarks } from './reconciler.js';
import { nextWarmup, type WarmupEvent } from './warmup.js';

const T0 = Date.parse('2024-01-01T00:00:00.000Z');
const WARMUP_MS = 20_000;
const ips = (n: number, base = '10.9.0.') => Array.from({ length: n }, (_, i) => `${base}${i + 1}`);
const copies = (registry: FakeAdapter) => registry.instances(SERVICE).filter((i) => i.metadata[MARK_TASK] === 't');

/** The source warm-up records in memory, shared by the replicas of a test (as Redis is). */
class MemoryWarmups implements SourceWarmupMarks {
  readonly records = new Map<string, SourceWarmupRecord>();
  async note(clusterId: string, event: WarmupEvent, now: number, warmupMs: number): Promise<SourceWarmupRecord> {
    const next = nextWarmup(this.records.get(clusterId) ?? {}, event, now, warmupMs);
    this.records.set(clusterId, next);
    return { ...next };
  }
}

/** The reconciler holding removals while its source warms up, against fake registries and a clock in the test's hand. */
describe('Reconciler: source warm-up', () => {
  let store: MemoryEngineStore;
  let a: FakeAdapter;
  let b: FakeAdapter;
  let task: TaskSpec;
  let warmups: MemoryWarmups;
  let workers: HarnessWorker[];

  const source = (list: readonly string[]) => a.put(SERVICE, list.map((ip) => instance(ip)));
  const at = (ms: number) => vi.setSystemTime(T0 + ms);
  const status = () => store.statuses.get('t')?.get('public/DEFAULT_GROUP/orders');
  const worker = (warmupMs = WARMUP_MS) => {
    const w = harnessWorker(store, new Map([['a', a], ['b', b]]), () => task, { warmups, warmupOf: () => warmupMs, confirmEmptyMs: 1_000 });
    workers.push(w);
    return w;
  };

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    at(0);
    store = new MemoryEngineStore();
    a = new FakeAdapter('a');
    b = new FakeAdapter('b');
    warmups = new MemoryWarmups();
    workers = [];
    store.clusters.set('a', harnessCluster('a'));
    store.clusters.set('b', harnessCluster('b'));
    task = harnessTask();
    store.tasks.set(task.id, task);
  });
  afterEach(() => {
    for (const w of workers) w.heartbeats.stop();
    vi.useRealTimers();
  });

  it('holds the removals of a source that dropped sharply, lets additions through, and applies them once the warm-up ended', async () => {
    const w = worker();
    source(ips(7));
    await w.reconcile();
    at(1_000);
    // 6 of 7 gone: more than 4 instances in a sharp drop.
    source([...ips(1), '10.9.1.1']);
    const held = await w.reconcile();
    expect(held).toEqual({ kind: 'synced', upserts: 1, removes: 0, conflicts: 0, requeueAfterMs: WARMUP_MS + 10 });
    expect(copies(b).map((i) => i.ip).sort()).toEqual([...ips(7), '10.9.1.1'].sort());
    const until = new Date(T0 + 1_000 + WARMUP_MS).toISOString();
    expect(status()).toMatchObject({
      warmup: { cluster: 'a', reason: 'drop', since: new Date(T0 + 1_000).toISOString(), until, removes: 6 },
      held: null,
      problems: [{ code: 'source_warming_up', side: 'source', cluster: 'a', message: expect.stringContaining(`6 removals held until ${until}`) }],
    });
    expect(w.events).toContainEqual(expect.objectContaining({ kind: 'held', message: expect.stringContaining('warming up after a sharp drop') }));
    // Back one by one: nothing goes meanwhile.
    at(5_000);
    source([...ips(5), '10.9.1.1']);
    expect(await w.reconcile()).toMatchObject({ removes: 0, requeueAfterMs: WARMUP_MS - 4_000 + 10 });
    // The warm-up is over: those that never came back go (2 of 8: under the mass-deletion share).
    at(1_000 + WARMUP_MS);
    expect(await w.reconcile()).toEqual({ kind: 'synced', upserts: 0, removes: 2, conflicts: 0 });
    expect(copies(b).map((i) => i.ip).sort()).toEqual([...ips(5), '10.9.1.1'].sort());
    expect(status()?.warmup).toBeUndefined();
    expect(status()?.problems).toEqual([]);
  });

  it('holds after an outage from the first read that goes through, in every replica, even a read that is not a sharp drop', async () => {
    const [one, two] = [worker(), worker()];
    source(ips(4));
    await one.reconcile();
    at(1_000);
    a.failReads = new Error('ECONNREFUSED');
    await expect(one.reconcile()).rejects.toThrow('ECONNREFUSED');
    expect(warmups.records.get('a')).toEqual({ down: 1_000 + T0 });
    at(9_000);
    a.failReads = undefined;
    source(ips(3));
    // The other replica reads first: it plans a removal and finds the outage marked.
    expect(await two.reconcile()).toMatchObject({ removes: 0, requeueAfterMs: WARMUP_MS + 10 });
    expect(status()?.warmup).toMatchObject({ reason: 'outage', since: new Date(T0 + 9_000).toISOString(), removes: 1 });
    expect(copies(b)).toHaveLength(4);
    at(12_000);
    expect(await one.reconcile()).toMatchObject({ removes: 0 });
    at(9_000 + WARMUP_MS);
    expect(await one.reconcile()).toMatchObject({ removes: 1 });
    expect(copies(b)).toHaveLength(3);
  });

  it('starts the warm-up at the first empty read, while the empty-source guard holds', async () => {
    const w = worker();
    source(ips(5));
    await w.reconcile();
    at(1_000);
    source([]);
    expect(await w.reconcile()).toMatchObject({ kind: 'held' });
    expect(warmups.records.get('a')).toMatchObject({ reason: 'drop', since: T0 + 1_000 });
    at(2_500);
    expect(await w.reconcile()).toMatchObject({ kind: 'synced', removes: 0, requeueAfterMs: WARMUP_MS - 1_500 + 10 });
    expect(copies(b)).toHaveLength(5);
    // After the warm-up the other guards judge the removals as ever: all 5 is a mass deletion, confirmed by a later read.
    at(1_000 + WARMUP_MS);
    expect(await w.reconcile()).toMatchObject({ removes: 0 });
    expect(status()).toMatchObject({ held: { removes: 5 } });
    expect(status()?.warmup).toBeUndefined();
    at(2_000 + WARMUP_MS);
    expect(await w.reconcile()).toMatchObject({ removes: 5 });
  });

  it('removes at once where the warm-up is 0, for a drop that is not sharp, and for a small sharp one', async () => {
    const off = worker(0);
    source(ips(4));
    await off.reconcile();
    source(ips(1));
    expect(await off.reconcile()).toMatchObject({ removes: 3 });
    expect(warmups.records.size).toBe(0);
    const on = worker();
    source(ips(4));
    await on.reconcile();
    source(ips(2));
    expect(await on.reconcile()).toEqual({ kind: 'synced', upserts: 0, removes: 2, conflicts: 0 });
    source(ips(3, '10.9.2.'));
    await on.reconcile();
    source(ips(1, '10.9.2.'));
    expect(await on.reconcile()).toEqual({ kind: 'synced', upserts: 0, removes: 2, conflicts: 0 });
    expect(warmups.records.get('a')).toEqual({ drops: { 'public/DEFAULT_GROUP/orders': [T0, 2] } });
  });

  it('starts the warm-up for the whole cluster from small sharp drops of several services', async () => {
    const w = worker();
    source(ips(3));
    await w.reconcile();
    for (const service of ['x', 'y']) await warmups.note('a', { kind: 'drop', service: `public/DEFAULT_GROUP/${service}`, lost: 2 }, T0, WARMUP_MS);
    // A third service dropping by one more than the count allows: 2 + 2 + 2 of 3.
    source(ips(1));
    expect(await w.reconcile()).toMatchObject({ removes: 0, requeueAfterMs: WARMUP_MS + 10 });
    expect(copies(b)).toHaveLength(3);
  });
});
