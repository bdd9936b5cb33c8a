import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startRegistry } from '../src/registry/index.js';
import { startRedis } from '../test/support/redis.js';
import { rawWarmupWrites } from './args.js';
import { CopyCounter, seedSource } from './cold-sync.js';
import { runWriteWorker, type WriteLoadInput } from './write-generator.js';
import { NAMESPACE } from './instances.js';
import { CpuMeter, type CpuShares } from './proc-stats.js';
import { profileFiles, summarizeProfile, type ProfileSummary } from './profile-summary.js';
import { measureRawWrites, type RawWriteResult } from './raw-write.js';
import { callApi, logProblems, repoRoot, startRegsyncUp, type RegsyncUp } from './regsync.js';
import { RequestCounter, type RequestCounts } from './request-counter.js';

/*
 * A phase of regsync's cold sync into and out of a registry of another kind (Consul, Eureka), next
 * to what its test server (in this process's main thread, as the embedded Nacos registries are)
 * takes when written to directly. A deployment of its own: a redis-server, one `regsync up`, two
 * embedded Nacos registries and two test servers (one per direction, each fresh).
 *
 *   raw            services x instances registrations with the adapter's own body, sent straight
 *                  over keep-alive HTTP (undici Pool) from a worker thread, as many in flight as
 *                  the adapter sends at once; a fresh server per round
 *   Nacos -> X     services x instances persistent instances in Nacos A, one `*` task into X A,
 *                  until X A holds every copy
 *   X -> Nacos     the same number seeded into X B, one `*` task into Nacos B, until B holds every copy
 *
 * Each sync follows a raw round of its own, and its ratio compares the two (the machine's speed
 * drifts within minutes). X -> Nacos is also compared with the embedded Nacos registry's raw write
 * rate measured just before it (its destination's ceiling). What differs between registries is a
 * {@link ForeignRegistry}.
 */

/** What a test server of the phase offers every registry alike. */
export interface TestServer {
  /** `127.0.0.1:<port>`. */
  readonly endpoint: string;
  readonly requests: readonly unknown[];
  close(): Promise<void>;
}

/** The registry-specific parts of a phase. */
export interface ForeignRegistry<S extends TestServer> {
  /** `consul`: the cluster kind, and the phase's directions (`nacos-to-consul`). */
  kind: string;
  /** `Consul`, in progress lines. */
  label: string;
  start(): Promise<S>;
  /** The cluster of `server` for `POST /api/v1/clusters`, without its id. */
  cluster(server: S, namespace?: string): Record<string, unknown>;
  /** Puts `services` x `instances` instances into `server` as the registry's own clients register them. */
  seed(server: S, services: number, instances: number): Promise<void> | void;
  /** Copies written into `server` since its request `from`, sampled every 20 ms while regsync syncs into it. */
  copyCounter(server: S, from: number): () => number;
  /** Copies `server` holds at the end of the sync into it, read as its users read them. */
  stored(server: S): Promise<number>;
  /** Successful registrations `server` answered since its request `from`. */
  writes(server: S, from: number): number;
  /** Requests `server` answered since its request `from`, by kind. */
  requestCounts(server: S, from: number): Record<string, number>;
  raw: {
    /** The worker module that sends the registrations (it calls `serveWriteLoad`). */
    worker: URL;
    /** Requests in flight: what the adapter sends at once. */
    concurrency: number;
    /** Measured copies `server` holds after a round (warm-up excluded). */
    stored(server: S): Promise<number>;
  };
}

/** The raw write rate of a test server: fields as the raw Nacos phase's, for one round. */
export type RawRoundResult = Omit<RawWriteResult, 'stored' | 'registryLoop' | 'rounds'> & {
  /** Copies the server holds afterwards, warm-up excluded (should equal `writes`). */
  stored: number;
  /** Event-loop utilization of the thread serving the test server (1 = the server was the bottleneck). */
  serverLoop: number;
};

