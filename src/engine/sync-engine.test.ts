import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../log.js';
import { instancesDigest, MARK_ORIGIN, MARK_PATH, MARK_TASK, serviceSyncKey, type ServiceKey, type ServicesChange, type TaskSpec } from '../model/index.js';
import { FakeAdapter, instance } from '../../test/support/fake-adapter.js';
import { MemoryEngineStore, MemoryMissingServices } from '../../test/support/memory-engine-store.js';
import { harnessCluster, harnessTask } from '../../test/support/reconciler-harness.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { AdapterPool } from './adapter-pool.js';
import { HeartbeatScheduler } from './heartbeat-scheduler.js';
import { FULL_SYNC_SLICE, SyncEngine } from './sync-engine.js';

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

/** Periodic full syncs where the source pushes whole lists and the destination keeps copies with every replica's connection. */
describe('SyncEngine full syncs of pushed sources into connection-bound destinations', () => {
  it('leave out services whose pushed list equals their last status, and reconcile those a verifying check finds different', async () => {
    const store = new MemoryEngineStore();
    const logger = silentLogger();
    store.clusters.set('a', harnessCluster('a'));
    store.clusters.set('b', harnessCluster('b'));
    const source = Object.assign(new FakeAdapter('a'), {
      cachedDigest: (service: ServiceKey) => instancesDigest(source.instances(service)),
    });
    const destination = Object.assign(new FakeAdapter('b'), { connectionBound: async () => true });
    source.put(svc('orders'), [instance('10.7.0.1')]);
    source.put(svc('billing'), [instance('10.7.0.2')]);
    // Every service is checked against the destination every second full sync.
    store.tasks.set('t', { ...harnessTask({ fullSyncIntervalMs: 10, verifyIntervalMs: 20 }), service: '*' });
    for (const [name, digest] of [['orders', instancesDigest(source.instances(svc('orders')))], ['billing', 'digest-before']] as const) {
      await store.putServiceStatus('t', { service: svc(name), sourceInstances: 1, destinationInstances: 1, lastSyncAt: null, lagMs: null, lastError: null, problems: [], sourceDigest: digest, held: null });
    }
    const registries = new Map<string, FakeAdapter>([['a', source], ['b', destination]]);
    const adapters = new AdapterPool((id) => store.getCluster(id), { nacos: (spec) => registries.get(spec.id) as FakeAdapter }, logger);
    const full: string[] = [];
    const engine = new SyncEngine({
      store,
      adapters,
      heartbeats: new HeartbeatScheduler({ logger }),
      logger,
      queue: { enqueue: async (k, reason) => void (reason === 'full' && full.push(decodeURIComponent(k).split('|')[3] as string)) },
      missing: new MemoryMissingServices(),
    });
    const checks = () => destination.calls.filter((c) => c === 'listInstances public/DEFAULT_GROUP/orders').length;
    try {
      await engine.start();
      // `billing` changed since its last reconcile: due at every full sync. `orders` did not, but
      // the destination lacks its copy: the check finds it.
      await vi.waitFor(() => expect(full.filter((n) => n === 'orders').length).toBeGreaterThanOrEqual(1), { timeout: 5_000 });
      // Once its copy is there, checks go on and find nothing to do.
      await engine.reconciler.reconcile(serviceSyncKey({ taskId: 't', service: svc('orders') }));
      full.length = 0;
      const checked = checks();
      await vi.waitFor(() => expect(checks()).toBeGreaterThanOrEqual(checked + 3), { timeout: 5_000 });
      expect(full.filter((n) => n === 'billing').length).toBeGreaterThanOrEqual(3);
      expect(full.filter((n) => n === 'orders')).toEqual([]);
      // An operator's resync reconciles everything.
      full.length = 0;
      await engine.resync('t');
      expect(full.sort()).toEqual(expect.arrayContaining(['billing', 'orders']));
    } finally {
      await engine.stop();
    }
  });
});

