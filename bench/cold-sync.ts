import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import type { ServiceChange } from '../src/registry/naming-store.js';
import type { RunningRegistry } from '../src/registry/index.js';
import { GROUP, NAMESPACE, ipOf, persistentInstance, serviceName } from './instances.js';
import type { CpuMeter, CpuShares } from './proc-stats.js';
import { countOf, type RequestCounter, type RequestCounts } from './request-counter.js';
import { callApi, type QueueSampler, type QueueStats } from './regsync.js';
import type { RedisCommandMeter, RedisCommands } from './redis-commands.js';
import { percentiles, type Percentiles } from './stats.js';

/** Result of measurement 2. */
export interface ColdSyncResult {
  services: number;
  instancesPerService: number;
  /** Copies B must hold at the end: services x instances. */
  expected: number;
  /** Copies B held when the phase ended (all of them, unless it timed out). */
  reached: number;
  /** From the task's creation until B held every copy. */
  elapsedMs: number;
  copiesPerSecond: number;
  /** The warm-up sync before the measured one (see {@link warmUp}); undefined without one. */
  warmup: { services: number; elapsedMs: number } | undefined;
  /** `POST /api/v1/tasks` answered (the engine listed A's services and queued one reconcile each). */
  taskCreatedMs: number;
  /** The first copy appeared in B. */
  firstCopyMs: number | undefined;
  /** After the last copy, until regsync's queue was empty again (undefined: not within the drain deadline). */
  queueDrainedMs: number | undefined;
  /** Copies in B over time, `[seconds, copies]`. */
  timeline: Array<[number, number]>;
  timedOut: boolean;
  /** Requests A and B received, timed from the task's creation. */
  requestsToA: RequestCounts;
  requestsToB: RequestCounts;
  /** Registers B received per copy (1 means no write was wasted). */
  writesPerCopy: number;
  cpu: CpuShares;
  /** What redis-server ran until B held every copy (every client: regsync and the bench's queue sampler). */
  redisCommands: RedisCommands | undefined;
  queue: QueueStats;
  /** Per-service lag regsync recorded (job queued -> status written), ms. */
  serviceLagMs: Percentiles | undefined;
  /** The task running on after the sync with nothing changing: what it costs to stand still. */
  steady: { seconds: number; cpu: CpuShares; requestsToA: RequestCounts; requestsToB: RequestCounts } | undefined;
}

export interface ColdSyncDeps {
  a: RunningRegistry;
  b: RunningRegistry;
  api: string;
  requestsA: RequestCounter;
  requestsB: RequestCounter;
  cpu: CpuMeter;
  redisCommands: RedisCommandMeter;
  queue: QueueSampler;
  progress: (line: string) => void;
}

/** Puts `services` x `instances` persistent instances into A's `namespace` straight through its store. */
export function seedSource(a: RunningRegistry, services: number, instances: number, namespace = NAMESPACE): void {
  for (let s = 0; s < services; s += 1) {
    const name = serviceName(s);
    for (let i = 0; i < instances; i += 1) {
      a.store.register(namespace, GROUP, name, persistentInstance(ipOf(s * instances + i), name));
    }
  }
}

/**
 * Empties a namespace of an embedded registry straight through its store (instances, then
 * services), so that a finished round's 40,000 instances do not weigh on the registries' heap, and
 * their garbage collections, in the rounds and phases after it. Call it once the round's task is
 * paused: nothing watches the namespace any more.
 */
export function clearNamespace(registry: RunningRegistry, namespace: string): void {
  for (const service of registry.store.listServices(namespace)) {
    for (const i of [...service.instances.values()]) registry.store.deregister(namespace, service.groupName, service.name, i.ip, i.port, i.clusterName);
    registry.store.deleteService(namespace, service.groupName, service.name);
  }
}

/** Namespace of the warm-up sync (its copies are not counted by the measured one). */
export const WARMUP_NAMESPACE = 'warmup';

/**
 * Counts the instances of one namespace of B (default the public one) from its store's `change` events (each says which
 * service changed; the store is read there and then), and resolves once there are `target`.
 */
