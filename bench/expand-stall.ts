import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { AdapterPool } from '../src/engine/adapter-pool.js';
import { HeartbeatScheduler } from '../src/engine/heartbeat-scheduler.js';
import { SyncEngine } from '../src/engine/sync-engine.js';
import { silentLogger } from '../src/log.js';
import type { ServiceKey, Unsubscribe } from '../src/model/index.js';
import { FakeAdapter } from '../test/support/fake-adapter.js';
import { MemoryEngineStore, MemoryMissingServices } from '../test/support/memory-engine-store.js';
import { harnessCluster, harnessTask } from '../test/support/reconciler-harness.js';

/*
 * How long the engine's expansion of a `*` task holds the event loop: a fake source listing
 * `services` services (unsorted, as registries list them), an in-memory store, a queue that only
 * counts. Prints the event-loop delay (`monitorEventLoopDelay`, max and p99) of: the first expansion
 * (every service new and watched), a full sync, a burst of `refreshes` service-list changes (and
 * how many expansions they ran), and the same with a name mapping (its clash check); then the
 * drop of a tenth of the services.
 *
 *   node dist/bench/expand-stall.js [services=100000] [refreshes=20]
 */

const services = Number(process.argv[2] ?? 100_000);
const refreshes = Number(process.argv[3] ?? 20);

/** A source whose list is ready-made (the fake adapter's own listing would be measured otherwise) and that tells of list changes. */
class ListedSource extends FakeAdapter {
  listed: ServiceKey[] = [];
  lists = 0;
  private readonly listWatchers = new Set<() => void>();

  override async listServices(): Promise<ServiceKey[]> {
    this.lists += 1;
    return this.listed.slice();
  }

  watchServices(_scope: unknown, onChange: () => void): Unsubscribe {
    this.listWatchers.add(onChange);
    return () => this.listWatchers.delete(onChange);
  }

  changed(): void {
    for (const w of this.listWatchers) w();
  }
}

/** Runs `run` and prints its duration, `monitorEventLoopDelay`'s max and p99, and the longest gap between two turns of a 1 ms timer. */
async function measure(label: string, run: () => Promise<void>): Promise<void> {
  const h = monitorEventLoopDelay({ resolution: 1 });
  h.enable();
  let last = performance.now();
  let gap = 0;
  let timer: NodeJS.Timeout | undefined;
  const tick = () => {
    const now = performance.now();
    gap = Math.max(gap, now - last);
    last = now;
    timer = setTimeout(tick, 1);
  };
  tick();
  const t0 = performance.now();
  await run();
  const ms = performance.now() - t0;
  clearTimeout(timer);
  tick();
  clearTimeout(timer);
  h.disable();
  console.log(`${label}: ${ms.toFixed(0)} ms; longest stall ${gap.toFixed(1)} ms (monitorEventLoopDelay max ${(h.max / 1e6).toFixed(1)} ms, p99 ${(h.percentile(99) / 1e6).toFixed(1)} ms)`);
}

async function scenario(mapping: boolean): Promise<void> {
  const store = new MemoryEngineStore();
  const a = new ListedSource('a');
  const b = new FakeAdapter('b');
  // Unsorted, as a registry lists them.
  a.listed = Array.from({ length: services }, (_, i) => ({ namespace: 'public', group: 'DEFAULT_GROUP', name: `svc-${String((i * 7919) % services).padStart(6, '0')}` }));
  store.clusters.set('a', harnessCluster('a'));
  store.clusters.set('b', harnessCluster('b'));
  const logger = silentLogger();
  const registries = new Map<string, FakeAdapter>([
    ['a', a],
    ['b', b],
  ]);
  const adapters = new AdapterPool((id) => store.getCluster(id), { nacos: (spec) => registries.get(spec.id) as FakeAdapter }, logger);
  let queued = 0;
  const engine = new SyncEngine({
    store,
    adapters,
    heartbeats: new HeartbeatScheduler({ logger }),
    logger,
    queue: {
      enqueue: async () => void (queued += 1),
      enqueueMany: async (keys) => void (queued += keys.length),
    },
    missing: new MemoryMissingServices(),
    confirmMs: 0,
  });
  const base = harnessTask();
  const task = { ...base, service: '*', options: { ...base.options, maxServices: services * 2, fullSyncIntervalMs: 3_600_000, ...(mapping ? { mapping: { prefix: 'x-' } } : {}) } };
  store.tasks.set(task.id, task);
  const tag = mapping ? ' (mapping)' : '';
  try {
    await measure(`first expansion of ${services} services${tag}`, async () => {
      await engine.start();
      while (queued < services) await delay(5);
    });
    await measure(`full sync (resync) of ${services}${tag}`, async () => {
      queued = 0;
      await engine.resync(task.id);
      while (queued < services) await delay(5);
    });
    const before = a.lists;
    await measure(`${refreshes} list changes in a burst${tag}`, async () => {
      for (let i = 0; i < refreshes; i += 1) a.changed();
      // Settled once no list is made for a while.
      let seen = -1;
      while (seen !== a.lists) {
        seen = a.lists;
        await delay(300);
      }
    });
    console.log(`  ${a.lists - before} expansions for ${refreshes} list changes`);
    await measure(`a tenth of the services gone${tag}`, async () => {
      queued = 0;
      a.listed = a.listed.slice(0, services - services / 10);
      a.changed();
      while (queued < services / 10) await delay(5);
    });
  } finally {
    await engine.stop();
  }
}

await scenario(false);
await scenario(true);
