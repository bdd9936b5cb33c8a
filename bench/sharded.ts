import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { shardOf } from '../src/coord/index.js';
import { serviceSyncKey } from '../src/model/index.js';
import type { ServiceChange } from '../src/registry/naming-store.js';
import { startBackends, type BenchBackends } from './backends.js';
import { CopyCounter } from './cold-sync.js';
import { GROUP, NAMESPACE, ipOf, persistentInstance, serviceName } from './instances.js';
import { CpuMeter, processPeakRssMiB, processRssMiB, type CpuShares } from './proc-stats.js';
import { API_READY, callApi, logProblems, QueueSampler, startRegsyncCommand, WORKER_READY, type QueueStats, type RegsyncCommand } from './regsync.js';
import type { RequestCounts } from './request-counter.js';
import { percentiles, type Percentiles } from './stats.js';

/*
 * Measurement 5: regsync sharded over several worker processes on this machine, with its own
 * redis-server (shards and replicas are fixed per deployment at the first worker's start) and its
 * own registries A and B:
 *
 *   this process        registries A and B, bookkeeping
 *   regsync api         the REST API (no sync work)
 *   regsync worker x3   `--shards 8 --replicas 2`, each serving and leading shards
 *   redis-server        its own, for this phase only
 *
 * A holds `services` services of one persistent instance each; one task A->B for `*` makes as many
 * service syncs. Measured: the time until B holds every copy; the workers' memory before the task
 * and after it converged; the standing cost of the synced task; and the failover after a kill -9 of
 * the worker leading the most shards.
 */

const TASK = 'shards';

/** One shard as `GET /api/v1/shards` shows it. */
interface ShardItem {
  shard: number;
  leader: string | null;
  token: number | null;
  leaseTtlLeftMs: number | null;
  replicas: string[];
  queueDepth: number;
  serviceSyncs: number;
}

interface ShardsView {
  shards: number;
  replicas: number;
  items: ShardItem[];
}

/** One regsync process of the phase, with what it ended with. */
export interface ShardedProcess {
  /** `api`, or the worker's id. */
  name: string;
  pid: number | undefined;
  logFile: string;
  /** RSS (VmRSS) before the task existed, after it converged, MiB. */
  idleRssMiB: number | undefined;
  convergedRssMiB: number | undefined;
  /** Peak RSS (VmHWM) when the phase ended (for the killed worker: just before the kill), MiB. */
  peakRssMiB: number | undefined;
  /** Shards it led after convergence, before the kill. */
  leads: number[];
  killed: boolean;
  logProblems: Array<{ level: string; msg: string; count: number }>;
}

/** Result of measurement 5. */
export interface ShardedResult {
  services: number;
  workers: number;
  shards: number;
  replicas: number;
  leaseTtlMs: number;
  /** Copies B must hold once the task converged (one per service). */
  expected: number;
  reached: number;
  /** `POST /api/v1/tasks` answered, ms after it was sent. */
  taskCreatedMs: number;
  firstCopyMs: number | undefined;
  /** From the task's creation until B held every copy. */
  convergedMs: number;
  copiesPerSecond: number;
  timedOut: boolean;
  /** After the last copy, until every shard queue was empty (undefined: not within 15 s). */
  queueDrainedMs: number | undefined;
  queue: QueueStats;
  /** Copies in B over time, `[seconds, copies]`. */
  timeline: Array<[number, number]>;
  /** During convergence: CPU of the workers and the api (`regsyncEach`: workers in order, then the api), redis-server and this process. */
  cpu: CpuShares;
  requestsToA: RequestCounts;
  requestsToB: RequestCounts;
  /** Workers only (the api process is in `processes`). */
  memory: {
    idleMiB: number;
    convergedMiB: number;
    /** (converged - idle) summed over the workers, per service sync, KiB. */
    kibPerServiceSync: number;
  };
  /** Service syncs per shard, as `GET /api/v1/shards` counted them after convergence. */
  serviceSyncsPerShard: number[];
  /** The synced task at rest: `seconds` with nothing changing. */
  rest: { seconds: number; cpu: CpuShares; requestsToA: RequestCounts; requestsToB: RequestCounts; queue: QueueStats } | undefined;
  failover: ShardedFailover | undefined;
  /** Copies in B when the phase ended: every service's plus the changes made after the failover. */
  copiesAtEnd: number;
  processes: ShardedProcess[];
}