export class CopyCounter {
  private readonly sizes = new Map<string, number>();
  total = 0;
  firstAt: number | undefined;
  private reachedAt: number | undefined;
  private waiter: (() => void) | undefined;
  private readonly onChange = (change: ServiceChange): void => {
    if (change.namespaceId !== this.namespace) return;
    const at = change.groupedName.indexOf('@@');
    const size = this.b.store.getService(this.namespace, change.groupedName.slice(0, at), change.groupedName.slice(at + 2))?.instances.size ?? 0;
    this.total += size - (this.sizes.get(change.groupedName) ?? 0);
    this.sizes.set(change.groupedName, size);
    if (this.firstAt === undefined && this.total > 0) this.firstAt = performance.now();
    if (this.reachedAt === undefined && this.total >= this.target) {
      this.reachedAt = performance.now();
      this.waiter?.();
    }
  };

  constructor(
    private readonly b: RunningRegistry,
    private readonly target: number,
    private readonly namespace = NAMESPACE,
  ) {
    b.store.on('change', this.onChange);
  }

  /** When B first held `target` instances, or undefined if not by `deadline` (performance.now()). */
  async reached(deadline: number): Promise<number | undefined> {
    if (this.reachedAt === undefined) {
      await Promise.race([
        new Promise<void>((resolve) => (this.waiter = resolve)),
        delay(Math.max(0, deadline - performance.now()), undefined, { ref: false }),
      ]);
    }
    return this.reachedAt;
  }

  close(): void {
    this.b.store.off('change', this.onChange);
  }
}

/**
 * Runs regsync's code before it is measured, as the raw phase sends warm-up writes before its
 * measured ones: `services` x `instances` instances in A's namespace {@link WARMUP_NAMESPACE}, one
 * task A->B for `*` there, until B holds every copy; then the task is paused (its copies stay, in a
 * namespace the measured sync does not count) and regsync's queue drains. Answers how long it took (ms).
 */
async function warmUp(deps: ColdSyncDeps, services: number, instances: number, deadlineMs: number): Promise<number> {
  const { a, b, api } = deps;
  seedSource(a, services, instances, WARMUP_NAMESPACE);
  const counter = new CopyCounter(b, services * instances, WARMUP_NAMESPACE);
  const t0 = performance.now();
  try {
    await callApi(api, 'POST', '/api/v1/tasks', { id: 'warmup', source: 'a', destination: 'b', service: '*', namespace: WARMUP_NAMESPACE }, 201);
    if ((await counter.reached(t0 + deadlineMs)) === undefined) throw new Error(`warm-up sync: B held ${counter.total} of ${services * instances} copies after ${deadlineMs} ms`);
  } finally {
    counter.close();
  }
  const elapsed = performance.now() - t0;
  await callApi(api, 'POST', '/api/v1/tasks/warmup/pause', undefined, 200);
  const drainDeadline = performance.now() + 15_000;
  while ((await deps.queue.depth().catch(() => 1)) > 0 && performance.now() < drainDeadline) await delay(50);
  clearNamespace(a, WARMUP_NAMESPACE);
  clearNamespace(b, WARMUP_NAMESPACE);
  deps.progress(`warm-up: ${services} services x ${instances} instances synced in ${(elapsed / 1000).toFixed(2)} s`);
  return elapsed;
}

/** One round of measurement 2 next to the raw round measured right before it (when the raw phase runs). */
export interface ColdSyncPair {
  rawWritesPerSecond: number | undefined;
  copiesPerSecond: number;
  elapsedMs: number;
  timedOut: boolean;
  /** copiesPerSecond / rawWritesPerSecond. */
  ratio: number | undefined;
}

/** One cold sync: its own namespace of A (and so of B) and its own task. */
export interface ColdSyncRound {
  /** Namespace the services live in, in A and B; default the public one. */
  namespace?: string;
  /** Id of the task (default `cold`). */
  taskId?: string;
}

/**
 * Measurement 2: A holds `services` x `instances` persistent instances; one task A->B for `*` is
 * created; how long until B holds every copy. Then the task runs on for `idleS` seconds with nothing
 * changing (its standing cost), and is paused, so that it does not disturb the next round or phase.
 */