/** A worker coming to lead a shard: what it watches and what it reconciles. */
describe('SyncEngine taking a shard over', () => {
  const setup = (bound: boolean) => {
    const store = new MemoryEngineStore();
    const logger = silentLogger();
    store.clusters.set('a', harnessCluster('a'));
    store.clusters.set('b', harnessCluster('b'));
    const source = Object.assign(new FakeAdapter('a'), { cachedDigest: (service: ServiceKey) => instancesDigest(source.instances(service)) });
    // Its subscriptions hand their first read to the watcher, as Nacos gRPC does.
    const watch = source.watch.bind(source);
    source.watch = (service, onChange) => {
      queueMicrotask(() => onChange({ firstRead: source.instances(service) }));
      return watch(service, onChange);
    };
    const destination = Object.assign(new FakeAdapter('b'), { connectionBound: async () => bound });
    source.put(svc('orders'), [instance('10.7.0.1')]);
    source.put(svc('billing'), [instance('10.7.0.2')]);
    store.tasks.set('t', { ...harnessTask(), service: '*' });
    const registries = new Map<string, FakeAdapter>([['a', source], ['b', destination]]);
    const adapters = new AdapterPool((id) => store.getCluster(id), { nacos: (spec) => registries.get(spec.id) as FakeAdapter }, logger);
    const queued: Array<{ name: string; reason: string }> = [];
    const enqueue = async (k: string, reason: string) => void queued.push({ name: decodeURIComponent(k).split('|')[3] as string, reason });
    let leading = false;
    const engine = new SyncEngine({
      store,
      adapters,
      heartbeats: new HeartbeatScheduler({ logger }),
      logger,
      leads: () => leading,
      queue: { enqueue, enqueueMany: async (keys, reason) => void (await Promise.all(keys.map((k) => enqueue(k, reason)))) },
      missing: new MemoryMissingServices(),
    });
    const lead = async () => {
      leading = true;
      await engine.leadShard(0);
    };
    return { store, source, engine, queued, lead };
  };
  const recordStatus = async (store: MemoryEngineStore, name: string, sourceDigest: string) =>
    store.putServiceStatus('t', { service: svc(name), sourceInstances: 1, destinationInstances: 1, lastSyncAt: null, lagMs: null, lastError: null, problems: [], sourceDigest, held: null });

  it('reconciles only what changed since the last reconcile, where the source pushes and the destination keeps copies with every replica', async () => {
    const { store, source, engine, queued, lead } = setup(true);
    await recordStatus(store, 'orders', instancesDigest(source.instances(svc('orders'))));
    await recordStatus(store, 'billing', 'digest-before');
    // Each first read is compared with the last status.
    const compared: string[] = [];
    const getStatus = store.getServiceStatus.bind(store);
    store.getServiceStatus = async (taskId, service) => {
      const status = await getStatus(taskId, service);
      compared.push(service.name);
      return status;
    };
    try {
      await engine.start();
      expect(queued).toEqual([]);
      await lead();
      await waitUntil(() => compared.length === 2 && queued.length === 1);
      expect(queued).toEqual([{ name: 'billing', reason: 'change' }]);
    } finally {
      await engine.stop();
    }
  });

  it('queues a first read of a service never reconciled as a start, behind changes, and one that differs from its status as a change', async () => {
    const { store, engine, queued, lead } = setup(true);
    await recordStatus(store, 'billing', 'digest-before');
    try {
      await engine.start();
      await lead();
      await waitUntil(() => queued.length === 2);
      expect(queued.sort((x, y) => x.name.localeCompare(y.name))).toEqual([
        { name: 'billing', reason: 'change' },
        { name: 'orders', reason: 'start' },
      ]);
    } finally {
      await engine.stop();
    }
  });

  it('reconciles every service of the shard where copies need a leader to keep them', async () => {
    const { store, source, engine, queued, lead } = setup(false);
    await recordStatus(store, 'orders', instancesDigest(source.instances(svc('orders'))));
    await recordStatus(store, 'billing', 'digest-before');
    try {
      await engine.start();
      await lead();
      await waitUntil(() => queued.filter((q) => q.reason === 'start').length === 2);
      expect(queued.filter((q) => q.reason === 'start').map((q) => q.name).sort()).toEqual(['billing', 'orders']);
    } finally {
      await engine.stop();
    }
  });
});

