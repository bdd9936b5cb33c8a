import type { CpuShares } from './proc-stats.js';
import { REST_SCRAPE_MS, type ScalePhase, type ScaleResult } from './scale.js';
import { int, millis, seconds } from './stats.js';

/** Issue 28's targets for the scale phase (printed next to the figures, never asserted). */
export const SCALE_TARGETS = {
  copies: 1_000_000,
  convergeMs: 180_000,
  kibPerServiceSyncAndReplica: 8,
  bytesPerCopy: 200,
  restCpu: 0.1,
  pushesStopMs: 10_000,
  stallMs: 50,
  newServiceMs: 1_000,
} as const;

/** Other load above this share of a core marks a phase's figures as disturbed. */
const DISTURBED = 0.15;

const verdict = (met: boolean | undefined): string => (met === undefined ? 'n/a' : met ? 'met' : 'MISSED');
const core = (x: number | undefined | null) => (typeof x !== 'number' ? 'n/a' : `${(x * 100).toFixed(x < 0.1 ? 1 : 0)}%`);
const mib = (x: number | undefined) => (x === undefined ? 'n/a' : `${Math.round(x)} MiB`);
const ms = (x: number | undefined) => (x === undefined ? 'n/a' : millis(x));
const phase = (s: ScaleResult, name: string): ScalePhase | undefined => s.phases.find((p) => p.name === name);
const disturbedOf = (...cpus: Array<CpuShares | undefined>) => (cpus.some((c) => (c?.others ?? 0) > DISTURBED) ? 'disturbed' : '');
const counts = (r: Record<string, number>) =>
  Object.entries(r)
    .sort((x, y) => y[1] - x[1])
    .map(([k, n]) => `${k} ${int(n)}`)
    .join(', ') || 'none';
const sum = (r: Record<string, number>) => Object.values(r).reduce((a, b) => a + b, 0);

/** Worst event-loop max of the regsync workers over every phase, ms. */
function workerStallMs(s: ScaleResult): number | undefined {
  const all = s.phases.flatMap((p) => p.workers.map((w) => w.loopMaxMs)).filter((x): x is number => x !== undefined);
  return all.length === 0 ? undefined : Math.max(...all);
}

function registryStallMs(s: ScaleResult): number {
  return Math.max(0, ...s.phases.flatMap((p) => p.registries.map((r) => r.loopDelayMaxMs)));
}