export async function measureColdSync(
  deps: ColdSyncDeps,
  opts: { services: number; instances: number; idleS: number; warmupServices: number } & ColdSyncRound,
  deadlineMs: number,
): Promise<ColdSyncResult> {
  const { a, b, api } = deps;
  const namespace = opts.namespace ?? NAMESPACE;
  const taskId = opts.taskId ?? 'cold';
  const expected = opts.services * opts.instances;
  const warmupMs = opts.warmupServices > 0 ? await warmUp(deps, opts.warmupServices, opts.instances, deadlineMs) : undefined;
  seedSource(a, opts.services, opts.instances, namespace);
  const counter = new CopyCounter(b, expected, namespace);
  await deps.cpu.start();
  await deps.redisCommands.start();
  deps.queue.start();
  const timeline: Array<[number, number]> = [];

  deps.requestsA.open();
  deps.requestsB.open();
  const t0 = performance.now();
  const ticker = setInterval(() => {
    const s = Math.round((performance.now() - t0) / 1000);
    timeline.push([s, counter.total]);
    if (s % 5 === 0) deps.progress(`cold sync: ${counter.total.toLocaleString('en-US')} / ${expected.toLocaleString('en-US')} copies after ${s} s`);
  }, 1000);
  let reachedAt: number | undefined;
  let taskCreatedMs: number;
  try {
    await callApi(api, 'POST', '/api/v1/tasks', { id: taskId, source: 'a', destination: 'b', service: '*', namespace }, 201);
    taskCreatedMs = performance.now() - t0;
    reachedAt = await counter.reached(t0 + deadlineMs);
  } finally {
    clearInterval(ticker);
    counter.close();
  }
  const end = reachedAt ?? performance.now();
  const cpu = await deps.cpu.stop();
  const redisCommands = await deps.redisCommands.stop();
  timeline.push([Math.round(((end - t0) / 1000) * 10) / 10, counter.total]);

  // How long regsync goes on working after the last copy landed.
  let queueDrainedMs: number | undefined;
  const drainDeadline = performance.now() + 15_000;
  while (performance.now() < drainDeadline) {
    if ((await deps.queue.depth().catch(() => 1)) === 0) {
      queueDrainedMs = performance.now() - end;
      break;
    }
    await delay(50);
  }
  const queue = await deps.queue.finish();
  const requestsToA = deps.requestsA.window();
  const requestsToB = deps.requestsB.window();

  let serviceLagMs: Percentiles | undefined;
  try {
    const detail = (await callApi(api, 'GET', `/api/v1/tasks/${taskId}`, undefined, 200)) as { status: { services: Array<{ lagMs: number | null }> } };
    serviceLagMs = percentiles(detail.status.services.flatMap((s) => (s.lagMs === null ? [] : [s.lagMs])));
  } catch {
    serviceLagMs = undefined;
  }

  let steady: ColdSyncResult['steady'];
  if (opts.idleS > 0 && reachedAt !== undefined) {
    deps.progress(`cold sync done; its task runs on for ${opts.idleS} s with nothing changing`);
    deps.requestsA.open();
    deps.requestsB.open();
    await deps.cpu.start();
    await delay(opts.idleS * 1000);
    steady = { seconds: opts.idleS, cpu: await deps.cpu.stop(), requestsToA: deps.requestsA.window(), requestsToB: deps.requestsB.window() };
  }
  await callApi(api, 'POST', `/api/v1/tasks/${taskId}/pause`, undefined, 200);
  clearNamespace(a, namespace);
  clearNamespace(b, namespace);

  const elapsedMs = end - t0;
  return {
    services: opts.services,
    instancesPerService: opts.instances,
    expected,
    reached: counter.total,
    elapsedMs,
    copiesPerSecond: counter.total / (elapsedMs / 1000),
    warmup: warmupMs === undefined ? undefined : { services: opts.warmupServices, elapsedMs: warmupMs },
    taskCreatedMs,
    firstCopyMs: counter.firstAt === undefined ? undefined : counter.firstAt - t0,
    queueDrainedMs,
    timeline,
    timedOut: reachedAt === undefined,
    requestsToA,
    requestsToB,
    writesPerCopy: countOf(requestsToB, /^POST \/nacos\/v1\/ns\/instance$/) / Math.max(1, counter.total),
    cpu,
    redisCommands,
    queue,
    serviceLagMs,
    steady,
  };
}
