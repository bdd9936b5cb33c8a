import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startRedis, type RedisServer } from '../test/support/redis.js';
import { CpuMeter, processPeakRssMiB, processRssMiB, type CpuShares } from './proc-stats.js';
import { RedisCommandMeter, type RedisCommands } from './redis-commands.js';
import { API_READY, callApi, logProblems, QueueSampler, startRegsyncCommand, WORKER_READY, type RegsyncCommand } from './regsync.js';
import type { RequestCounts } from './request-counter.js';
import { ScaleLoad, scaleServiceName } from './scale-load.js';
import { ScaleRegistry, wallNow, type GapReport, type RegistrySample } from './scale-registry.js';
import type { ProfileSummary } from './profile-summary.js';
import { percentiles, type Percentiles } from './stats.js';
import { WindowProfiles } from './window-profiles.js';
import { readLeases, type LeaseRecord } from '../src/coord/lease.js';

/*
 * The scale phase (issue 28): `services` x `instances` ephemeral instances published over gRPC into
 * registry A, one `*` task A->B over gRPC, `regsync api` + 3 `regsync worker --shards <shards>
 * --replicas 2 --metrics-listen 127.0.0.1:0`, on a redis-server of its own.
 *
 *   this process, main thread   bookkeeping: REST calls, sampling every second
 *   worker thread "A"           registry A (scale-registry.ts)
 *   worker thread "B"           registry B: counts copies, copies that vanish, new services landing
 *   worker thread "load"        the load generator: one SDK connection publishing into A
 *   regsync api, 3 workers      their own processes
 *   redis-server                its own
 *
 * Phases, each with CPU, Redis, event-loop and heap figures per worker: register (A filled),
 * converge (task created until B holds every copy), settle (until A's pushes stop), rest (a window
 * longer than the task's full-sync interval), new services (each timed until its copies are in B),
 * failover (kill -9 of the busiest leader; copies that vanish from B counted).
 */

const TASK = 'scale';
/** The key prefix of the bench's deployment (regsync's default). */
const PREFIX = 'regsync';

export interface ScaleParams {
  services: number;
  instances: number;
  workers: number;
  shards: number;
  replicas: number;
  leaseTtlMs: number;
  /** The task's `fullSyncIntervalMs`; the rest window is longer so that it holds a full sync. */
  fullSyncIntervalMs: number;
  /** The task's `verifyIntervalMs`: each full sync checks its share of the service syncs against B. */
  verifyIntervalMs: number;
  restS: number;
  /** Longest wait for A's pushes to stop after convergence, before the rest window. */
  settleMaxS: number;
  newServices: number;
  mergeWindowMs: number;
  /** BatchInstanceRequests in flight while A is filled. */
  concurrency: number;
  logDir: string;
  nodeFlags: string[];
  profileDir: string | undefined;
}

/** One regsync worker's figures over a phase. */
export interface WorkerPhase {
  name: string;
  cpu: number | undefined;
  /** `nodejs_heap_size_used_bytes` / `_total_bytes` at the phase's last sample, MiB. */
  heapUsedMiB: number | undefined;
  heapTotalMiB: number | undefined;
  /** Worst one-second p99 and the max of `nodejs_eventloop_lag_*` (prom-client resets its histogram on every scrape), resolution subtracted, ms. */
  loopP99Ms: number | undefined;
  loopMaxMs: number | undefined;
  scrapes: number;
  /** Longest `/metrics` answer, ms. */
  scrapeMaxMs: number;
}

export interface RegistryPhase {
  name: string;
  /** Mean event-loop utilization of the registry's thread. */
  loop: number;
  loopDelayP99Ms: number;
  loopDelayMaxMs: number;
  heapUsedMiB: number;
  pushes: number;
  /** gRPC requests by class during the phase. */
  requests: Record<string, number>;
}

export interface ScalePhase {
  name: string;
  seconds: number;
  /** `regsyncEach`: the workers in order, then the api. */
  cpu: CpuShares;
  redisCommands: RedisCommands | undefined;
  redisUsedMiB: { before: number | undefined; after: number | undefined };
  workers: WorkerPhase[];
  registries: RegistryPhase[];
  /** A's pushes and B's copies per second, `[s, pushes, copies]`. */
  timeline: Array<[number, number, number]>;
}

