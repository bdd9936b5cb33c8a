import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { AdapterPool } from '../../src/engine/adapter-pool.js';
import { HeartbeatScheduler } from '../../src/engine/heartbeat-scheduler.js';
import { SyncEngine } from '../../src/engine/sync-engine.js';
import { silentLogger } from '../../src/log.js';
import { MARK_TASK, serviceSyncKey, type TaskSpec } from '../../src/model/index.js';
import { MissingServices, RegsyncStore } from '../../src/store/index.js';
import { FakeAdapter, instance } from '../support/fake-adapter.js';
import { harnessCluster, harnessTask, harnessWorker, SERVICE, type HarnessWorker } from '../support/reconciler-harness.js';
import { redisPerTest } from '../support/redis-per-test.js';

const T0 = Date.parse('2024-01-01T00:00:00.000Z');
const ips = (n: number) => Array.from({ length: n }, (_, i) => `10.8.0.${i + 1}`);

/**
 * Replicas of one shard share nothing but Redis: two reconcilers (two workers' worth of memory)
 * over one store on a real redis-server, reading the same registries. A decision that waits for a
 * confirming read must come out the same whichever replica reads next.
 */
describe('guards across replicas', () => {
  const r = redisPerTest();
  let store: RegsyncStore;
  let a: FakeAdapter;
  let b: FakeAdapter;
  let registries: Map<string, FakeAdapter>;
  let task: TaskSpec;
  const workers: HarnessWorker[] = [];
  const copies = () => b.instances(SERVICE).filter((i) => i.metadata[MARK_TASK] === 't');
  const source = (list: readonly string[]) => a.put(SERVICE, list.map((ip) => instance(ip)));
  const at = (ms: number) => vi.setSystemTime(T0 + ms);
  const worker = () => {
    const w = harnessWorker(store, registries, () => task);
    workers.push(w);
    return w;
  };

  beforeEach(async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    at(0);
    store = new RegsyncStore(r.redis, r.prefix);
    a = new FakeAdapter('a');
    b = new FakeAdapter('b');
    registries = new Map([
      ['a', a],
      ['b', b],
    ]);
    await store.putCluster(harnessCluster('a'));
    await store.putCluster(harnessCluster('b'));
  });
  afterEach(() => {
    for (const w of workers.splice(0)) w.heartbeats.stop();
    vi.useRealTimers();
  });

  const define = async (options: TaskSpec['options'] = {}) => {
    task = harnessTask(options);
    await store.putTask(task);
  };

  it('holds an empty read on the replica that never reconciled the service, as the one that saw it first does', async () => {
    await define();
    // Three copies: below massDeletionMinCopies, so only the empty-source guard stands between them and removal.
    source(ips(3));
    const first = worker();
    await first.reconcile();
    expect(copies()).toHaveLength(3);

    source([]);
    at(500);
    expect(await first.reconcile()).toMatchObject({ kind: 'held' });
    const second = worker();
    at(1_000);
    expect(await second.reconcile()).toMatchObject({ kind: 'held', requeueAfterMs: 2_510 });
    expect(copies()).toHaveLength(3);

    // A read confirmEmptyMs after the first empty one, on either replica, confirms it.
    at(3_600);
    expect(await second.reconcile()).toMatchObject({ kind: 'synced', removes: 3 });
    expect(copies()).toEqual([]);
  });

  it('holds a burst of five single deregistrations of a six-copy service, whichever replica reads each', async () => {
    await define({ massDeletionConfirm: 'operator' });
    const all = ips(6);
    source(all);
    const replicas = [worker(), worker()];
    await replicas[0]?.reconcile();
    for (let gone = 1; gone <= 5; gone += 1) {
      at(gone * 300);
      source(all.slice(gone));
      await replicas[gone % 2]?.reconcile();
    }
    expect(copies()).toHaveLength(3);
    expect((await store.getServiceStatus('t', SERVICE))?.held).toMatchObject({ removes: 2, copies: 3, peak: 6 });

    await store.releaseHeld('t', [SERVICE]);
    await replicas[0]?.reconcile();
    expect(copies().map((i) => i.ip)).toEqual(['10.8.0.6']);
  });

  it("drops a `*` task's vanished service when it has been missing confirmMs since any worker first missed it", async () => {
    const wildcard: TaskSpec = { ...harnessTask(), service: '*' };
    await store.putTask(wildcard);
    a.put({ ...SERVICE, name: 'stays' }, [instance('10.8.1.1')]);
    source(ips(1));
    const logger = silentLogger();
    const engines = [0, 1].map(() => {
      const adapters = new AdapterPool((id) => store.getCluster(id), { nacos: (spec) => registries.get(spec.id) as FakeAdapter }, logger);
      const heartbeats = new HeartbeatScheduler({ logger });
      const queued: string[] = [];
      return new SyncEngine({
        store,
        adapters,
        heartbeats,
        logger,
        queue: { enqueue: async (key) => void queued.push(key) },
        missing: new MissingServices(r.redis, r.prefix),
        confirmMs: 3_000,
      });
    });
    try {
      for (const engine of engines) await engine.start();
      const key = serviceSyncKey({ taskId: 't', service: SERVICE });
      expect(await engines[1]?.stillListed(key)).toBe(true);

      a.services.delete('public/DEFAULT_GROUP/orders');
      // The first worker's list misses it at 0 s, the second worker's first list at 2 s.
      await engines[0]?.resync('t');
      at(2_000);
      await engines[1]?.resync('t');
      expect(await engines[1]?.stillListed(key)).toBe(true);
      at(3_500);
      // 3.5 s after the first miss: gone for every worker, though the second missed it only 1.5 s ago.
      expect(await engines[1]?.stillListed(key)).toBe(false);

      // A list that finds it again clears the mark everywhere.
      source(ips(1));
      await engines[0]?.resync('t');
      expect(await engines[1]?.stillListed(key)).toBe(true);
    } finally {
      for (const engine of engines) await engine.stop();
    }
  });
});