export interface ShardedFailover {
  victim: string;
  /** Shards the victim led when it was killed. */
  victimLeads: number[];
  /** From the SIGKILL until every shard had a leader among the live workers other than the victim. */
  elapsedMs: number | undefined;
  /** When each of the victim's shards got its new leader, ms after the kill, and who. */
  takeovers: Array<{ shard: number; leader: string; ms: number }>;
  /** `GET /api/v1/shards` while polling: calls and how long each took. */
  polls: number;
  pollMs: Percentiles;
  /** New instances registered in A (services of the victim's shards) right after the failover. */
  changes: number;
  /** From their registration until B held each copy. */
  changeLandedMs: Percentiles | undefined;
  changesLanded: number;
  /** The victim vanished from `GET /api/v1/workers`, ms after the kill (undefined: not while we looked). */
  victimUnlistedMs: number | undefined;
  /** From the kill until the changes landed (the victim's own share is lost with it). */
  cpu: CpuShares | undefined;
}

export interface ShardedParams {
  services: number;
  workers: number;
  shards: number;
  replicas: number;
  leaseTtlMs: number;
  /** Seconds the converged task runs on with nothing changing. */
  idleS: number;
  /** New instances registered in A right after the failover. */
  changes: number;
  logDir: string;
  nodeFlags: string[];
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

/** Fisher-Yates on a copy; the first `n`. */
function pick<T>(xs: readonly T[], n: number): T[] {
  const a = [...xs];
  for (let i = a.length - 1; i > 0; i -= 1) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j] as T, a[i] as T];
  }
  return a.slice(0, n);
}

const sum = (xs: Array<number | undefined>) => xs.reduce<number>((acc, x) => acc + (x ?? 0), 0);

/**
 * Measurement 5, with everything it needs started here and stopped again, whatever happens. Every
 * wait is bounded by `deadlineMs` from now.
 */