/** Rows of the report's table: [row, what, figure, target, verdict (and whether disturbed)]. */
export function scaleRows(s: ScaleResult): string[][] {
  const rows: string[][] = [];
  const p = s.params;
  const c = s.converge;
  const conv = phase(s, 'converge');
  const full = s.copies >= SCALE_TARGETS.copies;
  rows.push([
    'S',
    `scale: ${int(p.services)} x ${p.instances} over gRPC, ${p.workers} workers, ${p.shards} shards x ${p.replicas}`,
    c === undefined ? 'not run' : c.ms === undefined ? `NOT converged (${int(c.reached)} of ${int(s.copies)} copies)` : `${int(s.copies)} copies in ${seconds(c.ms)} (${int(c.copiesPerSecond)} copies/s, ${int(c.serviceSyncsPerSecond)} service syncs/s)`,
    '1,000,000 copies in <= 3 min',
    `${full ? verdict(c?.ms !== undefined && c.ms <= SCALE_TARGETS.convergeMs) : `n/a below 1,000,000 copies${c?.ms !== undefined && c.ms <= SCALE_TARGETS.convergeMs ? ' (within 3 min)' : ''}`} ${disturbedOf(conv?.cpu)}`.trim(),
  ]);
  const m = s.memory;
  rows.push([
    'S',
    'scale: worker memory (RSS growth, summed), once settled',
    m === undefined
      ? 'n/a'
      : `${m.settled ? `settled: ${m.settled.kibPerServiceSyncAndReplica.toFixed(2)} KiB per service sync and replica, ${Math.round(m.settled.bytesPerCopyAndReplica)} B per copy and replica; ` : 'not settled; '}right after convergence: ${m.kibPerServiceSyncAndReplica.toFixed(2)} KiB and ${Math.round(m.bytesPerCopyAndReplica)} B`,
    '<= 8 KiB per service sync and replica, <= 200 B per copy',
    `${verdict(m?.settled === undefined ? undefined : m.settled.kibPerServiceSyncAndReplica <= SCALE_TARGETS.kibPerServiceSyncAndReplica && m.settled.bytesPerCopyAndReplica <= SCALE_TARGETS.bytesPerCopy)} ${disturbedOf(conv?.cpu)}`.trim(),
  ]);
  const rest = phase(s, 'rest');
  const restWorkers = rest?.cpu.regsyncEach?.slice(0, p.workers);
  const restCpu = restWorkers?.reduce<number>((a, x) => a + (x ?? 0), 0);
  const checksExpected = rest === undefined ? 0 : (p.services * rest.seconds * 1000) / p.verifyIntervalMs;
  rows.push([
    'S',
    `scale: at rest, ${rest ? Math.round(rest.seconds) : 'n/a'} s after a ${s.coolS === undefined ? 'n/a' : Math.round(s.coolS)} s cool-down, full sync every ${p.fullSyncIntervalMs / 1000} s, each service checked every ${p.verifyIntervalMs / 60_000} min, /metrics scraped every ${REST_SCRAPE_MS / 1000} s`,
    rest === undefined ? 'not run' : `workers ${core(restCpu)} of one core (${restWorkers?.map(core).join(' + ')})`,
    'all workers < 10% of one core, full syncs included',
    `${verdict(restCpu === undefined ? undefined : restCpu < SCALE_TARGETS.restCpu)} ${disturbedOf(rest?.cpu)}`.trim(),
  ]);
  const r = s.rest;
  const readsA = r === undefined ? undefined : sum(r.readsA);
  const readsB = r === undefined ? undefined : sum(r.readsB);
  rows.push([
    'S',
    'scale: pushes and reads at rest (A and B)',
    r === undefined
      ? 'not run'
      : `pushes A ${int(r.pushesA)}, B ${int(r.pushesB)}; reads A ${int(readsA ?? 0)} (${counts(r.readsA)}), B ${int(readsB ?? 0)} (${counts(r.readsB)}; the verifying checks read B about ${int(Math.round(checksExpected))} times in this window)`,
    '0 pushes; 0 reads but the verifying checks (one read of B per service sync and verifyIntervalMs)',
    verdict(r === undefined ? undefined : r.pushesA + r.pushesB === 0 && readsA === 0 && (readsB ?? 0) <= Math.ceil(checksExpected * 1.5) + 10),
  ]);
  rows.push([
    'S',
    'scale: pushes stop after convergence',
    s.pushesStopMs === undefined ? (s.settleS === undefined ? 'n/a' : `still pushing after ${Math.round(s.settleS)} s`) : `A's last push ${seconds(s.pushesStopMs)} after convergence`,
    'within 10 s',
    `${verdict(s.settleS === undefined ? undefined : s.pushesStopMs !== undefined && s.pushesStopMs <= SCALE_TARGETS.pushesStopMs)} ${disturbedOf(phase(s, 'settle')?.cpu)}`.trim(),
  ]);
  const stall = workerStallMs(s);
  rows.push([
    'S',
    'scale: event-loop stall, whole run',
    `workers max ${ms(stall)}; registry threads max ${ms(registryStallMs(s))} (not regsync)`,
    'no stall > 50 ms',
    `${verdict(stall === undefined ? undefined : stall <= SCALE_TARGETS.stallMs)} ${disturbedOf(...s.phases.map((x) => x.cpu))}`.trim(),
  ]);
  const f = s.failover;
  rows.push([
    'S',
    `scale: kill -9 of the busiest leader${f ? ` (${f.victim}, ${f.victimLeads.length} shards)` : ''}`,
    f === undefined ? 'not run' : `${f.gaps ? int(f.gaps.vanished) : 'n/a'} copies vanished from B (${f.gaps ? int(f.gaps.services) : 'n/a'} services) in ${seconds(f.watchedMs)}; every shard led after ${f.elapsedMs === undefined ? 'NOT within the deadline' : seconds(f.elapsedMs)} (lease TTL ${seconds(p.leaseTtlMs)}; the victim's leases had ${f.leaseLeftMs === undefined ? 'n/a' : seconds(f.leaseLeftMs)} left); then ${int(f.laterLeadChanges)} lease(s) taken again, ${int(f.leaderlessSamples)} sample(s) with a shard unled`,
    '0 copies vanish, every shard led within the lease TTL and kept',
    `${verdict(f === undefined ? undefined : f.gaps?.vanished === 0 && f.elapsedMs !== undefined && f.elapsedMs <= p.leaseTtlMs && f.laterLeadChanges === 0 && f.leaderlessSamples === 0)} ${disturbedOf(phase(s, 'failover')?.cpu)}`.trim(),
  ]);
  const n = s.newServices;
  rows.push([
    'S',
    'scale: new service in the `*` scope to B',
    n === undefined ? 'not run' : `${n.landed} of ${n.count}; ${n.ms ? `p50 ${millis(n.ms.p50)}, max ${millis(n.ms.max)}` : 'none landed'}`,
    'within 1 s',
    `${verdict(n === undefined ? undefined : n.landed === n.count && n.ms !== undefined && n.ms.max <= SCALE_TARGETS.newServiceMs)} ${disturbedOf(phase(s, 'new services')?.cpu)}`.trim(),
  ]);
  return rows;
}