export interface ScaleResult {
  params: Omit<ScaleParams, 'logDir' | 'nodeFlags' | 'profileDir'>;
  copies: number;
  phases: ScalePhase[];
  register: { elapsedMs: number; copiesPerSecond: number; inA: number } | undefined;
  converge:
    | {
        /** From the task's creation (POST sent) until B held every copy; undefined: not within the deadline. */
        ms: number | undefined;
        reached: number;
        firstCopyMs: number | undefined;
        copiesPerSecond: number;
        serviceSyncsPerSecond: number;
        queueDrainedMs: number | undefined;
        /** Redis commands per service sync (INFO commandstats) during convergence. */
        redisCommandsPerServiceSync: number | undefined;
      }
    | undefined;
  memory:
    | {
        /** VmRSS per worker before the task and once converged and drained, MiB. */
        before: Array<number | undefined>;
        after: Array<number | undefined>;
        growthMiB: number;
        kibPerServiceSync: number;
        kibPerServiceSyncAndReplica: number;
        bytesPerCopy: number;
        bytesPerCopyAndReplica: number;
        redisUsedMiB: { before: number | undefined; after: number | undefined };
        /**
         * The same once the cool-down ended (the workers' heaps settled, the cold sync's garbage
         * collected): what a synced, quiet service sync holds, which the targets are judged on.
         */
        settled?: { after: Array<number | undefined>; growthMiB: number; kibPerServiceSyncAndReplica: number; bytesPerCopyAndReplica: number };
      }
    | undefined;
  /** From convergence until A's last push (sampled every 250 ms); undefined: pushes had not stopped by the end of the settle wait. */
  pushesStopMs: number | undefined;
  settleS: number | undefined;
  /** How long the cool-down before the rest window lasted, s. */
  coolS?: number;
  rest: { seconds: number; fullSyncIntervalMs: number; pushesA: number; pushesB: number; readsA: Record<string, number>; readsB: Record<string, number>; httpA: RequestCounts; httpB: RequestCounts } | undefined;
  /**
   * An operator's resync (`POST /api/v1/tasks/:id/resync`), which reconciles every service sync,
   * timed until the queues drained: the workers' CPU-seconds and the reads it made. Not part of the
   * at-rest figure: the periodic full syncs' own checks are in the rest window.
   */
  resync: { seconds: number; drained: boolean; cpuSeconds: number; readsA: Record<string, number>; readsB: Record<string, number> } | undefined;
  newServices: { count: number; landed: number; ms: Percentiles | undefined } | undefined;
  failover:
    | {
        victim: string;
        victimLeads: number[];
        elapsedMs: number | undefined;
        /** The longest time the victim's leases had left when it was killed (read from Redis just before), ms. */
        leaseLeftMs: number | undefined;
        takeovers: Array<{ shard: number; leader: string; ms: number }>;
        /**
         * After every shard was led again: leases taken again (a token that changed) and samples of
         * the leases (every 200 ms while watched) that found a shard without a leader. A takeover
         * that flaps shows here, not in `elapsedMs`.
         */
        laterLeadChanges: number;
        leaderlessSamples: number;
        /** When A's SubscribeServiceRequests stopped growing after the kill (the new leaders' watches made), ms from the kill. */
        resubscribedMs: number | undefined;
        gaps: GapReport | undefined;
        /** How long after the kill B was watched for vanished copies. */
        watchedMs: number;
        copiesAtEnd: number;
        expectedAtEnd: number;
      }
    | undefined;
  workers: Array<{ name: string; leads: number[]; serves: number; peakRssMiB: number | undefined; killed: boolean; logFile: string; logProblems: Array<{ level: string; msg: string; count: number }> }>;
  apiLogProblems: Array<{ level: string; msg: string; count: number }>;
  /** With --profile: a CPU profile of each worker per phase (the killed one's failover window is missing). */
  profiles?: ProfileSummary[];
}

interface ShardsView {
  items: Array<{ shard: number; leader: string | null; replicas: string[]; serviceSyncs: number }>;
}

/** A regsync worker process of the phase. */
interface WorkerProc {
  name: string;
  cmd: RegsyncCommand;
  metricsUrl: string | undefined;
  killed: boolean;
}

/** prom-client's `eventLoopMonitoringPrecision` (its default, regsync's): the histogram's values include it. */
const RESOLUTION_S = 0.01;
/** `--max-old-space-size` of the workers unless `--regsync-node-flag` gives one. */
const WORKER_HEAP_MIB = 6_144;

/** How often the rest window scrapes each worker's `/metrics`: Prometheus' usual scrape interval. */
export const REST_SCRAPE_MS = 15_000;