/** One direction of the cold sync. */
export interface ForeignSyncResult {
  /** `nacos-to-<kind>` or `<kind>-to-nacos`. */
  direction: string;
  expected: number;
  /** The warm-up sync before the measured one (another namespace and test server); undefined without one. */
  warmup: { services: number; elapsedMs: number } | undefined;
  reached: number;
  /** From the task's creation until the destination held every copy. */
  elapsedMs: number;
  copiesPerSecond: number;
  timedOut: boolean;
  /** `POST /api/v1/tasks` answered. */
  taskCreatedMs: number;
  firstCopyMs: number | undefined;
  /** The raw round just before, and the ratio to it. */
  rawWritesPerSecond: number | undefined;
  ratioToRaw: number | undefined;
  /** X -> Nacos only: the embedded Nacos registry's raw write rate just before, and the ratio. */
  nacosRawWritesPerSecond?: number | undefined;
  ratioToNacosRaw?: number | undefined;
  /** Requests the foreign registry received from the task's creation until the end, by kind. */
  requestsToRegistry: Record<string, number>;
  /** Requests the Nacos registry received meanwhile. */
  requestsToNacos: RequestCounts;
  /** Registrations (Nacos -> X) or registers (X -> Nacos) per copy: 1 means none wasted. */
  writesPerCopy: number;
  cpu: CpuShares;
  /** Copies in the destination over time, `[seconds, copies]`. */
  timeline: Array<[number, number]>;
}

export interface ForeignBenchResult {
  services: number;
  instances: number;
  /** The raw round before each direction. */
  raw: RawRoundResult[];
  toRegistry: ForeignSyncResult | undefined;
  toNacos: ForeignSyncResult | undefined;
  regsync: { logFile: string; logProblems: Array<{ level: string; msg: string; count: number }>; profile: ProfileSummary[] | undefined } | undefined;
  errors: string[];
}

/** Measures one raw round on a fresh test server. */
export async function measureRaw<S extends TestServer>(reg: ForeignRegistry<S>, opts: { writes: number; services: number; concurrency: number }, deadlineMs: number): Promise<RawRoundResult> {
  const server = await reg.start();
  const warmup = rawWarmupWrites(opts.writes);
  try {
    const input: WriteLoadInput = { url: `http://${server.endpoint}`, writes: opts.writes, services: opts.services, concurrency: opts.concurrency, warmup };
    const { outcome, serverLoop, cpu, startedAt } = await runWriteWorker(reg.raw.worker, input, deadlineMs, `raw ${reg.label} write generator`);
    const stored = await reg.raw.stored(server);
    if ('timedOut' in outcome) {
      const elapsedMs = performance.now() - startedAt;
      return { ...opts, warmup, elapsedMs, writesPerSecond: stored / (elapsedMs / 1000), ok: stored, failed: 0, firstError: `no result within ${deadlineMs} ms`, stored, serverLoop, generatorLoop: NaN, timedOut: true, cpu };
    }
    const r = outcome.result;
    return { ...opts, warmup, elapsedMs: r.elapsedMs, writesPerSecond: r.ok / (r.elapsedMs / 1000), ok: r.ok, failed: r.failed, firstError: r.firstError, stored, serverLoop, generatorLoop: r.generatorLoop, timedOut: false, cpu };
  } finally {
    await server.close();
  }
}

/** Records among `records` from `from` on that `test` accepts. */
export function countSince<R>(records: readonly R[], from: number, test: (r: R) => boolean): number {
  let n = 0;
  for (let i = from; i < records.length; i += 1) if (test(records[i] as R)) n += 1;
  return n;
}

interface Deployment {
  regsync: RegsyncUp;
  cpu: CpuMeter;
  /** Services of the warm-up sync before each direction (0: none). */
  warmupServices: number;
  /** The warm-up syncs' servers, kept until the phase ends (their paused tasks still name them). */
  warmups: TestServer[];
}

/** Waits until `count()` reaches `expected` or the deadline passes, sampling every 20 ms; a timeline per second. */
export async function until(count: () => number, expected: number, t0: number, deadlineMs: number, progress: (line: string) => void, what: string) {
  const timeline: Array<[number, number]> = [];
  let firstAt: number | undefined;
  let lastSecond = 0;
  let n = count();
  while (n < expected && performance.now() - t0 < deadlineMs) {
    await delay(20);
    n = count();
    const now = performance.now();
    if (firstAt === undefined && n > 0) firstAt = now;
    const s = Math.floor((now - t0) / 1000);
    if (s > lastSecond) {
      lastSecond = s;
      timeline.push([s, n]);
      if (s % 5 === 0) progress(`${what}: ${n.toLocaleString('en-US')} / ${expected.toLocaleString('en-US')} copies after ${s} s`);
    }
  }
  const end = performance.now();
  timeline.push([Math.round(((end - t0) / 1000) * 10) / 10, n]);
  return { reached: n, end, firstAt, timeline };
}