export async function measureSharded(params: ShardedParams, deadlineMs: number, progress: (line: string) => void): Promise<ShardedResult> {
  const deadline = performance.now() + deadlineMs;
  const left = () => Math.max(0, deadline - performance.now());
  let backends: BenchBackends | undefined;
  let queue: QueueSampler | undefined;
  let counter: CopyCounter | undefined;
  let api: RegsyncCommand | undefined;
  const workers = new Map<string, RegsyncCommand>();
  const processes = new Map<string, ShardedProcess>();
  const started: RegsyncCommand[] = [];
  const ids = Array.from({ length: params.workers }, (_, i) => `bench-w${i + 1}`);

  const describeProcess = (name: string, p: RegsyncCommand): ShardedProcess => {
    const d: ShardedProcess = { name, pid: p.proc.pid, logFile: p.logFile, idleRssMiB: undefined, convergedRssMiB: undefined, peakRssMiB: undefined, leads: [], killed: false, logProblems: [] };
    processes.set(name, d);
    return d;
  };

  let result: ShardedResult | undefined;
  /** Cleared when the phase ends: stops a background poll of the API. */
  let watchingWorkers = true;
  try {
    backends = await startBackends();
    const { redis, redisClient, a, b, requestsA, requestsB } = backends;

    const common = { logDir: params.logDir, nodeFlags: params.nodeFlags };
    api = await startRegsyncCommand({
      ...common,
      args: ['api', '--listen', '127.0.0.1:0', '--redis', redis.url],
      ready: API_READY,
      name: 'shards-api',
      timeoutMs: Math.min(30_000, left()),
    });
    started.push(api);
    describeProcess('api', api);
    const url = api.ready;
    const redisUrl = redis.url;
    // Started one after the other: the first fixes the deployment (shards, replicas) in Redis.
    for (const id of ids) {
      const w = await startRegsyncCommand({
        ...common,
        args: ['worker', '--redis', redisUrl, '--shards', String(params.shards), '--replicas', String(params.replicas), '--worker-id', id, '--lease-ttl-ms', String(params.leaseTtlMs)],
        ready: WORKER_READY,
        name: `shards-${id}`,
        timeoutMs: Math.min(30_000, left()),
      });
      started.push(w);
      workers.set(id, w);
      describeProcess(id, w);
    }
    const workerPids = () => ids.map((id) => workers.get(id)?.proc.pid);
    const get = async (path: string) => within(callApi(url, 'GET', path, undefined, 200), left(), `GET ${path}`);
    const shardsView = async () => (await get('/api/v1/shards')) as ShardsView;

    await within(callApi(url, 'POST', '/api/v1/clusters', { id: 'a', kind: 'nacos', endpoints: [a.endpoint] }, 201), left(), 'POST cluster a');
    await within(callApi(url, 'POST', '/api/v1/clusters', { id: 'b', kind: 'nacos', endpoints: [b.endpoint] }, 201), left(), 'POST cluster b');

    // Every shard led by one of the workers before anything is measured.
    for (;;) {
      const v = await shardsView();
      if (v.items.length === params.shards && v.items.every((s) => s.leader !== null && ids.includes(s.leader))) break;
      if (left() === 0) throw new Error(`shards not all led before the deadline: ${JSON.stringify(v.items.map((s) => [s.shard, s.leader]))}`);
      await delay(100);
    }

    const seedStart = performance.now();
    for (let s = 0; s < params.services; s += 1) {
      const name = serviceName(s);
      a.store.register(NAMESPACE, GROUP, name, persistentInstance(ipOf(s), name));
    }
    progress(`(5) ${params.workers} workers and the api up, every shard led; A seeded with ${params.services.toLocaleString('en-US')} services in ${((performance.now() - seedStart) / 1000).toFixed(1)} s`);

    // The idle baseline, once the workers' start-up has settled.
    await delay(Math.min(2_000, left()));
    for (const [name, d] of processes) d.idleRssMiB = processRssMiB(name === 'api' ? api.proc.pid : workers.get(name)?.proc.pid);

    // (1) Convergence.
    queue = new QueueSampler(redis.url, params.shards);
    const cpu = new CpuMeter(() => [...workerPids(), api?.proc.pid], redisClient);
    counter = new CopyCounter(b, params.services);
    const copies = counter;
    await cpu.start();
    queue.start();
    requestsA.open();
    requestsB.open();
    const timeline: Array<[number, number]> = [];
    const t0 = performance.now();
    const ticker = setInterval(() => {
      const s = Math.round((performance.now() - t0) / 1000);
      timeline.push([s, copies.total]);
      if (s % 5 === 0) progress(`(5) ${copies.total.toLocaleString('en-US')} / ${params.services.toLocaleString('en-US')} copies after ${s} s`);
    }, 1000);
    let reachedAt: number | undefined;
    let taskCreatedMs: number;
    try {
      await within(callApi(url, 'POST', '/api/v1/tasks', { id: TASK, source: 'a', destination: 'b', service: '*' }, 201), left(), 'POST task');
      taskCreatedMs = performance.now() - t0;
      reachedAt = await copies.reached(deadline);
    } finally {
      clearInterval(ticker);
    }
    const end = reachedAt ?? performance.now();
    const convergeCpu = await cpu.stop();
    const convergeA = requestsA.window();
    const convergeB = requestsB.window();
    timeline.push([Math.round(((end - t0) / 1000) * 10) / 10, copies.total]);
    progress(`(5) ${reachedAt === undefined ? 'NOT converged' : 'converged'} after ${((end - t0) / 1000).toFixed(2)} s`);

    let queueDrainedMs: number | undefined;
    const drainBy = performance.now() + Math.min(15_000, left());
    while (performance.now() < drainBy) {
      if ((await queue.depth().catch(() => 1)) === 0) {
        queueDrainedMs = performance.now() - end;
        break;
      }
      await delay(50);
    }
    const queueStats = await queue.finish();
    for (const [name, d] of processes) d.convergedRssMiB = processRssMiB(name === 'api' ? api.proc.pid : workers.get(name)?.proc.pid);
    const workerProcs = ids.map((id) => processes.get(id) as ShardedProcess);
    const idleMiB = sum(workerProcs.map((d) => d.idleRssMiB));
    const convergedMiB = sum(workerProcs.map((d) => d.convergedRssMiB));

    const afterConverge = await shardsView();
    for (const d of workerProcs) d.leads = afterConverge.items.filter((s) => s.leader === d.name).map((s) => s.shard);

    result = {
      services: params.services,
      workers: params.workers,
      shards: params.shards,
      replicas: params.replicas,
      leaseTtlMs: params.leaseTtlMs,
      expected: params.services,
      reached: copies.total,
      taskCreatedMs,
      firstCopyMs: copies.firstAt === undefined ? undefined : copies.firstAt - t0,
      convergedMs: end - t0,
      copiesPerSecond: copies.total / ((end - t0) / 1000),
      timedOut: reachedAt === undefined,
      queueDrainedMs,
      queue: queueStats,
      timeline,
      cpu: convergeCpu,
      requestsToA: convergeA,
      requestsToB: convergeB,
      memory: { idleMiB, convergedMiB, kibPerServiceSync: ((convergedMiB - idleMiB) * 1024) / params.services },
      serviceSyncsPerShard: afterConverge.items.map((s) => s.serviceSyncs),
      rest: undefined,
      failover: undefined,
      copiesAtEnd: copies.total,
      processes: [],
    };
    if (reachedAt === undefined) return result;

    // (4) The synced task at rest: what it costs when nothing changes.
    if (params.idleS > 0 && left() > params.idleS * 1000) {
      progress(`(5) the task runs on for ${params.idleS} s with nothing changing`);
      requestsA.open();
      requestsB.open();
      await cpu.start();
      queue.start(500);
      await delay(params.idleS * 1000);
      const restCpu = await cpu.stop();
      result.rest = { seconds: params.idleS, cpu: restCpu, requestsToA: requestsA.window(), requestsToB: requestsB.window(), queue: await queue.finish() };
    }

    // (3) Failover: kill -9 of the worker leading the most shards.
    const before = await shardsView();
    const leadsOf = (id: string) => before.items.filter((s) => s.leader === id).map((s) => s.shard);
    const victim = [...ids].sort((x, y) => leadsOf(y).length - leadsOf(x).length || (x < y ? -1 : 1))[0] as string;
    const victimLeads = leadsOf(victim);
    const survivors = ids.filter((id) => id !== victim);
    const victimProc = workers.get(victim) as RegsyncCommand;
    const victimInfo = processes.get(victim) as ShardedProcess;
    victimInfo.peakRssMiB = processPeakRssMiB(victimProc.proc.pid);
    progress(`(5) kill -9 of ${victim}, leader of shards ${victimLeads.join(',')}`);
    await cpu.start();
    const killedAt = performance.now();
    await victimProc.proc.kill();
    workers.delete(victim);
    victimInfo.killed = true;

    // Meanwhile, from the kill on: when the victim leaves the live workers (its membership expires).
    let victimUnlistedMs: number | undefined;
    const unlisting = (async () => {
      while (watchingWorkers && left() > 0) {
        const w = (await get('/api/v1/workers').catch(() => undefined)) as { items: Array<{ id: string }> } | undefined;
        if (w && !w.items.some((x) => x.id === victim)) {
          victimUnlistedMs = performance.now() - killedAt;
          return;
        }
        await delay(100);
      }
    })();

    const takeovers: ShardedFailover['takeovers'] = [];
    const pollTimes: number[] = [];
    let failedOverAt: number | undefined;
    while (left() > 0) {
      const asked = performance.now();
      const v = await shardsView();
      pollTimes.push(performance.now() - asked);
      const now = performance.now();
      for (const s of v.items) {
        if (victimLeads.includes(s.shard) && s.leader !== null && survivors.includes(s.leader) && !takeovers.some((t) => t.shard === s.shard)) {
          takeovers.push({ shard: s.shard, leader: s.leader, ms: now - killedAt });
        }
      }
      if (v.items.length === params.shards && v.items.every((s) => s.leader !== null && survivors.includes(s.leader))) {
        failedOverAt = now;
        break;
      }
      await delay(Math.max(0, 50 - (performance.now() - asked)));
    }
    const failover: ShardedFailover = {
      victim,
      victimLeads,
      elapsedMs: failedOverAt === undefined ? undefined : failedOverAt - killedAt,
      takeovers: takeovers.sort((x, y) => x.ms - y.ms),
      polls: pollTimes.length,
      pollMs: percentiles(pollTimes),
      changes: 0,
      changeLandedMs: undefined,
      changesLanded: 0,
      victimUnlistedMs: undefined,
      cpu: undefined,
    };
    result.failover = failover;
    progress(`(5) ${failedOverAt === undefined ? 'NO failover' : 'every shard led again'} after ${((performance.now() - killedAt) / 1000).toFixed(2)} s`);

    // A change right after the failover: new instances in services of the victim's shards.
    if (failedOverAt !== undefined) {
      const candidates: string[] = [];
      for (let s = 0; s < params.services; s += 1) {
        const name = serviceName(s);
        const shard = shardOf(serviceSyncKey({ taskId: TASK, service: { namespace: NAMESPACE, group: GROUP, name } }), params.shards);
        if (victimLeads.includes(shard)) candidates.push(name);
      }
      const chosen = pick(candidates.length > 0 ? candidates : Array.from({ length: params.services }, (_, s) => serviceName(s)), params.changes);
      const pending = new Map<string, number>();
      const landed: number[] = [];
      let done: (() => void) | undefined;
      const check = (name: string) => {
        const at = pending.get(name);
        if (at === undefined || (b.store.getService(NAMESPACE, GROUP, name)?.instances.size ?? 0) < 2) return;
        landed.push(performance.now() - at);
        pending.delete(name);
        if (pending.size === 0) done?.();
      };
      const onChange = (change: ServiceChange) => {
        if (change.namespaceId === NAMESPACE) check(change.groupedName.slice(change.groupedName.indexOf('@@') + 2));
      };
      const allLanded = new Promise<void>((resolve) => (done = resolve));
      b.store.on('change', onChange);
      try {
        for (const [k, name] of chosen.entries()) {
          pending.set(name, performance.now());
          a.store.register(NAMESPACE, GROUP, name, persistentInstance(ipOf(params.services + k), name));
        }
        for (const name of chosen) check(name);
        if (pending.size > 0) await Promise.race([allLanded, delay(left(), undefined, { ref: false })]);
      } finally {
        b.store.off('change', onChange);
      }
      failover.changes = chosen.length;
      failover.changesLanded = landed.length;
      failover.changeLandedMs = landed.length > 0 ? percentiles(landed) : undefined;
      progress(`(5) ${landed.length} of ${chosen.length} changes made after the failover landed in B`);
    }

    // The victim's membership expires after a few seconds; wait for it a little longer at most.
    await Promise.race([unlisting, delay(Math.min(15_000, left()), undefined, { ref: false })]);
    watchingWorkers = false;
    failover.victimUnlistedMs = victimUnlistedMs;
    failover.cpu = await cpu.stop();
    result.copiesAtEnd = copies.total;
    return result;
  } catch (err) {
    const logs = [...processes.values()].map((d) => d.logFile).join(', ');
    throw new Error(`${err instanceof Error ? err.message : String(err)}${logs === '' ? '' : ` (logs: ${logs})`}`, { cause: err });
  } finally {
    watchingWorkers = false;
    counter?.close();
    for (const [id, w] of workers) {
      const d = processes.get(id);
      if (d) d.peakRssMiB = processPeakRssMiB(w.proc.pid);
    }
    await Promise.all(started.map((p) => p.stop().catch(() => undefined)));
    await queue?.close();
    await backends?.close();
    // (the processes' log problems are read once they have exited)
    for (const [name, d] of processes) {
      const p = name === 'api' ? api : started.find((s) => s.ready === name);
      d.logProblems = p ? logProblems(p.output()) : [];
    }
    if (result) result.processes = [...processes.values()];
  }
}