/** A 1,200-service `*` task: full syncs go out in slices of FULL_SYNC_SLICE, paced by the queues' depth. */
describe('SyncEngine full syncs in slices', () => {
  const SERVICES = 1_200;
  const names = Array.from({ length: SERVICES }, (_, i) => `s${String(i).padStart(4, '0')}`);

  /** A store that reads a slice's statuses at once, counting the reads. */
  class BatchStore extends MemoryEngineStore {
    readonly batchReads: number[] = [];
    async getServiceStatuses(taskId: string, services: readonly ServiceKey[]) {
      this.batchReads.push(services.length);
      return Promise.all(services.map((s) => this.getServiceStatus(taskId, s)));
    }
  }

  const setup = (opts: { pushed?: (name: string) => string | undefined; fullSyncIntervalMs?: number; verifyIntervalMs?: number } = {}) => {
    const store = new BatchStore();
    const logger = silentLogger();
    store.clusters.set('a', harnessCluster('a'));
    store.clusters.set('b', harnessCluster('b'));
    const source = Object.assign(new FakeAdapter('a'), opts.pushed ? { cachedDigest: (s: ServiceKey) => opts.pushed?.(s.name) } : {});
    const destination = Object.assign(new FakeAdapter('b'), { connectionBound: async () => opts.pushed !== undefined });
    for (const name of names) source.put(svc(name), [instance('10.7.0.1')]);
    // The destination holds every copy already, as a verifying check finds it.
    for (const name of names) destination.put(svc(name), [{ ...instance('10.7.0.1'), metadata: { [MARK_ORIGIN]: 'a', [MARK_PATH]: 'a', [MARK_TASK]: 't' } }]);
    store.tasks.set('t', { ...harnessTask({ fullSyncIntervalMs: opts.fullSyncIntervalMs ?? 3_600_000, verifyIntervalMs: opts.verifyIntervalMs, maxServices: 10_000 }), service: '*' });
    const registries = new Map<string, FakeAdapter>([['a', source], ['b', destination]]);
    const adapters = new AdapterPool((id) => store.getCluster(id), { nacos: (spec) => registries.get(spec.id) as FakeAdapter }, logger);
    const batches: Array<{ reason: string; keys: string[] }> = [];
    const sink = {
      depth: 0,
      depthAsked: 0,
      async enqueue(k: string, reason: string) {
        batches.push({ reason, keys: [k] });
      },
      async enqueueMany(keys: readonly string[], reason: string) {
        batches.push({ reason, keys: [...keys] });
      },
    };
    const engine = new SyncEngine({
      store,
      adapters,
      heartbeats: new HeartbeatScheduler({ logger }),
      logger,
      queue: {
        enqueue: (k, reason) => sink.enqueue(k, reason),
        enqueueMany: (keys, reason) => sink.enqueueMany(keys, reason),
        depth: async () => {
          sink.depthAsked += 1;
          return sink.depth;
        },
      },
      missing: new MemoryMissingServices(),
    });
    const full = () => batches.filter((b) => b.reason === 'full');
    const nameOf = (k: string) => decodeURIComponent(k).split('|')[3] as string;
    return { store, source, destination, engine, sink, batches, full, nameOf };
  };

  it('queues a slice at a time, the next once the queues have room, and reaches every service and the ones added since', async () => {
    const { source, engine, sink, batches, full, nameOf } = setup();
    try {
      await engine.start();
      source.put(svc('zz-added'), [instance('10.7.0.9')]);
      // The queues are busy: after its first slice the full sync waits for room.
      sink.depth = 10_000;
      await engine.resync('t');
      expect(full().map((b) => b.keys.length)).toEqual([FULL_SYNC_SLICE]);
      const asked = sink.depthAsked;
      await vi.waitFor(() => expect(sink.depthAsked).toBeGreaterThan(asked + 1));
      expect(full()).toHaveLength(1);
      sink.depth = 0;
      await vi.waitFor(() => expect(full().flatMap((b) => b.keys)).toHaveLength(SERVICES));
      for (const b of full()) expect(b.keys.length).toBeLessThanOrEqual(FULL_SYNC_SLICE);
      expect(full().flatMap((b) => b.keys).map(nameOf).sort()).toEqual(names);
      // The service that appeared since the task started is started by the full sync's listing, not left for the next.
      expect(batches.filter((b) => b.reason === 'start').flatMap((b) => b.keys).map(nameOf)).toContain('zz-added');
    } finally {
      await engine.stop();
    }
  });

  it('reads each slice of statuses at once, queues only what the feeds do not vouch for, and reads again only what moved', async () => {
    // Every 7th service's pushed list differs from its last status.
    const changed = new Set(names.filter((_, i) => i % 7 === 0));
    const { store, destination, engine, full, nameOf } = setup({ pushed: (name) => (changed.has(name) ? 'digest-now' : `digest-${name}`), fullSyncIntervalMs: 20, verifyIntervalMs: 100 });
    for (const name of names) {
      await store.putServiceStatus('t', { service: svc(name), sourceInstances: 1, destinationInstances: 1, lastSyncAt: null, lagMs: null, lastError: null, problems: [], sourceDigest: `digest-${name}`, held: null });
    }
    try {
      await engine.start();
      await vi.waitFor(() => expect(store.batchReads.length).toBeGreaterThanOrEqual(8), { timeout: 10_000 });
      // One batch read per slice of the first full sync; after it, the statuses found matching are
      // not read again (only the changed ones, and a tenth of the rest in their reread round). The
      // verifying checks (a fifth of the services at each full sync) find every copy in place.
      expect(store.batchReads.slice(0, 3)).toEqual([500, 500, 200]);
      for (const n of store.batchReads.slice(3)) expect(n).toBeLessThan(500);
      expect(new Set(full().flatMap((b) => b.keys).map(nameOf))).toEqual(changed);
      for (const b of full()) expect(b.keys.length).toBeLessThanOrEqual(FULL_SYNC_SLICE);
      expect(destination.calls.filter((c) => c.startsWith('listInstances')).length).toBeGreaterThan(SERVICES / 5);
    } finally {
      await engine.stop();
    }
  });
});