/** The diagnostics of the scale phase: per phase and per worker. */
export function scaleLines(s: ScaleResult): string[] {
  const p = s.params;
  const out: string[] = [];
  out.push(
    `  (S) ${int(p.services)} services x ${p.instances} ephemeral instances = ${int(s.copies)} copies; ${p.workers} workers x --shards ${p.shards} --replicas ${p.replicas}, lease TTL ${seconds(p.leaseTtlMs)}; ` +
      `push merge window ${p.mergeWindowMs} ms; task fullSyncIntervalMs ${int(p.fullSyncIntervalMs)}; registries A and B each in a worker thread of the bench`,
  );
  if (s.register) out.push(`      register: A filled in ${seconds(s.register.elapsedMs)} (${int(s.register.copiesPerSecond)} instances/s, one BatchInstanceRequest per service, ${p.concurrency} in flight); A holds ${int(s.register.inA)}`);
  const c = s.converge;
  if (c) {
    out.push(
      `      converge: first copy after ${ms(c.firstCopyMs)}, ${int(c.copiesPerSecond)} copies/s, ${int(c.serviceSyncsPerSecond)} service syncs/s; queues empty ${c.queueDrainedMs === undefined ? 'not within 120 s' : `${seconds(c.queueDrainedMs)}`} after the last copy; ` +
        `Redis ${c.redisCommandsPerServiceSync === undefined ? 'n/a' : c.redisCommandsPerServiceSync.toFixed(1)} commands per service sync`,
    );
  }
  const m = s.memory;
  if (m) {
    out.push(
      `      memory: workers' RSS ${m.before.map(mib).join(' + ')} before the task -> ${m.after.map(mib).join(' + ')} converged and drained = +${Math.round(m.growthMiB)} MiB${m.settled ? `; ${m.settled.after.map(mib).join(' + ')} once settled = +${Math.round(m.settled.growthMiB)} MiB` : ''}; ` +
        `Redis used ${mib(m.redisUsedMiB.before)} -> ${mib(m.redisUsedMiB.after)} (${m.redisUsedMiB.before !== undefined && m.redisUsedMiB.after !== undefined ? `${Math.round(((m.redisUsedMiB.after - m.redisUsedMiB.before) * 2 ** 20) / p.services)} B per service sync` : 'n/a'})`,
    );
  }
  if (s.resync) out.push(`      resync (every service sync reconciled): ${s.resync.drained ? `drained after ${s.resync.seconds.toFixed(1)} s` : 'not drained'}, ${s.resync.cpuSeconds.toFixed(1)} CPU-s over the workers; reads A: ${counts(s.resync.readsA)}; B: ${counts(s.resync.readsB)}`);
  if (s.rest) {
    const httpA = Object.entries(s.rest.httpA).map(([k, w]) => `${k} ${w.count}`).join(', ') || 'none';
    const httpB = Object.entries(s.rest.httpB).map(([k, w]) => `${k} ${w.count}`).join(', ') || 'none';
    out.push(`      rest: HTTP requests A: ${httpA}; B: ${httpB}`);
  }
  for (const ph of s.phases) {
    const names = [...ph.workers.map((w) => w.name), 'api'];
    const cpuEach = ph.cpu.regsyncEach?.map((x, i) => `${names[i]} ${core(x)}`).join(', ') ?? '';
    const seconds_ = Math.max(1e-3, ph.seconds);
    const rc = ph.redisCommands;
    out.push(
      `    phase ${ph.name} (${ph.seconds.toFixed(1)} s): CPU ${cpuEach}; redis-server ${core(ph.cpu.redis)}; bench process ${core(ph.cpu.bench)} (all threads); everything else ${core(ph.cpu.others)}${(ph.cpu.others ?? 0) > DISTURBED ? ' (DISTURBED)' : ''}`,
      `      workers: ${ph.workers.map((w) => `${w.name} heap ${mib(w.heapUsedMiB)} / ${mib(w.heapTotalMiB)}, loop delay p99 ${ms(w.loopP99Ms)} max ${ms(w.loopMaxMs)} (${w.scrapes} scrapes, slowest ${millis(w.scrapeMaxMs)})`).join('; ')}`,
      `      redis: used ${mib(ph.redisUsedMiB.before)} -> ${mib(ph.redisUsedMiB.after)}; ${rc ? `${int(rc.total)} commands (${int(rc.total / seconds_)}/s), ${int(rc.scripts)} scripts; ${rc.calls.slice(0, 8).map((x) => `${x.command} ${int(x.calls)}`).join(', ')}` : 'n/a'}`,
      `      registries: ${ph.registries.map((r) => `${r.name} thread busy ${core(r.loop)}, delay p99 ${ms(r.loopDelayP99Ms)} max ${ms(r.loopDelayMaxMs)}, heap ${mib(r.heapUsedMiB)}, ${int(r.pushes)} pushes, requests ${counts(r.requests)}`).join('; ')}`,
    );
    if (ph.name === 'converge' || ph.name === 'settle') {
      const step = ph.name === 'converge' ? Math.max(1, Math.ceil(ph.timeline.length / 30)) : 1;
      const shown = ph.timeline.filter((_, i) => i % step === 0 || i === ph.timeline.length - 1);
      out.push(
        ph.name === 'converge'
          ? `      copies in B over time: ${shown.map(([t, , n]) => `${t}s:${int(n)}`).join(' ')}`
          : `      A's pushes per second while settling: ${ph.timeline.map(([t, n], i) => `${t}s:${int(n - (ph.timeline[i - 1]?.[1] ?? 0))}`).join(' ')}`,
      );
    }
  }
  const f = s.failover;
  if (f) {
    out.push(
      `      failover: takeovers ${f.takeovers.map((t) => `${t.shard}->${t.leader} at ${seconds(t.ms)}`).join(', ') || 'none'}; the new leaders' subscriptions made ${f.resubscribedMs === undefined ? 'n/a' : seconds(f.resubscribedMs)} after the kill; B holds ${int(f.copiesAtEnd)} of ${int(f.expectedAtEnd)} copies at the end` +
        (f.gaps && f.gaps.examples.length > 0 ? `; first vanished: ${f.gaps.examples.map((e) => `${e.service} -${e.lost} at ${seconds(e.ms)}`).join(', ')}` : ''),
    );
  }
  for (const w of s.workers) {
    out.push(
      `      ${w.name}${w.killed ? ' (killed)' : ''}: led ${w.leads.join(',') || '-'}, served ${w.serves} shards, peak RSS ${mib(w.peakRssMiB)}; ${w.logProblems.length === 0 ? 'no warnings or errors' : w.logProblems.slice(0, 5).map((x) => `${x.level} "${x.msg}" x${x.count}`).join('; ')}; log ${w.logFile}`,
    );
  }
  if (s.apiLogProblems.length > 0) out.push(`      api: ${s.apiLogProblems.slice(0, 5).map((x) => `${x.level} "${x.msg}" x${x.count}`).join('; ')}`);
  return out;
}