/** Namespace (Nacos) and key namespace (the foreign clusters) of the warm-up syncs. */
const WARMUP = 'warmup';

/**
 * Runs regsync's code of one direction before it is measured, as the raw rounds send warm-up
 * registrations first: `services` x `instances` through a task of its own, into (or out of) a test
 * server of its own, until every copy is there; then the task is paused. Answers how long it took (ms).
 */
async function warmUp<S extends TestServer>(
  reg: ForeignRegistry<S>,
  d: Deployment,
  toRegistry: boolean,
  nacos: { id: string; registry: Awaited<ReturnType<typeof startRegistry>> },
  opts: { services: number; instances: number },
  deadlineMs: number,
): Promise<number> {
  const server = await reg.start();
  d.warmups.push(server);
  const expected = opts.services * opts.instances;
  const direction = toRegistry ? `nacos-to-${reg.kind}` : `${reg.kind}-to-nacos`;
  const id = `warm-${direction}`;
  let counter: CopyCounter | undefined;
  let count: () => number;
  if (toRegistry) seedSource(nacos.registry, opts.services, opts.instances, WARMUP);
  else await reg.seed(server, opts.services, opts.instances);
  // Its service keys are in the warm-up namespace, as the source's.
  await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id, ...reg.cluster(server, WARMUP) }, 201);
  if (toRegistry) count = reg.copyCounter(server, 0);
  else {
    const c = new CopyCounter(nacos.registry, expected, WARMUP);
    counter = c;
    count = () => c.total;
  }
  const t0 = performance.now();
  try {
    const task = toRegistry ? { source: nacos.id, destination: id } : { source: id, destination: nacos.id };
    await callApi(d.regsync.url, 'POST', '/api/v1/tasks', { id, ...task, service: '*', namespace: WARMUP }, 201);
    const run = await until(count, expected, t0, deadlineMs, () => {}, 'warm-up');
    if (run.reached < expected) throw new Error(`warm-up ${direction}: ${run.reached} of ${expected} copies after ${deadlineMs} ms`);
  } finally {
    counter?.close();
  }
  const elapsed = performance.now() - t0;
  await callApi(d.regsync.url, 'POST', `/api/v1/tasks/${id}/pause`, undefined, 200);
  return elapsed;
}

/** Nacos A -> X A: seeded Nacos, fresh X, one `*` task. */
async function syncToRegistry<S extends TestServer>(
  reg: ForeignRegistry<S>,
  d: Deployment,
  opts: { services: number; instances: number },
  deadlineMs: number,
  progress: (line: string) => void,
): Promise<ForeignSyncResult> {
  const expected = opts.services * opts.instances;
  const nacos = await startRegistry({ port: 0 });
  const server = await reg.start();
  const nacosRequests = new RequestCounter(nacos);
  const clusterId = `${reg.kind}-a`;
  const taskId = `to-${reg.kind}`;
  try {
    seedSource(nacos, opts.services, opts.instances);
    await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id: 'nacos-a', kind: 'nacos', endpoints: [nacos.endpoint] }, 201);
    await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id: clusterId, ...reg.cluster(server) }, 201);
    const warmupMs = d.warmupServices > 0 ? await warmUp(reg, d, true, { id: 'nacos-a', registry: nacos }, { services: d.warmupServices, instances: opts.instances }, deadlineMs) : undefined;
    const from = server.requests.length;
    const count = reg.copyCounter(server, from);
    nacosRequests.open();
    await d.cpu.start();
    const t0 = performance.now();
    await callApi(d.regsync.url, 'POST', '/api/v1/tasks', { id: taskId, source: 'nacos-a', destination: clusterId, service: '*', namespace: NAMESPACE }, 201);
    const taskCreatedMs = performance.now() - t0;
    const run = await until(count, expected, t0, deadlineMs, progress, `Nacos -> ${reg.label}`);
    const cpu = await d.cpu.stop();
    const requestsToRegistry = reg.requestCounts(server, from);
    const requestsToNacos = nacosRequests.window();
    const writes = reg.writes(server, from);
    await callApi(d.regsync.url, 'POST', `/api/v1/tasks/${taskId}/pause`, undefined, 200);
    const reached = await reg.stored(server);
    const elapsedMs = run.end - t0;
    return {
      direction: `nacos-to-${reg.kind}`,
      expected,
      warmup: warmupMs === undefined ? undefined : { services: d.warmupServices, elapsedMs: warmupMs },
      reached,
      elapsedMs,
      copiesPerSecond: reached / (elapsedMs / 1000),
      timedOut: run.reached < expected || reached < expected,
      taskCreatedMs,
      firstCopyMs: run.firstAt === undefined ? undefined : run.firstAt - t0,
      rawWritesPerSecond: undefined,
      ratioToRaw: undefined,
      requestsToRegistry,
      requestsToNacos,
      writesPerCopy: writes / Math.max(1, reached),
      cpu,
      timeline: run.timeline,
    };
  } finally {
    nacosRequests.close();
    await server.close();
    await nacos.close();
  }
}