/**
 * An engine running task `t` (`*`) from source `source` to a fake `b`, over an in-memory store:
 * every queued key goes to `queued` with its reason.
 */
function wildcardEngine(source: FakeAdapter, taskOptions: Parameters<typeof harnessTask>[0] = {}) {
  const store = new MemoryEngineStore();
  const logger = silentLogger();
  store.clusters.set('a', harnessCluster('a'));
  store.clusters.set('b', harnessCluster('b'));
  store.tasks.set('t', { ...harnessTask(taskOptions), service: '*' });
  const registries = new Map<string, FakeAdapter>([['a', source], ['b', new FakeAdapter('b')]]);
  const adapters = new AdapterPool((id) => store.getCluster(id), { nacos: (spec) => registries.get(spec.id) as FakeAdapter }, logger);
  const queued: Array<{ key: string; reason: string }> = [];
  const engine = new SyncEngine({
    store,
    adapters,
    heartbeats: new HeartbeatScheduler({ logger }),
    logger,
    queue: { enqueue: async (key, reason) => void queued.push({ key, reason }) },
    missing: new MemoryMissingServices(),
  });
  return { engine, queued };
}

describe('SyncEngine expansions of a `*` task', () => {
  it('runs at most one listing at a time and one after it, however many list changes come meanwhile', async () => {
    let lists = 0;
    let gate: Promise<void> | undefined;
    let open: () => void = () => {};
    const changed = new Set<() => void>();
    const source = Object.assign(new FakeAdapter('a'), {
      watchServices: (_scope: unknown, onChange: () => void) => {
        changed.add(onChange);
        return () => changed.delete(onChange);
      },
    });
    const list = source.listServices.bind(source);
    source.listServices = async (scope) => {
      lists += 1;
      await gate;
      return list(scope);
    };
    source.put(svc('orders'), [instance('10.7.0.1')]);
    const { engine, queued } = wildcardEngine(source);
    const started = () => queued.filter((q) => q.reason === 'start').map((q) => q.key);
    try {
      await engine.start();
      expect(lists).toBe(1);
      // The next listing hangs; ten list changes arrive meanwhile.
      gate = new Promise<void>((resolve) => (open = resolve));
      source.put(svc('billing'), [instance('10.7.0.2')]);
      for (const onChange of changed) onChange();
      await vi.waitFor(() => expect(lists).toBe(2));
      for (let i = 0; i < 10; i += 1) for (const onChange of changed) onChange();
      open();
      await vi.waitFor(() => expect(started()).toContain(key('billing')));
      await vi.waitFor(() => expect(lists).toBe(3));
      // Settled: nothing else lists.
      await new Promise((resolve) => setImmediate(resolve));
      expect(lists).toBe(3);
      expect(started().filter((k) => k === key('billing'))).toHaveLength(1);
    } finally {
      await engine.stop();
    }
  });
});

