import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { MARK_TASK, serviceSyncKey, WriteRefusedError, type Instance, type TaskOptions, type TaskSpec } from '../model/index.js';
import { FakeAdapter, instance } from '../../test/support/fake-adapter.js';
import { MemoryEngineStore } from '../../test/support/memory-engine-store.js';
import { harnessCluster, harnessTask, harnessWorker, SERVICE, type HarnessWorker } from '../../test/support/reconciler-harness.js';

const T0 = Date.parse('2024-01-01T00:00:00.000Z');
const ips = (n: number, base = '10.9.0.') => Array.from({ length: n }, (_, i) => `${base}${i + 1}`);
const copies = (registry: FakeAdapter) => registry.instances(SERVICE).filter((i) => i.metadata[MARK_TASK] === 't');

/** The reconciler's phases against an in-memory store and fake registries, with the clock in the test's hand. */
describe('Reconciler', () => {
  let store: MemoryEngineStore;
  let a: FakeAdapter;
  let b: FakeAdapter;
  let registries: Map<string, FakeAdapter>;
  let task: TaskSpec;
  let worker: HarnessWorker;

  const setup = (options: TaskOptions = {}) => {
    task = harnessTask(options);
    store.tasks.set(task.id, task);
    worker = harnessWorker(store, registries, () => task);
  };
  const source = (list: readonly string[]) => a.put(SERVICE, list.map((ip) => instance(ip)));
  const at = (ms: number) => vi.setSystemTime(T0 + ms);
  const status = () => store.statuses.get('t')?.get('public/DEFAULT_GROUP/orders');

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    at(0);
    store = new MemoryEngineStore();
    a = new FakeAdapter('a');
    b = new FakeAdapter('b');
    registries = new Map([
      ['a', a],
      ['b', b],
    ]);
    store.clusters.set('a', harnessCluster('a'));
    store.clusters.set('b', harnessCluster('b'));
    setup();
  });
  afterEach(() => {
    worker.heartbeats.stop();
    vi.useRealTimers();
  });

  it('copies the source with its marks, records the status, and writes nothing when nothing changed', async () => {
    source(ips(3));
    expect(await worker.reconcile()).toEqual({ kind: 'synced', upserts: 3, removes: 0, conflicts: 0 });
    expect(copies(b).map((i) => i.ip)).toEqual(ips(3));
    expect(copies(b)[0]?.metadata).toEqual({ 'regsync.origin': 'a', 'regsync.path': 'a', 'regsync.task': 't' });
    expect(status()).toMatchObject({ sourceInstances: 3, destinationInstances: 3, lastError: null, problems: [], held: null });
    const writes = b.calls.filter((c) => c.startsWith('apply')).length;
    expect(await worker.reconcile()).toEqual({ kind: 'synced', upserts: 0, removes: 0, conflicts: 0 });
    expect(b.calls.filter((c) => c.startsWith('apply'))).toHaveLength(writes);
  });

  it('tells whether a reconcile would write anything, reading both sides and writing nothing', async () => {
    const key = serviceSyncKey({ taskId: 't', service: SERVICE });
    const writes = () => b.calls.filter((c) => c.startsWith('apply')).length;
    source(ips(2));
    await worker.reconcile();
    const recorded = structuredClone(status());
    const written = writes();
    expect(await worker.reconciler.inSync(key)).toBe(true);
    // A copy removed at the destination by hand, then a source change: found, and nothing written or recorded.
    b.put(SERVICE, copies(b).slice(1));
    expect(await worker.reconciler.inSync(key)).toBe(false);
    expect(writes()).toBe(written);
    expect(status()).toEqual(recorded);
    await worker.reconcile();
    expect(await worker.reconciler.inSync(key)).toBe(true);
    source(ips(3));
    expect(await worker.reconciler.inSync(key)).toBe(false);
    await worker.reconcile();
    expect(await worker.reconciler.inSync(key)).toBe(true);
    // A destination that cannot be read is no proof: a reconcile deals with it.
    b.failReads = new Error('destination down');
    expect(await worker.reconciler.inSync(key)).toBe(false);
  });

  it('stops beating the copies it removes before the removal is sent, so no beat registers one again', async () => {
    a.put(SERVICE, ips(3).map((ip) => ({ ...instance(ip), ephemeral: true })));
    await worker.reconcile();
    expect(worker.heartbeats.stats().entries).toBe(3);
    // What the destination is asked to remove is, by then, beaten no more: a beat of a copy already
    // removed answers "unknown", and the beat would register it again.
    const beatenWhileRemoving: number[] = [];
    const apply = b.apply.bind(b);
    b.apply = async (service, plan) => {
      if (plan.remove.length > 0) beatenWhileRemoving.push(worker.heartbeats.stats().entries);
      return apply(service, plan);
    };
    a.put(SERVICE, ips(2).map((ip) => ({ ...instance(ip), ephemeral: true })));
    expect(await worker.reconcile()).toMatchObject({ kind: 'synced', removes: 1 });
    expect(beatenWhileRemoving).toEqual([2]);
    expect(worker.heartbeats.stats().entries).toBe(2);
  });

  it('says why source instances have no copy: unhealthy, disabled, a loop mark, an address taken', async () => {
    a.put(SERVICE, [
      instance('10.9.0.1'),
      { ...instance('10.9.0.2'), healthy: false },
      { ...instance('10.9.0.3'), enabled: false },
      { ...instance('10.9.0.4'), metadata: { 'regsync.origin': 'b', 'regsync.path': 'b' } },
      instance('10.9.0.5'),
    ]);
    b.put(SERVICE, [instance('10.9.0.5')]);
    await worker.reconcile();
    expect(status()).toMatchObject({ sourceInstances: 5, destinationInstances: 1, skipped: { unhealthy: 1, disabled: 1, marked: 1, conflicting: 1 } });
    a.put(SERVICE, [instance('10.9.0.1')]);
    await worker.reconcile();
    expect(status()?.skipped).toBeUndefined();
  });

  describe('read', () => {
    it('rejects on a failed source read, removes nothing, and names the source', async () => {
      source(ips(3));
      await worker.reconcile();
      a.failReads = new Error('ECONNREFUSED');
      await expect(worker.reconcile()).rejects.toThrow('ECONNREFUSED');
      expect(copies(b)).toHaveLength(3);
      expect(status()).toMatchObject({
        sourceInstances: 3,
        lastError: 'cannot read source a: ECONNREFUSED',
        problems: [{ code: 'source_unreadable', side: 'source', cluster: 'a', message: 'cannot read source a: ECONNREFUSED' }],
      });
      expect(worker.events).toContainEqual(expect.objectContaining({ kind: 'error', message: 'cannot read source a: ECONNREFUSED' }));
    });

    it('blames the destination, not the source, for a destination that cannot be used', async () => {
      source(ips(1));
      store.clusters.delete('b');
      await expect(worker.reconcile()).rejects.toThrow('cluster b does not exist');
      expect(status()?.problems).toEqual([{ code: 'cluster_unavailable', side: 'destination', cluster: 'b', message: 'cannot use destination b: cluster b does not exist', cause: 'unknown_cluster' }]);
      expect(status()?.lastError).toBe('cannot use destination b: cluster b does not exist');
    });

    it('blames the source for a source that cannot be used', async () => {
      store.clusters.delete('a');
      await expect(worker.reconcile()).rejects.toThrow('cluster a does not exist');
      expect(status()?.problems).toEqual([{ code: 'cluster_unavailable', side: 'source', cluster: 'a', message: 'cannot use source a: cluster a does not exist', cause: 'unknown_cluster' }]);
    });

    it('names the destination when its read fails', async () => {
      source(ips(1));
      b.failReads = new Error('timeout');
      await expect(worker.reconcile()).rejects.toThrow('timeout');
      expect(status()?.problems).toEqual([{ code: 'destination_unreadable', side: 'destination', cluster: 'b', message: 'cannot read destination b: timeout' }]);
    });
  });

  describe('guards', () => {
    it('refuses a service over maxInstances and leaves its copies', async () => {
      setup({ maxInstances: 2 });
      source(ips(3));
      expect(await worker.reconcile()).toEqual({ kind: 'refused', reason: expect.stringContaining("more than the task's maxInstances (2)") });
      expect(b.instances(SERVICE)).toEqual([]);
      expect(status()?.problems?.[0]?.code).toBe('over_instance_limit');
    });

    it('holds a sudden drop to empty until a read confirmEmptyMs after the first still lists nothing', async () => {
      source(ips(3));
      await worker.reconcile();
      source([]);
      at(1_000);
      expect(await worker.reconcile()).toMatchObject({ kind: 'held', requeueAfterMs: 3_010 });
      expect(copies(b)).toHaveLength(3);
      expect(status()).toMatchObject({ sourceInstances: 3, problems: [{ code: 'empty_source_held', side: 'source' }] });
      expect(store.guardOf('t', SERVICE)).toEqual({ emptySince: T0 + 1_000 });
      at(3_000);
      expect(await worker.reconcile()).toMatchObject({ kind: 'held', requeueAfterMs: 1_010 });
      expect(copies(b)).toHaveLength(3);
      at(4_000);
      expect(await worker.reconcile()).toMatchObject({ kind: 'synced', removes: 3 });
      expect(copies(b)).toEqual([]);
      expect(status()).toMatchObject({ sourceInstances: 0, destinationInstances: 0, lastError: null });
      expect(store.guardOf('t', SERVICE)?.emptySince).toBeUndefined();
    });

    it('starts the empty-source wait anew once the source listed instances again', async () => {
      source(ips(3));
      await worker.reconcile();
      source([]);
      await worker.reconcile();
      source(ips(3));
      at(1_000);
      // A reconcile that goes through reads nothing of the guards: its lastSyncAt ends the wait.
      await worker.reconcile();
      source([]);
      at(5_000);
      expect(await worker.reconcile()).toMatchObject({ kind: 'held' });
      expect(copies(b)).toHaveLength(3);
    });

    it('keeps the empty-source wait through a failed destination read', async () => {
      source(ips(3));
      await worker.reconcile();
      source([]);
      await worker.reconcile();
      source(ips(3));
      b.failReads = new Error('timeout');
      at(1_000);
      await expect(worker.reconcile()).rejects.toThrow('timeout');
      // The source listed instances again: a later empty read starts a new wait, whatever failed after it.
      expect(store.guardOf('t', SERVICE)).toBeUndefined();
    });

    it('holds a burst of single removals that adds up to more than the share, judged over the window', async () => {
      setup({ massDeletionConfirm: 'operator' });
      const all = ips(6);
      source(all);
      await worker.reconcile();
      for (let gone = 1; gone <= 5; gone += 1) {
        at(gone * 200);
        source(all.slice(gone));
        await worker.reconcile();
      }
      // 3 of 6 (50%) may go; the 4th and 5th removals are held.
      expect(copies(b)).toHaveLength(3);
      expect(status()?.held).toMatchObject({ removes: 2, copies: 3, peak: 6, confirm: 'operator' });
      expect(status()?.lastError).toMatch(/^holding a mass deletion: 2 of 3 copies would be removed, 5 of 6 within 60 s \(83%\); released by POST \/api\/v1\/tasks\/t\/release$/);
      // Held at the 4th removal, and held anew (a larger drop) at the 5th.
      expect(worker.events.filter((e) => e.kind === 'held').map((e) => e.message.split(';')[0])).toEqual([
        'holding a mass deletion: 1 of 3 copies would be removed, 4 of 6 within 60 s (67%)',
        'holding a mass deletion: 2 of 3 copies would be removed, 5 of 6 within 60 s (83%)',
      ]);

      store.release('t', SERVICE);
      expect(await worker.reconcile()).toMatchObject({ kind: 'synced', removes: 2 });
      expect(copies(b).map((i) => i.ip)).toEqual(['10.9.0.6']);
      expect(status()?.held).toBeNull();
      expect(store.guardOf('t', SERVICE)).toBeUndefined();
    });

    it('lets removals through once the copies they are judged against are older than the window', async () => {
      setup({ massDeletionConfirm: 'operator', massDeletionWindowMs: 10_000 });
      const all = ips(6);
      source(all);
      await worker.reconcile();
      source(all.slice(3));
      at(1_000);
      await worker.reconcile();
      expect(copies(b)).toHaveLength(3);
      source(all.slice(5));
      at(12_000);
      expect(await worker.reconcile()).toMatchObject({ kind: 'synced', removes: 2 });
      expect(copies(b)).toHaveLength(1);
    });

    it('applies a held drop when a read confirmEmptyMs later plans no larger one, and holds a growing drop anew', async () => {
      const all = ips(10);
      source(all);
      await worker.reconcile();
      source(all.slice(6));
      at(100);
      expect(await worker.reconcile()).toMatchObject({ kind: 'synced', removes: 0, requeueAfterMs: 3_010 });
      expect(status()?.held).toMatchObject({ removes: 6, copies: 10, since: new Date(T0 + 100).toISOString() });
      // What a release would remove, by address.
      expect(status()?.held?.addresses).toEqual(all.slice(0, 6).map((ip) => `${ip}:8080#DEFAULT`).sort());
      source(all.slice(7));
      at(3_200);
      await worker.reconcile();
      // The drop grew (7 of 10): held again from now.
      expect(copies(b)).toHaveLength(10);
      expect(status()?.held).toMatchObject({ removes: 7, since: new Date(T0 + 3_200).toISOString() });
      at(6_300);
      expect(await worker.reconcile()).toMatchObject({ kind: 'synced', removes: 7 });
      expect(copies(b)).toHaveLength(3);
      expect(worker.events.map((e) => e.kind)).toEqual(['reconciled', 'held', 'held', 'released', 'reconciled']);
    });

    it('does not take a release when nothing is held', async () => {
      source(ips(6));
      await worker.reconcile();
      store.release('t', SERVICE);
      source(ips(5));
      await worker.reconcile();
      expect(store.releases.size).toBe(1);
    });
  });

  describe('apply', () => {
    it('ends as refused, without a retry, when the destination refuses the write for good', async () => {
      source(ips(1));
      b.failWrites = new WriteRefusedError('not-owned', 'service orders is not regsync\'s');
      expect(await worker.reconcile()).toEqual({ kind: 'refused', reason: "service orders is not regsync's" });
      expect(status()?.problems).toEqual([{ code: 'write_refused', side: 'destination', cluster: 'b', message: "cannot write destination b: service orders is not regsync's", cause: 'not-owned' }]);
    });

    it('rejects when a write fails, naming the destination', async () => {
      source(ips(1));
      b.failWrites = new Error('HTTP 500');
      await expect(worker.reconcile()).rejects.toThrow('HTTP 500');
      expect(status()?.problems?.[0]).toMatchObject({ code: 'destination_unwritable', side: 'destination', cluster: 'b' });
    });
  });

  describe('record', () => {
    it('reports address conflicts and skipped source entries as problems of their side', async () => {
      source(ips(2));
      const foreign: Instance = instance('10.9.0.1', { owner: 'someone' });
      b.put(SERVICE, [foreign]);
      a.readIssues = () => ['node x is not a provider URL'];
      await worker.reconcile();
      expect(status()?.problems?.map((p) => [p.code, p.side])).toEqual([
        ['address_conflict', 'destination'],
        ['source_skipped', 'source'],
      ]);
      expect(status()?.lastError).toBe(
        '1 instance(s) not written: their address is taken in b by an instance this task does not own (10.9.0.1:8080#DEFAULT); skipped in source a: node x is not a provider URL',
      );
    });

    it('forgets a service sync whose service left the source once its copies are gone', async () => {
      let listed = true;
      worker = harnessWorker(store, registries, () => task, { stillListed: async () => listed });
      source(ips(1));
      await worker.reconcile();
      listed = false;
      source([]);
      await worker.reconcile();
      at(4_000);
      await worker.reconcile();
      expect(copies(b)).toEqual([]);
      expect(status()).toBeUndefined();
      expect(worker.events.at(-1)).toMatchObject({ kind: 'removed' });
    });

    it('does nothing for a task that does not run here', async () => {
      source(ips(1));
      store.tasks.clear();
      worker = harnessWorker(store, registries, () => undefined);
      expect(await worker.reconcile()).toEqual({ kind: 'inactive' });
      expect(a.calls).toEqual([]);
    });
  });
});