/** Reads the figures the phase needs from a worker's `/metrics` (prom-client's default metrics). */
export function parseWorkerMetrics(text: string): { heapUsed?: number; heapTotal?: number; lagP99?: number; lagMax?: number } {
  const value = (name: string): number | undefined => {
    const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.eE+-]+|NaN)$`, 'm').exec(text);
    const n = m ? Number(m[1]) : NaN;
    return Number.isFinite(n) ? n : undefined;
  };
  return {
    heapUsed: value('nodejs_heap_size_used_bytes'),
    heapTotal: value('nodejs_heap_size_total_bytes'),
    lagP99: value('nodejs_eventloop_lag_p99_seconds'),
    lagMax: value('nodejs_eventloop_lag_max_seconds'),
  };
}

async function redisUsedMiB(redis: Redis): Promise<number | undefined> {
  try {
    const m = /^used_memory:(\d+)/m.exec(await redis.info('memory'));
    return m ? Number(m[1]) / 2 ** 20 : undefined;
  } catch {
    return undefined;
  }
}

const requestDelta = (after: Record<string, number> | undefined, before: Record<string, number> | undefined): Record<string, number> => {
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after ?? {})) {
    const d = v - (before?.[k] ?? 0);
    if (d > 0) out[k] = d;
  }
  return out;
};

/**
 * Samples every second, per phase: each live worker's `/metrics` (event-loop lag p99 and max since
 * the last scrape, as prom-client resets its histogram on every scrape; V8 heap), each registry
 * thread (event loop, pushes, requests), and keeps CPU and Redis counters between `begin` and `end`.
 * A phase may scrape the workers less often (the rest window scrapes them every
 * {@link REST_SCRAPE_MS}, as a Prometheus server would): a scrape costs a worker CPU of its own
 * (prom-client's default metrics read `/proc` and the heap's statistics), which at one a second is
 * most of an idle worker's cost.
 */
class Recorder {
  private timer: NodeJS.Timeout | undefined;
  private busy = false;
  private name = '';
  private t0 = 0;
  private cpu: CpuMeter;
  private redisMeter: RedisCommandMeter;
  private redisBefore: number | undefined;
  private workerAgg = new Map<string, Omit<WorkerPhase, 'cpu'>>();
  private regAgg: Array<{ first: RegistrySample | undefined; last: RegistrySample | undefined; loopSum: number; n: number; p99: number; max: number }> = [];
  private timeline: Array<[number, number, number]> = [];
  private workerScrapeMs = 1_000;
  private lastWorkerScrape = 0;
  /** The latest sample of each registry (A, B), whatever the phase. */
  latest: Array<RegistrySample | undefined> = [];
  /** Each live worker's V8 heap in use (MiB), one sample a second, the last minute of them. */
  readonly heapTrail = new Map<string, number[]>();
  /** The phases' CPU profiles of the workers, with `windows`. */
  readonly profiles: ProfileSummary[] = [];

  constructor(
    private readonly workers: () => WorkerProc[],
    private readonly pids: () => Array<number | undefined>,
    private readonly registries: ScaleRegistry[],
    private readonly redis: Redis,
    private readonly windows: WindowProfiles | undefined,
  ) {
    this.cpu = new CpuMeter(pids, redis);
    this.redisMeter = new RedisCommandMeter(redis);
  }

  async begin(name: string, workerScrapeMs = 1_000): Promise<void> {
    this.name = name;
    this.workerScrapeMs = workerScrapeMs;
    this.lastWorkerScrape = 0;
    this.workerAgg = new Map();
    this.timeline = [];
    this.redisBefore = await redisUsedMiB(this.redis);
    await this.redisMeter.start();
    const firsts = await Promise.all(this.registries.map((r) => r.sample()));
    this.regAgg = firsts.map((s) => ({ first: s, last: s, loopSum: 0, n: 0, p99: 0, max: 0 }));
    await this.cpu.start();
    this.windows?.start(this.liveWorkers().map((w) => w.pid));
    this.t0 = performance.now();
    this.timer = setInterval(() => void this.tick(), 1_000);
  }

  /** The names of the workers not killed. */
  liveNames(): string[] {
    return this.liveWorkers().map((w) => w.name);
  }

  private liveWorkers(): Array<{ name: string; pid: number | undefined }> {
    return this.workers()
      .filter((w) => !w.killed)
      .map((w) => ({ name: w.name, pid: w.cmd.proc.pid }));
  }

  private async tick(last = false): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    // 50 ms of slack: a scrape due every n seconds is not put off to the next second by a late timer.
    const scrapeWorkers = last || performance.now() - this.lastWorkerScrape >= this.workerScrapeMs - 50;
    if (scrapeWorkers) this.lastWorkerScrape = performance.now();
    try {
      await Promise.all([
        ...this.workers()
          .filter((w) => scrapeWorkers && !w.killed && w.metricsUrl !== undefined)
          .map(async (w) => {
            const asked = performance.now();
            try {
              const res = await fetch(`${w.metricsUrl}/metrics`, { signal: AbortSignal.timeout(5_000) });
              const m = parseWorkerMetrics(await res.text());
              const ms = performance.now() - asked;
              const a = this.workerAgg.get(w.name) ?? { name: w.name, heapUsedMiB: undefined, heapTotalMiB: undefined, loopP99Ms: undefined, loopMaxMs: undefined, scrapes: 0, scrapeMaxMs: 0 };
              const late = (s: number | undefined) => (s === undefined ? undefined : Math.max(0, (s - RESOLUTION_S) * 1000));
              const worst = (x: number | undefined, y: number | undefined) => (x === undefined ? y : y === undefined ? x : Math.max(x, y));
              a.heapUsedMiB = m.heapUsed === undefined ? a.heapUsedMiB : m.heapUsed / 2 ** 20;
              if (m.heapUsed !== undefined) {
                const trail = this.heapTrail.get(w.name) ?? [];
                trail.push(m.heapUsed / 2 ** 20);
                if (trail.length > 60) trail.shift();
                this.heapTrail.set(w.name, trail);
              }
              a.heapTotalMiB = m.heapTotal === undefined ? a.heapTotalMiB : m.heapTotal / 2 ** 20;
              a.loopP99Ms = worst(a.loopP99Ms, late(m.lagP99));
              a.loopMaxMs = worst(a.loopMaxMs, late(m.lagMax));
              a.scrapes += 1;
              a.scrapeMaxMs = Math.max(a.scrapeMaxMs, ms);
              this.workerAgg.set(w.name, a);
            } catch {
              // a worker that does not answer within 5 s shows as fewer scrapes
            }
          }),
        ...this.registries.map(async (r, i) => {
          const s = await r.sample();
          this.latest[i] = s;
          const a = this.regAgg[i];
          if (!a) return;
          a.last = s;
          a.loopSum += s.loop;
          a.n += 1;
          a.p99 = Math.max(a.p99, s.loopDelayP99Ms);
          a.max = Math.max(a.max, s.loopDelayMaxMs);
        }),
      ]);
      const a = this.regAgg[0]?.last;
      const b = this.regAgg[1]?.last;
      this.timeline.push([Math.round((performance.now() - this.t0) / 1000), (a?.grpc?.pushesSent ?? 0) - (this.regAgg[0]?.first?.grpc?.pushesSent ?? 0), b?.copies ?? 0]);
    } finally {
      this.busy = false;
    }
  }

  async end(): Promise<ScalePhase> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    while (this.busy) await delay(20);
    await this.tick(true);
    const seconds = (performance.now() - this.t0) / 1000;
    const cpu = await this.cpu.stop();
    if (this.windows) this.profiles.push(...(await this.windows.stop(this.name, this.liveWorkers())));
    const redisCommands = await this.redisMeter.stop();
    const after = await redisUsedMiB(this.redis);
    const workers = this.workers().map((w, i): WorkerPhase => {
      const a = this.workerAgg.get(w.name);
      return { name: w.name, cpu: cpu.regsyncEach?.[i], heapUsedMiB: a?.heapUsedMiB, heapTotalMiB: a?.heapTotalMiB, loopP99Ms: a?.loopP99Ms, loopMaxMs: a?.loopMaxMs, scrapes: a?.scrapes ?? 0, scrapeMaxMs: a?.scrapeMaxMs ?? 0 };
    });
    const registries = this.registries.map((r, i): RegistryPhase => {
      const a = this.regAgg[i];
      return {
        name: r.name,
        loop: a && a.n > 0 ? a.loopSum / a.n : 0,
        loopDelayP99Ms: a?.p99 ?? 0,
        loopDelayMaxMs: a?.max ?? 0,
        heapUsedMiB: a?.last?.heapUsedMiB ?? 0,
        pushes: (a?.last?.grpc?.pushesSent ?? 0) - (a?.first?.grpc?.pushesSent ?? 0),
        requests: requestDelta(a?.last?.grpc?.requests, a?.first?.grpc?.requests),
      };
    });
    return { name: this.name, seconds, cpu, redisCommands, redisUsedMiB: { before: this.redisBefore, after }, workers, registries, timeline: this.timeline };
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
  }
}

/**
 * The task's `maxServices`: regsync's default (50,000) would leave half of 100,000 services out, so
 * the task allows every service of the phase and the new ones (the API's ceiling is 1,000,000).
 */
export function maxServicesOf(params: Pick<ScaleParams, 'services' | 'newServices'>): number {
  return Math.min(1_000_000, params.services + params.newServices + 1_000);
}

/** Rejects when `p` takes longer than `ms`. */
async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  const timer = new AbortController();
  try {
    return await Promise.race([
      p,
      delay(Math.max(0, ms), undefined, { signal: timer.signal }).then(() => {
        throw new Error(`${what}: no answer within ${Math.round(ms)} ms (phase deadline)`);
      }),
    ]);
  } finally {
    timer.abort();
  }
}

/** Requests that read (lists, queries, subscriptions) rather than write or check health. */
const READS = ['ServiceQueryRequest', 'ServiceListRequest', 'SubscribeServiceRequest'];
const readsOf = (requests: Record<string, number>) => Object.fromEntries(Object.entries(requests).filter(([k]) => READS.includes(k)));

/** The scale phase, with everything it needs started here and stopped again, whatever happens; every wait bounded by `deadlineMs` from now. */
export async function measureScale(params: ScaleParams, deadlineMs: number, progress: (line: string) => void): Promise<ScaleResult> {
  const deadline = performance.now() + deadlineMs;
  const left = () => Math.max(0, deadline - performance.now());
  const say = (line: string) => progress(`scale: ${line}`);
  const copies = params.services * params.instances;
  const { logDir: _l, nodeFlags: _n, profileDir: _p, ...shown } = params;
  const result: ScaleResult = {
    params: shown,
    copies,
    phases: [],
    register: undefined,
    converge: undefined,
    memory: undefined,
    pushesStopMs: undefined,
    settleS: undefined,
    rest: undefined,
    resync: undefined,
    newServices: undefined,
    failover: undefined,
    workers: [],
    apiLogProblems: [],
  };
  let redis: RedisServer | undefined;
  let redisClient: Redis | undefined;
  const registries: ScaleRegistry[] = [];
  let load: ScaleLoad | undefined;
  let queue: QueueSampler | undefined;
  let recorder: Recorder | undefined;
  let api: RegsyncCommand | undefined;
  const workers: WorkerProc[] = [];
  const ids = Array.from({ length: params.workers }, (_, i) => `scale-w${i + 1}`);
  try {
    redis = await startRedis();
    redisClient = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    redisClient.on('error', () => {});
    const a = await ScaleRegistry.start({ name: 'A', pushMergeWindowMs: params.mergeWindowMs });
    registries.push(a);
    const b = await ScaleRegistry.start({ name: 'B', pushMergeWindowMs: params.mergeWindowMs });
    registries.push(b);

    // A worker holds tens of thousands of service syncs: room beyond V8's default heap limit (about 4 GiB here), unless a flag says otherwise.
    const nodeFlags = params.nodeFlags.some((f) => f.startsWith('--max-old-space-size')) ? params.nodeFlags : [...params.nodeFlags, `--max-old-space-size=${WORKER_HEAP_MIB}`];
    const windows = params.profileDir === undefined ? undefined : new WindowProfiles(params.profileDir);
    const common = { logDir: params.logDir, nodeFlags: [...nodeFlags, ...(windows?.nodeFlags() ?? [])], env: windows?.env() };
    api = await startRegsyncCommand({ ...common, args: ['api', '--listen', '127.0.0.1:0', '--redis', redis.url], ready: API_READY, name: 'scale-api', timeoutMs: Math.min(30_000, left()) });
    const url = api.ready;
    for (const id of ids) {
      const cmd = await startRegsyncCommand({
        ...common,
        args: ['worker', '--redis', redis.url, '--shards', String(params.shards), '--replicas', String(params.replicas), '--worker-id', id, '--lease-ttl-ms', String(params.leaseTtlMs), '--metrics-listen', '127.0.0.1:0'],
        ready: WORKER_READY,
        name: id,
        timeoutMs: Math.min(30_000, left()),
      });
      workers.push({ name: id, cmd, metricsUrl: /metrics on (http:\/\/\S+)\/metrics/.exec(cmd.output())?.[1], killed: false });
      result.workers.push({ name: id, leads: [], serves: 0, peakRssMiB: undefined, killed: false, logFile: cmd.logFile, logProblems: [] });
    }
    const missing = workers.filter((w) => w.metricsUrl === undefined).map((w) => w.name);
    if (missing.length > 0) say(`no metrics URL printed by ${missing.join(', ')}: no heap or event-loop figures for them`);
    const apiProc = api;
    const pids = () => [...workers.map((w) => (w.killed ? undefined : w.cmd.proc.pid)), apiProc.proc.pid];
    const get = async (path: string) => within(callApi(url, 'GET', path, undefined, 200), left(), `GET ${path}`);
    const shardsView = async () => (await get('/api/v1/shards')) as ShardsView;
    for (const [id, r] of [['a', a], ['b', b]] as const) {
      await within(callApi(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [r.endpoint], options: { apiVersion: 'grpc', grpcPort: r.grpcPort } }, 201), left(), `POST cluster ${id}`);
    }
    for (;;) {
      const v = await shardsView();
      if (v.items.length === params.shards && v.items.every((s) => s.leader !== null && ids.includes(s.leader))) break;
      if (left() === 0) throw new Error('shards not all led before the deadline');
      await delay(100);
    }
    queue = new QueueSampler(redis.url, params.shards);
    const rec = new Recorder(() => workers, pids, registries, redisClient, windows);
    recorder = rec;

    // Register: A filled by the load generator.
    say(`filling A with ${params.services.toLocaleString('en-US')} services x ${params.instances} ephemeral instances over gRPC`);
    load = await ScaleLoad.start(a.grpcEndpoint);
    const gen = load;
    const names = Array.from({ length: params.services }, (_, s) => scaleServiceName('scale-', s));
    await rec.begin('register');
    const ticker = setInterval(() => say(`A: ${gen.progress.toLocaleString('en-US')} services published`), 10_000);
    let published;
    try {
      published = await within(gen.publish(names, params.instances, 0, params.concurrency), left(), 'filling A');
    } finally {
      clearInterval(ticker);
    }
    result.phases.push(await rec.end());
    const inA = rec.latest[0]?.copies ?? 0;
    result.register = { elapsedMs: published.elapsedMs, copiesPerSecond: copies / (published.elapsedMs / 1000), inA };
    say(`A holds ${inA.toLocaleString('en-US')} instances after ${(published.elapsedMs / 1000).toFixed(1)} s`);
    if (inA !== copies) throw new Error(`A holds ${inA} of ${copies} instances`);

    // The idle baseline.
    await delay(Math.min(2_000, left()));
    const before = workers.map((w) => processRssMiB(w.cmd.proc.pid));
    const redisBefore = await redisUsedMiB(redisClient);

    // Converge.
    await rec.begin('converge');
    const t0 = wallNow();
    let firstCopyAt: number | undefined;
    const offFirst = b.on((e) => {
      if (e.event === 'firstCopy') firstCopyAt = e.at;
    });
    const progressTicker = setInterval(() => say(`B: ${(rec.latest[1]?.copies ?? 0).toLocaleString('en-US')} / ${copies.toLocaleString('en-US')} copies after ${((wallNow() - t0) / 1000).toFixed(0)} s`), 10_000);
    let reachedAt: number | undefined;
    try {
      await within(callApi(url, 'POST', '/api/v1/tasks', { id: TASK, source: 'a', destination: 'b', service: '*', options: { fullSyncIntervalMs: params.fullSyncIntervalMs, verifyIntervalMs: params.verifyIntervalMs, maxServices: maxServicesOf(params) } }, 201), left(), 'POST task');
      reachedAt = await b.reached(copies, wallNow() + left());
    } finally {
      clearInterval(progressTicker);
      offFirst();
    }
    const converge = await rec.end();
    result.phases.push(converge);
    const reached = rec.latest[1]?.copies ?? 0;
    const convergeMs = reachedAt === undefined ? undefined : reachedAt - t0;
    const ms = convergeMs ?? wallNow() - t0;
    const serviceSyncs = params.services;
    result.converge = {
      ms: convergeMs,
      reached,
      firstCopyMs: firstCopyAt === undefined ? undefined : firstCopyAt - t0,
      copiesPerSecond: reached / (ms / 1000),
      serviceSyncsPerSecond: (serviceSyncs * (reached / copies)) / (ms / 1000),
      queueDrainedMs: undefined,
      redisCommandsPerServiceSync: converge.redisCommands ? converge.redisCommands.total / serviceSyncs : undefined,
    };
    say(reachedAt === undefined ? `NOT converged: B holds ${reached} of ${copies}` : `converged after ${(ms / 1000).toFixed(1)} s`);
    if (reachedAt === undefined) return result;

    // Queues drained, then the memory after.
    const drainBy = performance.now() + Math.min(120_000, left());
    while (performance.now() < drainBy) {
      if ((await queue.depth().catch(() => 1)) === 0) {
        result.converge.queueDrainedMs = wallNow() - reachedAt;
        break;
      }
      await delay(100);
    }
    const after = workers.map((w) => processRssMiB(w.cmd.proc.pid));
    const growth = after.reduce<number>((s, x, i) => s + (x ?? 0) - (before[i] ?? 0), 0);
    const bytes = growth * 2 ** 20;
    result.memory = {
      before,
      after,
      growthMiB: growth,
      kibPerServiceSync: bytes / 1024 / serviceSyncs,
      kibPerServiceSyncAndReplica: bytes / 1024 / (serviceSyncs * params.replicas),
      bytesPerCopy: bytes / copies,
      bytesPerCopyAndReplica: bytes / (copies * params.replicas),
      redisUsedMiB: { before: redisBefore, after: await redisUsedMiB(redisClient) },
    };

    // Settle: until A has pushed nothing for 5 s (bounded).
    await rec.begin('settle');
    const settleStart = performance.now();
    const settleBy = settleStart + Math.min(params.settleMaxS * 1000, left());
    for (;;) {
      const s = await a.sample();
      const quietSince = Math.max(s.lastPushAt ?? 0, reachedAt);
      if (wallNow() - quietSince >= 5_000) {
        result.pushesStopMs = Math.max(0, (s.lastPushAt ?? 0) - reachedAt);
        break;
      }
      if (performance.now() > settleBy) break;
      await delay(250);
    }
    result.phases.push(await rec.end());
    result.settleS = (performance.now() - settleStart) / 1000;
    say(result.pushesStopMs === undefined ? `A still pushing after ${params.settleMaxS} s` : `A's pushes stopped ${(result.pushesStopMs / 1000).toFixed(1)} s after convergence`);

    // Cool-down: one full-sync interval, so that the rest window starts after what the cold sync
    // left behind (the collection of its garbage, the last queued reconciles) rather than in it.
    // It lasts one full-sync interval at least, then until every worker's heap has settled (no
    // more than 10% between the least and the most of its last 20 s, which the collection of the
    // cold sync's garbage takes longer than), six intervals (180 s by default) at most.
    const coolS = params.fullSyncIntervalMs / 1000;
    const coolMaxS = Math.min(180, 6 * coolS);
    if (left() > (coolMaxS + params.restS) * 1000 + 30_000) {
      say(`cooling down for ${coolS} s at least, until the workers' heaps settle`);
      await rec.begin('cool-down');
      const coolStart = performance.now();
      await delay(coolS * 1000);
      const settled = () =>
        rec.liveNames().every((name) => {
          const trail = (rec.heapTrail.get(name) ?? []).slice(-20);
          return trail.length >= 20 && Math.max(...trail) <= 1.1 * Math.min(...trail);
        });
      while (!settled() && performance.now() - coolStart < coolMaxS * 1000) await delay(1_000);
      result.coolS = (performance.now() - coolStart) / 1000;
      result.phases.push(await rec.end());
      if (result.memory) {
        const settledRss = workers.map((w) => processRssMiB(w.cmd.proc.pid));
        const settledGrowth = settledRss.reduce<number>((sum, x, i) => sum + (x ?? 0) - (before[i] ?? 0), 0) * 2 ** 20;
        result.memory.settled = {
          after: settledRss,
          growthMiB: settledGrowth / 2 ** 20,
          kibPerServiceSyncAndReplica: settledGrowth / 1024 / (serviceSyncs * params.replicas),
          bytesPerCopyAndReplica: settledGrowth / (copies * params.replicas),
        };
      }
      say(`cooled down after ${result.coolS.toFixed(0)} s${settled() ? '' : " (heaps not settled)"}`);
    }

    // Rest.
    if (left() > params.restS * 1000 + 30_000) {
      say(`at rest for ${params.restS} s (full sync every ${params.fullSyncIntervalMs / 1000} s)`);
      await a.openRequests();
      await b.openRequests();
      await rec.begin('rest', REST_SCRAPE_MS);
      await delay(params.restS * 1000);
      const rest = await rec.end();
      result.phases.push(rest);
      const [ra, rb] = rest.registries;
      result.rest = {
        seconds: rest.seconds,
        fullSyncIntervalMs: params.fullSyncIntervalMs,
        pushesA: ra?.pushes ?? 0,
        pushesB: rb?.pushes ?? 0,
        readsA: readsOf(ra?.requests ?? {}),
        readsB: readsOf(rb?.requests ?? {}),
        httpA: await a.requests(),
        httpB: await b.requests(),
      };
    }

    // Resync: what an operator's resync costs (every service sync reconciled).
    if (result.rest && left() > 150_000) {
      say('resync of the task (every service sync reconciled)');
      await rec.begin('resync');
      const t = performance.now();
      await within(callApi(url, 'POST', `/api/v1/tasks/${TASK}/resync`, {}, 202), left(), 'POST resync');
      // Drained: the queues empty on four samples in a row, a second apart (the walk queues in paced slices).
      let empty = 0;
      const by = performance.now() + Math.min(300_000, left() - 40_000);
      while (empty < 4 && performance.now() < by) {
        await delay(1_000);
        empty = (await queue.depth().catch(() => 1)) === 0 ? empty + 1 : 0;
      }
      const drained = empty >= 4;
      const seconds = (performance.now() - t) / 1000 - (drained ? 3 : 0);
      const resync = await rec.end();
      result.phases.push(resync);
      const cpuSeconds = (resync.cpu.regsyncEach ?? []).slice(0, params.workers).reduce<number>((sum, x) => sum + (x ?? 0), 0) * resync.seconds;
      const [va, vb] = resync.registries;
      result.resync = { seconds, drained, cpuSeconds, readsA: readsOf(va?.requests ?? {}), readsB: readsOf(vb?.requests ?? {}) };
      say(`resync ${drained ? `drained after ${seconds.toFixed(1)} s` : 'not drained within 300 s'}: ${cpuSeconds.toFixed(1)} CPU-seconds over the workers`);
    }

    // New services: each published into A, timed until B holds its copies.
    if (params.newServices > 0 && left() > 40_000) {
      const fresh = Array.from({ length: params.newServices }, (_, k) => scaleServiceName('new-', k));
      const sentAt = new Map<string, number>();
      const landedAt = new Map<string, number>();
      let allLanded: (() => void) | undefined;
      const done = new Promise<void>((resolve) => (allLanded = resolve));
      const off = b.on((e) => {
        if (e.event !== 'landed') return;
        landedAt.set(e.name, e.at);
        if (landedAt.size === fresh.length) allLanded?.();
      });
      await rec.begin('new services');
      try {
        await b.watchNew(fresh, params.instances);
        for (const [k, name] of fresh.entries()) {
          const r = await gen.publishOne(name, params.instances, copies + k * params.instances);
          sentAt.set(name, r.sentAt);
          await delay(250);
        }
        await Promise.race([done, delay(Math.min(30_000, left()), undefined, { ref: false })]);
      } finally {
        off();
      }
      result.phases.push(await rec.end());
      const lat = fresh.filter((n) => landedAt.has(n) && sentAt.has(n)).map((n) => (landedAt.get(n) as number) - (sentAt.get(n) as number));
      result.newServices = { count: fresh.length, landed: lat.length, ms: lat.length > 0 ? percentiles(lat) : undefined };
      say(`${lat.length} of ${fresh.length} new services in B; max ${lat.length > 0 ? Math.round(Math.max(...lat)) : 'n/a'} ms`);
    }
    const expectedAtEnd = copies + (result.newServices?.count ?? 0) * params.instances;

    // Failover: kill -9 of the busiest leader; copies that vanish from B counted from just before.
    const view = await shardsView();
    const leadsOf = (id: string) => view.items.filter((s) => s.leader === id).map((s) => s.shard);
    for (const w of result.workers) {
      w.leads = leadsOf(w.name);
      w.serves = view.items.filter((x) => x.replicas.includes(w.name)).length;
    }
    const victim = [...ids].sort((x, y) => leadsOf(y).length - leadsOf(x).length || (x < y ? -1 : 1))[0] as string;
    const victimLeads = leadsOf(victim);
    const survivors = ids.filter((id) => id !== victim);
    const vw = workers.find((w) => w.name === victim) as WorkerProc;
    const vInfo = result.workers.find((w) => w.name === victim);
    if (vInfo) {
      vInfo.peakRssMiB = processPeakRssMiB(vw.cmd.proc.pid);
      vInfo.killed = true;
    }
    say(`kill -9 of ${victim}, leader of shards ${victimLeads.join(',')}`);
    await b.armGaps();
    // The leases are read straight from Redis (GET /api/v1/shards counts every service sync, which takes the API long at this size).
    const leasesNow = () => readLeases(redisClient as Redis, PREFIX, Array.from({ length: params.shards }, (_, i) => i));
    const leaseLeftMs = Math.max(...(await leasesNow()).filter((l, shard) => victimLeads.includes(shard) && l !== undefined).map((l) => l?.ttlLeftMs ?? 0));
    await rec.begin('failover');
    const killedAt = performance.now();
    await vw.cmd.proc.kill();
    vw.killed = true;
    const takeovers: Array<{ shard: number; leader: string; ms: number }> = [];
    let failedOverAt: number | undefined;
    let ledAt: Array<LeaseRecord | undefined> = [];
    while (left() > 0) {
      const asked = performance.now();
      const leases = await leasesNow();
      const now = performance.now();
      leases.forEach((lease, shard) => {
        if (victimLeads.includes(shard) && lease !== undefined && survivors.includes(lease.owner) && !takeovers.some((t) => t.shard === shard)) takeovers.push({ shard, leader: lease.owner, ms: now - killedAt });
      });
      if (leases.every((lease) => lease !== undefined && survivors.includes(lease.owner))) {
        failedOverAt = now;
        ledAt = leases;
        break;
      }
      await delay(Math.max(0, 20 - (performance.now() - asked)));
    }
    say(failedOverAt === undefined ? 'NO failover' : `every shard led again after ${((failedOverAt - killedAt) / 1000).toFixed(2)} s (the victim's leases had ${(leaseLeftMs / 1000).toFixed(2)} s left)`);
    // Watched on for vanished copies: at least 2 lease TTLs (10 s at least) after the kill, until the
    // survivors' queues are empty and the new leaders have made their watches (A's subscribes have not
    // grown for 5 s), 300 s at most.
    const subscribes = () => rec.latest[0]?.grpc?.requests.SubscribeServiceRequest ?? 0;
    let lastSubscribes = subscribes();
    let grewAt = performance.now();
    const watchUntil = killedAt + Math.max(10_000, 2 * params.leaseTtlMs);
    let laterLeadChanges = 0;
    let leaderlessSamples = 0;
    while (left() > 0 && performance.now() - killedAt < 300_000) {
      if (failedOverAt !== undefined) {
        const leases = await leasesNow().catch(() => undefined);
        leases?.forEach((lease, shard) => {
          if (lease === undefined) leaderlessSamples += 1;
          else if (lease.token !== ledAt[shard]?.token) {
            laterLeadChanges += 1;
            ledAt[shard] = lease;
          }
        });
      }
      if (subscribes() !== lastSubscribes) {
        lastSubscribes = subscribes();
        grewAt = performance.now();
      }
      if (performance.now() >= watchUntil && performance.now() - grewAt >= 5_000 && (await queue.depth().catch(() => 0)) === 0) break;
      await delay(200);
    }
    const resubscribedMs = grewAt - killedAt;
    result.phases.push(await rec.end());
    const gaps = await b.gaps();
    result.failover = {
      victim,
      victimLeads,
      elapsedMs: failedOverAt === undefined ? undefined : failedOverAt - killedAt,
      leaseLeftMs,
      takeovers: takeovers.sort((x, y) => x.ms - y.ms),
      laterLeadChanges,
      leaderlessSamples,
      resubscribedMs,
      gaps,
      watchedMs: performance.now() - killedAt,
      copiesAtEnd: (await b.sample()).copies,
      expectedAtEnd,
    };
    say(`${gaps?.vanished ?? 'n/a'} copies vanished from B after the kill; B holds ${result.failover.copiesAtEnd.toLocaleString('en-US')} of ${expectedAtEnd.toLocaleString('en-US')}`);
    return result;
  } catch (err) {
    const logs = [api?.logFile, ...workers.map((w) => w.cmd.logFile)].filter((x) => x !== undefined).join(', ');
    throw new Error(`${err instanceof Error ? err.message : String(err)}${logs === '' ? '' : ` (logs: ${logs})`}`, { cause: err });
  } finally {
    recorder?.stop();
    for (const w of workers) {
      const info = result.workers.find((x) => x.name === w.name);
      if (info && !w.killed) info.peakRssMiB = processPeakRssMiB(w.cmd.proc.pid);
    }
    await Promise.all([api, ...workers.map((w) => w.cmd)].map((p) => p?.stop().catch(() => undefined)));
    for (const w of workers) {
      const info = result.workers.find((x) => x.name === w.name);
      if (info) info.logProblems = logProblems(w.cmd.output());
    }
    if (api) result.apiLogProblems = logProblems(api.output());
    if (params.profileDir !== undefined && recorder) result.profiles = recorder.profiles;
    await load?.close().catch(() => undefined);
    await queue?.close().catch(() => undefined);
    for (const r of registries) await r.close().catch(() => undefined);
    redisClient?.disconnect();
    await redis?.cleanup();
  }
}