describe('SyncEngine full syncs of a `*` task whose source pushes its service list', () => {
  const setup = (pushed: { value: boolean }) => {
    let lists = 0;
    const source = Object.assign(new FakeAdapter('a'), {
      watchServices: () => () => {},
      servicesPushed: () => pushed.value,
    });
    const list = source.listServices.bind(source);
    source.listServices = async (scope) => {
      lists += 1;
      return list(scope);
    };
    source.put(svc('orders'), [instance('10.7.0.1')]);
    const { engine, queued } = wildcardEngine(source, { fullSyncIntervalMs: 20 });
    const full = {
      get length() {
        return queued.filter((q) => q.reason === 'full').length;
      },
      keys: () => queued.filter((q) => q.reason === 'full').map((q) => q.key),
      clear: () => void queued.splice(0),
    };
    return { engine, full, lists: () => lists };
  };

  it('lists the source only every 10th time and on a resync, and still reconciles every service each time', async () => {
    const pushed = { value: true };
    const { engine, full, lists } = setup(pushed);
    try {
      await engine.start();
      expect(lists()).toBe(1);
      const before = lists();
      await engine.resync('t');
      expect(lists()).toBe(before + 1);
      full.clear();
      const listed = lists();
      await vi.waitFor(() => expect(full.length).toBeGreaterThanOrEqual(25), { timeout: 10_000 });
      await engine.stop();
      // 25 or more periodic full syncs, each reconciling `orders`; only every 10th listed the source
      // (one more may have listed when the engine stopped, before it queued).
      const walks = full.length;
      expect(lists() - listed).toBeGreaterThanOrEqual(Math.floor(walks / 10));
      expect(lists() - listed).toBeLessThanOrEqual(Math.floor((walks + 1) / 10));
      expect(new Set(full.keys())).toEqual(new Set([key('orders')]));
    } finally {
      await engine.stop();
    }
  });

  it('lists at every full sync while the pushed list is not whole', async () => {
    const pushed = { value: false };
    const { engine, full, lists } = setup(pushed);
    try {
      await engine.start();
      await vi.waitFor(() => expect(full.length).toBeGreaterThanOrEqual(3), { timeout: 10_000 });
      await engine.stop();
      expect(lists()).toBeGreaterThanOrEqual(1 + full.length);
    } finally {
      await engine.stop();
    }
  });
});