/** X B -> Nacos B: seeded X, fresh Nacos, one `*` task. */
async function syncToNacos<S extends TestServer>(
  reg: ForeignRegistry<S>,
  d: Deployment,
  opts: { services: number; instances: number },
  deadlineMs: number,
  progress: (line: string) => void,
): Promise<ForeignSyncResult> {
  const expected = opts.services * opts.instances;
  const server = await reg.start();
  const nacos = await startRegistry({ port: 0 });
  const nacosRequests = new RequestCounter(nacos);
  const counter = new CopyCounter(nacos, expected, NAMESPACE);
  const clusterId = `${reg.kind}-b`;
  try {
    await reg.seed(server, opts.services, opts.instances);
    await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id: clusterId, ...reg.cluster(server) }, 201);
    await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id: 'nacos-b', kind: 'nacos', endpoints: [nacos.endpoint] }, 201);
    const warmupMs = d.warmupServices > 0 ? await warmUp(reg, d, false, { id: 'nacos-b', registry: nacos }, { services: d.warmupServices, instances: opts.instances }, deadlineMs) : undefined;
    const from = server.requests.length;
    nacosRequests.open();
    await d.cpu.start();
    const t0 = performance.now();
    await callApi(d.regsync.url, 'POST', '/api/v1/tasks', { id: 'to-nacos', source: clusterId, destination: 'nacos-b', service: '*' }, 201);
    const taskCreatedMs = performance.now() - t0;
    const run = await until(() => counter.total, expected, t0, deadlineMs, progress, `${reg.label} -> Nacos`);
    const end = counter.total >= expected ? ((await counter.reached(t0 + deadlineMs)) ?? run.end) : run.end;
    const cpu = await d.cpu.stop();
    const requestsToRegistry = reg.requestCounts(server, from);
    const requestsToNacos = nacosRequests.window();
    await callApi(d.regsync.url, 'POST', '/api/v1/tasks/to-nacos/pause', undefined, 200);
    const elapsedMs = end - t0;
    const registers = Object.entries(requestsToNacos).reduce((n, [k, w]) => (/^POST \/nacos\/v1\/ns\/instance$/.test(k) ? n + w.count : n), 0);
    return {
      direction: `${reg.kind}-to-nacos`,
      expected,
      warmup: warmupMs === undefined ? undefined : { services: d.warmupServices, elapsedMs: warmupMs },
      reached: counter.total,
      elapsedMs,
      copiesPerSecond: counter.total / (elapsedMs / 1000),
      timedOut: counter.total < expected,
      taskCreatedMs,
      firstCopyMs: counter.firstAt === undefined ? undefined : counter.firstAt - t0,
      rawWritesPerSecond: undefined,
      ratioToRaw: undefined,
      requestsToRegistry,
      requestsToNacos,
      writesPerCopy: registers / Math.max(1, counter.total),
      cpu,
      timeline: run.timeline,
    };
  } finally {
    counter.close();
    nacosRequests.close();
    await server.close();
    await nacos.close();
  }
}

/** How big a foreign-registry phase is, and how its regsync runs. */
export interface ForeignOptions {
  services: number;
  instances: number;
  /** Services of the warm-up sync before each direction (0: none). */
  warmupServices: number;
  /** Requests in flight of the raw Nacos round. */
  nacosConcurrency: number;
  profileDir: string | undefined;
  nodeFlags: string[];
}

