import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MARK_TASK, serviceSyncKey, type Instance, type RegistryAdapter, type TaskOptions, type TaskSpec } from '../model/index.js';
import { BoundRegistry, type BeatableBoundAdapter } from '../../test/support/fake-bound-registry.js';
import { FakeAdapter, instance } from '../../test/support/fake-adapter.js';
import { MemoryEngineStore } from '../../test/support/memory-engine-store.js';
import { harnessCluster, harnessTask, harnessWorker, SERVICE, type HarnessWorker } from '../../test/support/reconciler-harness.js';

const T0 = Date.parse('2024-01-01T00:00:00.000Z');
const KEY = serviceSyncKey({ taskId: 't', service: SERVICE });
const ips = (n: number, base = '10.7.0.') => Array.from({ length: n }, (_, i) => `${base}${i + 1}`);
const ephemeral = (ip: string): Instance => ({ ...instance(ip), ephemeral: true });

/** The reconciler against a connection-bound destination (Nacos gRPC): sets, not beats. */
describe('Reconciler on a connection-bound destination', () => {
  let store: MemoryEngineStore;
  let a: FakeAdapter;
  let registry: BoundRegistry;
  let b: BeatableBoundAdapter;
  let task: TaskSpec;
  let worker: HarnessWorker;
  const source = (list: readonly string[]) => a.put(SERVICE, list.map(ephemeral));
  const copies = () => registry.instances(SERVICE).filter((i) => i.metadata[MARK_TASK] === 't');
  const applies = () => b.calls.filter((c) => c.startsWith('apply'));
  const publishes = () => b.calls.filter((c) => c.startsWith('publish'));
  const at = (ms: number) => vi.setSystemTime(T0 + ms);
  const setup = (options: TaskOptions = {}) => {
    task = harnessTask(options);
    store.tasks.set(task.id, task);
    worker = harnessWorker(store, new Map<string, RegistryAdapter>([['a', a], ['b', b]]), () => task);
  };

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    at(0);
    store = new MemoryEngineStore();
    a = new FakeAdapter('a');
    registry = new BoundRegistry('b');
    b = registry.connect('p1', true) as BeatableBoundAdapter;
    store.clusters.set('a', harnessCluster('a'));
    store.clusters.set('b', harnessCluster('b'));
    setup();
  });
  afterEach(() => {
    worker.heartbeats.stop();
    vi.useRealTimers();
  });

  it('gives apply every copy the service sync wants, and beats nothing', async () => {
    source(ips(3));
    expect(await worker.reconcile()).toEqual({ kind: 'synced', upserts: 3, removes: 0, conflicts: 0 });
    expect(applies()).toEqual([`apply public/DEFAULT_GROUP/orders +3 -0 desired ${KEY} 3`]);
    expect(copies().map((i) => i.ip)).toEqual(ips(3));
    expect(b.owners(SERVICE)).toEqual([KEY]);
    expect(worker.heartbeats.stats().entries).toBe(0);
    expect(worker.heartbeats.instancesOf(KEY)).toEqual([]);
    expect(b.beats).toBe(0);
  });

  it('publishes the live set without applying when nothing changed, and sends the registry nothing', async () => {
    source(ips(3));
    await worker.reconcile();
    const requests = b.requests;
    expect(await worker.reconcile()).toEqual({ kind: 'synced', upserts: 0, removes: 0, conflicts: 0 });
    expect(applies()).toHaveLength(1);
    expect(publishes()).toEqual([`publish public/DEFAULT_GROUP/orders ${KEY} 3`]);
    expect(b.requests).toBe(requests);
  });

  it('publishes the set into a connection that does not hold it (another process wrote the copies)', async () => {
    source(ips(2));
    const other = registry.connect('p2');
    const before = new Map<string, RegistryAdapter>([['a', a], ['b', other]]);
    await harnessWorker(store, before, () => task).reconcile();
    expect(b.held('public/DEFAULT_GROUP/orders')).toEqual([]);
    expect(await worker.reconcile()).toMatchObject({ kind: 'synced', upserts: 0 });
    expect(b.held('public/DEFAULT_GROUP/orders').map((i) => i.ip)).toEqual(ips(2));
    other.kill();
    expect(copies().map((i) => i.ip)).toEqual(ips(2));
  });

  it('shrinks the set when a source instance goes', async () => {
    source(ips(3));
    await worker.reconcile();
    source(ips(2));
    expect(await worker.reconcile()).toMatchObject({ kind: 'synced', upserts: 0, removes: 1 });
    expect(applies().at(-1)).toBe(`apply public/DEFAULT_GROUP/orders +0 -1 desired ${KEY} 2`);
    expect(copies().map((i) => i.ip)).toEqual(ips(2));
  });

  it('keeps removals a guard holds in the desired set', async () => {
    setup({ massDeletionConfirm: 'operator' });
    const all = ips(6);
    source(all);
    await worker.reconcile();
    // Five of six go and one comes: the removals are held, the new copy is written.
    source([...all.slice(5), '10.7.1.1']);
    at(1_000);
    expect(await worker.reconcile()).toMatchObject({ kind: 'synced', upserts: 1, removes: 0 });
    expect(applies().at(-1)).toBe(`apply public/DEFAULT_GROUP/orders +1 -0 desired ${KEY} 7`);
    expect(copies()).toHaveLength(7);
    expect(store.statuses.get('t')?.get('public/DEFAULT_GROUP/orders')?.held).toMatchObject({ removes: 5 });
  });

  it('withdraws its share when the task was paused during the reconcile', async () => {
    source(ips(2));
    await worker.reconcile();
    source(ips(3));
    let calls = 0;
    // The task is running when the reconcile starts, and paused by the time it keeps the copies alive.
    worker = harnessWorker(store, new Map<string, RegistryAdapter>([['a', a], ['b', b]]), () => task, { activeTask: () => (++calls <= 1 ? task : undefined) });
    await worker.reconcile();
    expect(b.owners(SERVICE)).toEqual([]);
    expect(copies()).toEqual([]);
  });

  it('withdraws its share when the task is removed', async () => {
    source(ips(2));
    await worker.reconcile();
    expect(await worker.reconciler.removeCopies(task, SERVICE, KEY)).toBe(2);
    expect(applies().at(-1)).toBe(`apply public/DEFAULT_GROUP/orders +0 -2 desired ${KEY} 0`);
    expect(copies()).toEqual([]);
  });

  it('records a failed publish as the destination not written, and retries through the queue', async () => {
    source(ips(2));
    await worker.reconcile();
    b.failWrites = new Error('stream reset');
    await expect(worker.reconcile()).rejects.toThrow('stream reset');
    expect(store.statuses.get('t')?.get('public/DEFAULT_GROUP/orders')?.problems).toEqual([
      { code: 'destination_unwritable', side: 'destination', cluster: 'b', message: 'cannot write destination b: stream reset' },
    ]);
  });
});
