import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../log.js';
import { serviceSyncKey, type ServiceKey, type TaskSpec } from '../model/index.js';
import { FakeAdapter, instance } from '../../test/support/fake-adapter.js';
import { MemoryEngineStore, MemoryMissingServices } from '../../test/support/memory-engine-store.js';
import { harnessCluster, harnessTask } from '../../test/support/reconciler-harness.js';
import { AdapterPool } from './adapter-pool.js';
import { HeartbeatScheduler } from './heartbeat-scheduler.js';
import { SyncEngine } from './sync-engine.js';

const T0 = Date.parse('2024-01-01T00:00:00.000Z');
const svc = (name: string): ServiceKey => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });
const key = (name: string) => serviceSyncKey({ taskId: 't', service: svc(name) });

/** The engine's expansion of tasks into service syncs, against an in-memory store and a fake source. */
describe('SyncEngine', () => {
  let store: MemoryEngineStore;
  let a: FakeAdapter;
  let queued: Array<[string, string]>;
  let engine: SyncEngine;
  let missing: MemoryMissingServices;

  const start = async (task: TaskSpec) => {
    store.tasks.set(task.id, task);
    await engine.start();
  };
  const at = (ms: number) => vi.setSystemTime(T0 + ms);

  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['Date'] });
    at(0);
    store = new MemoryEngineStore();
    a = new FakeAdapter('a');
    const b = new FakeAdapter('b');
    store.clusters.set('a', harnessCluster('a'));
    store.clusters.set('b', harnessCluster('b'));
    const logger = silentLogger();
    const registries = new Map([
      ['a', a],
      ['b', b],
    ]);
    const adapters = new AdapterPool((id) => store.getCluster(id), { nacos: (spec) => registries.get(spec.id) as FakeAdapter }, logger);
    queued = [];
    missing = new MemoryMissingServices();
    engine = new SyncEngine({
      store,
      adapters,
      heartbeats: new HeartbeatScheduler({ logger }),
      logger,
      queue: { enqueue: async (k, reason) => void queued.push([k, reason]) },
      missing,
      confirmMs: 3_000,
    });
  });
  afterEach(async () => {
    await engine.stop();
    vi.useRealTimers();
  });

  it("expands a `*` task into the services its patterns let through, and queues a start of each", async () => {
    for (const name of ['orders', 'orders-eu', 'billing', 'consumers:x']) a.put(svc(name), [instance('10.7.0.1')]);
    await start({ ...harnessTask({ include: ['orders*', 'billing', 'consumers:*'], exclude: ['*-eu'] }), service: '*' });
    expect(queued.map(([k, reason]) => [decodeURIComponent(k), reason]).sort()).toEqual([
      ['t|public|DEFAULT_GROUP|billing', 'start'],
      ['t|public|DEFAULT_GROUP|consumers:x', 'start'],
      ['t|public|DEFAULT_GROUP|orders', 'start'],
    ]);
  });

  it('turns a watch event into a change reconcile', async () => {
    a.put(svc('orders'), [instance('10.7.0.1')]);
    await start(harnessTask());
    queued = [];
    a.touch(svc('orders'));
    await vi.waitFor(() => expect(queued).toEqual([[key('orders'), 'change']]));
  });

  it('drops a vanished service only once a list confirmMs after the first miss still misses it', async () => {
    a.put(svc('orders'), [instance('10.7.0.1')]);
    a.put(svc('billing'), [instance('10.7.0.2')]);
    await start({ ...harnessTask(), service: '*' });
    a.services.delete('public/DEFAULT_GROUP/orders');
    queued = [];
    await engine.resync('t');
    expect(await engine.stillListed(key('orders'))).toBe(true);
    expect(queued.filter(([, reason]) => reason === 'change')).toEqual([]);
    at(3_100);
    await engine.resync('t');
    expect(await engine.stillListed(key('orders'))).toBe(false);
    // Its last reconcile removes the copies.
    expect(queued).toContainEqual([key('orders'), 'change']);
    expect(await engine.stillListed(key('billing'))).toBe(true);
  });

  it("says in the task's error what the expansion left out, and why a task cannot start", async () => {
    for (const name of ['a1', 'a2', 'a3']) a.put(svc(name), [instance('10.7.0.1')]);
    await start({ ...harnessTask({ maxServices: 2 }), service: '*' });
    expect(store.taskErrors.get('t')).toEqual({ code: 'services_left_out', cluster: 'a', message: '1 service(s) not synced: the task is at its maxServices (2)' });

    a.failReads = new Error('ECONNREFUSED');
    await engine.taskChanged('t');
    expect(store.taskErrors.get('t')).toEqual({ code: 'source_unlisted', cluster: 'a', message: 'cannot start: ECONNREFUSED' });
  });
});