/** A `*` task whose source tells which services came and went (`RegistryAdapter.watchServices` with a change). */
describe('SyncEngine told of the services a `*` task\'s source added', () => {
  const setup = (taskOptions: Parameters<typeof harnessTask>[0] = {}) => {
    let lists = 0;
    let watches = 0;
    const watchers = new Set<(change?: ServicesChange) => void>();
    const source = Object.assign(new FakeAdapter('a'), {
      watchServices: (_scope: unknown, onChange: (change?: ServicesChange) => void) => {
        watchers.add(onChange);
        return () => watchers.delete(onChange);
      },
    });
    const list = source.listServices.bind(source);
    source.listServices = async (scope) => {
      lists += 1;
      return list(scope);
    };
    const watch = source.watch.bind(source);
    source.watch = (service, onChange) => {
      watches += 1;
      return watch(service, onChange);
    };
    source.put(svc('orders'), [instance('10.7.0.1')]);
    const { engine, queued } = wildcardEngine(source, taskOptions);
    const tell = (change?: ServicesChange) => {
      for (const onChange of watchers) onChange(change);
    };
    /** A service appears in the source, which tells of it. */
    const register = (name: string) => {
      source.put(svc(name), [instance('10.7.0.2')]);
      tell({ added: [svc(name)], removed: [] });
    };
    const reasons = (k: string) => queued.filter((q) => q.key === k).map((q) => q.reason);
    return { source, engine, queued, tell, register, reasons, lists: () => lists, watches: () => watches };
  };

  it('starts an added service, watched and queued, without listing the source', async () => {
    const { source, engine, register, reasons, lists, watches } = setup();
    try {
      await engine.start();
      expect(lists()).toBe(1);
      expect(watches()).toBe(1);
      register('billing');
      await waitUntil(() => reasons(key('billing')).includes('start'), { message: 'billing started' });
      expect(watches()).toBe(2);
      source.touch(svc('billing'));
      expect(reasons(key('billing'))).toEqual(['start', 'change']);
      // A service told added again is known: nothing more.
      register('billing');
      register('ledger');
      await waitUntil(() => reasons(key('ledger')).includes('start'), { message: 'ledger started' });
      expect(reasons(key('billing'))).toEqual(['start', 'change']);
      expect(watches()).toBe(3);
      expect(lists()).toBe(1);
    } finally {
      await engine.stop();
    }
  });

  it('leaves out added services the task excludes, without listing', async () => {
    const { engine, register, reasons, lists } = setup({ exclude: ['*-eu'] });
    try {
      await engine.start();
      register('orders-eu');
      register('billing');
      await waitUntil(() => reasons(key('billing')).includes('start'), { message: 'billing started' });
      expect(reasons(key('orders-eu'))).toEqual([]);
      expect(lists()).toBe(1);
    } finally {
      await engine.stop();
    }
  });

  it('lists the source when services were removed, when the change is not told, and for a task that maps names', async () => {
    const { source, engine, tell, reasons, lists } = setup();
    try {
      await engine.start();
      source.services.delete('public/DEFAULT_GROUP/orders');
      tell({ added: [], removed: [svc('orders')] });
      await waitUntil(() => lists() === 2, { message: 'listed for a removal' });
      source.put(svc('billing'), [instance('10.7.0.2')]);
      tell();
      await waitUntil(() => reasons(key('billing')).includes('start'), { message: 'billing started by a listing' });
      expect(lists()).toBe(3);
    } finally {
      await engine.stop();
    }

    const mapped = setup({ mapping: { prefix: 'copy-' } });
    try {
      await mapped.engine.start();
      mapped.register('billing');
      await waitUntil(() => mapped.reasons(key('billing')).includes('start'), { message: 'billing started by a listing' });
      expect(mapped.lists()).toBe(2);
    } finally {
      await mapped.engine.stop();
    }
  });

  it('lists the source when the task is at its maxServices', async () => {
    const { engine, register, reasons, lists } = setup({ maxServices: 2 });
    try {
      await engine.start();
      register('billing');
      await waitUntil(() => reasons(key('billing')).includes('start'), { message: 'billing started' });
      expect(lists()).toBe(1);
      register('ledger');
      await waitUntil(() => lists() === 2, { message: 'listed at the limit' });
      expect(reasons(key('ledger'))).toEqual([]);
    } finally {
      await engine.stop();
    }
  });

  it('starts a service told added while an expansion lists once that expansion ended, watching it once', async () => {
    const { source, engine, tell, register, reasons, lists, watches } = setup();
    let open: () => void = () => {};
    try {
      await engine.start();
      const list = source.listServices.bind(source);
      const gate = new Promise<void>((resolve) => (open = resolve));
      source.listServices = async (scope) => {
        const listed = await list(scope);
        await gate;
        return listed;
      };
      // An expansion lists (and hangs); meanwhile `billing` appears, and is told.
      tell();
      await waitUntil(() => lists() === 2, { message: 'the expansion lists' });
      register('billing');
      await new Promise((resolve) => setImmediate(resolve));
      expect(reasons(key('billing'))).toEqual([]);
      open();
      await waitUntil(() => reasons(key('billing')).includes('start'), { message: 'billing started' });
      expect(reasons(key('billing'))).toEqual(['start']);
      expect(watches()).toBe(2);
      expect(await engine.stillListed(key('billing'))).toBe(true);
      expect(lists()).toBe(2);
    } finally {
      open();
      await engine.stop();
    }
  });

  it('clears the missing mark of a service told added again, as a listing finding it would', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(T0);
    const { source, engine, tell, register, lists } = setup();
    try {
      source.put(svc('billing'), [instance('10.7.0.2')]);
      await engine.start();
      source.services.delete('public/DEFAULT_GROUP/billing');
      tell({ added: [], removed: [svc('billing')] });
      await vi.waitFor(() => expect(lists()).toBe(2));
      register('billing');
      vi.setSystemTime(T0 + 3_100);
      await vi.waitFor(async () => expect(await engine.stillListed(key('billing'))).toBe(true));
      expect(lists()).toBe(2);
    } finally {
      await engine.stop();
      vi.useRealTimers();
    }
  });
});