/** The phase: raw rate, then each direction after a raw round of its own. */
export async function measureForeign<S extends TestServer>(
  reg: ForeignRegistry<S>,
  opts: ForeignOptions,
  deadlineMs: number,
  progress: (line: string) => void,
): Promise<ForeignBenchResult> {
  const size = { services: opts.services, instances: opts.instances };
  const writes = opts.services * opts.instances;
  const result: ForeignBenchResult = { ...size, raw: [], toRegistry: undefined, toNacos: undefined, regsync: undefined, errors: [] };
  const { kind, label } = reg;
  const raw = async (what: string): Promise<number | undefined> => {
    const r = await measureRaw(reg, { writes, services: opts.services, concurrency: reg.raw.concurrency }, deadlineMs);
    result.raw.push(r);
    progress(`${kind}: raw ${what}: ${Math.round(r.writesPerSecond).toLocaleString('en-US')} registrations/s${r.failed > 0 ? `, ${r.failed} failed (${r.firstError ?? ''})` : ''}`);
    return r.failed === 0 && !r.timedOut ? r.writesPerSecond : undefined;
  };
  const size1 = `${opts.services.toLocaleString('en-US')} services x ${opts.instances} instances`;
  const redis = await startRedis();
  const redisClient = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  redisClient.on('error', () => {});
  let regsync: RegsyncUp | undefined;
  const warmups: TestServer[] = [];
  try {
    regsync = await startRegsyncUp({ redisUrl: redis.url, logDir: join(repoRoot(), 'dist', 'bench-logs'), profileDir: opts.profileDir, nodeFlags: opts.nodeFlags });
    const up = regsync;
    const d: Deployment = { regsync: up, cpu: new CpuMeter(() => up.proc.pid, redisClient), warmupServices: opts.warmupServices, warmups };

    const before = await raw(`before Nacos -> ${label}`);
    progress(`${kind}: Nacos -> ${label}, ${size1}`);
    try {
      const r = await syncToRegistry(reg, d, size, deadlineMs, progress);
      r.rawWritesPerSecond = before;
      r.ratioToRaw = before === undefined ? undefined : r.copiesPerSecond / before;
      result.toRegistry = r;
      progress(`${kind}: Nacos -> ${label} ${(r.elapsedMs / 1000).toFixed(2)} s, ${Math.round(r.copiesPerSecond).toLocaleString('en-US')} copies/s`);
    } catch (err) {
      result.errors.push(`Nacos -> ${label}: ${err instanceof Error ? err.message : String(err)}`);
    }

    const beforeBack = await raw(`before ${label} -> Nacos`);
    const nacosRaw = await measureRawWrites({ writes, services: opts.services, concurrency: opts.nacosConcurrency, rounds: 1 }, deadlineMs);
    const nacosRate = nacosRaw.failed === 0 && !nacosRaw.timedOut ? nacosRaw.writesPerSecond : undefined;
    progress(`${kind}: raw Nacos writes: ${Math.round(nacosRaw.writesPerSecond).toLocaleString('en-US')}/s`);
    progress(`${kind}: ${label} -> Nacos, ${size1}`);
    try {
      const r = await syncToNacos(reg, d, size, deadlineMs, progress);
      r.rawWritesPerSecond = beforeBack;
      r.ratioToRaw = beforeBack === undefined ? undefined : r.copiesPerSecond / beforeBack;
      r.nacosRawWritesPerSecond = nacosRate;
      r.ratioToNacosRaw = nacosRate === undefined ? undefined : r.copiesPerSecond / nacosRate;
      result.toNacos = r;
      progress(`${kind}: ${label} -> Nacos ${(r.elapsedMs / 1000).toFixed(2)} s, ${Math.round(r.copiesPerSecond).toLocaleString('en-US')} copies/s`);
    } catch (err) {
      result.errors.push(`${label} -> Nacos: ${err instanceof Error ? err.message : String(err)}`);
    }
  } finally {
    if (regsync) {
      await regsync.stop();
      const profileDir = regsync.profileDir;
      result.regsync = { logFile: regsync.logFile, logProblems: logProblems(regsync.output()), profile: profileDir === undefined ? undefined : profileFiles(profileDir).map((f) => summarizeProfile(f, 20)) };
    }
    await Promise.all(warmups.map((w) => w.close()));
    redisClient.disconnect();
    await redis.cleanup();
  }
  return result;
}
