import type { BenchArgs } from './args.js';
import type { ColdSyncResult } from './cold-sync.js';
import type { CpuShares } from './proc-stats.js';
import type { ZooKeeperColdSyncResult } from './zookeeper-cold-sync.js';
import { formatProfileSummary, type ProfileSummary } from './profile-summary.js';
import type { LatencyResult } from './propagation.js';
import type { RawWriteResult } from './raw-write.js';
import type { QueueStats } from './regsync.js';
import type { RequestCounts } from './request-counter.js';
import { int, millis, percent, seconds, table } from './stats.js';

/** The cold sync should reach this share of the raw write rate. */
export const COLD_SYNC_TARGET = 0.5;
/** p99 propagation latency target, ms (at 200 changes/s). */
export const LATENCY_P99_TARGET_MS = 100;

/** Other load above this share of a core makes a phase's figures suspect. */
export const DISTURBED = 0.15;

export interface Machine {
  node: string;
  platform: string;
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
}

/** Everything one run produced; `--json` prints exactly this. */
export interface BenchResult {
  machine: Machine;
  parameters: Omit<BenchArgs, 'json'>;
  raw: RawWriteResult | undefined;
  cold: (ColdSyncResult & { ratioToRaw: number | undefined; target: number; met: boolean | undefined }) | undefined;
  latency: (LatencyResult & { targetP99Ms: number; met: boolean }) | undefined;
  zk: ZooKeeperColdSyncResult | undefined;
  regsync:
    | {
        logFile: string;
        peakRssMiB: number | undefined;
        logProblems: Array<{ level: string; msg: string; count: number }>;
        profile: ProfileSummary[] | undefined;
      }
    | undefined;
  /** Phases that failed, with why. */
  errors: string[];
  durationMs: number;
}

const verdict = (met: boolean | undefined): string => (met === undefined ? 'n/a' : met ? 'MET' : 'MISSED');
const disturbed = (...cpus: Array<CpuShares | undefined>): string =>
  cpus.some((c) => (c?.others ?? 0) > DISTURBED) ? ' (disturbed by other load)' : '';

function cpuLine(cpu: CpuShares): string {
  const core = (x: number | undefined) => (x === undefined ? 'n/a' : `${Math.round(x * 100)}%`);
  return (
    `regsync ${core(cpu.regsync)}, redis-server ${core(cpu.redis)}, bench process ${core(cpu.bench)} of one core ` +
    `(its main thread, which serves the registries: busy ${core(cpu.benchMainLoop)}, event-loop delay p99 ${millis(cpu.benchLoopDelayP99Ms)}, max ${millis(cpu.benchLoopDelayMaxMs)}); ` +
    `everything else on the machine ${core(cpu.others)}${(cpu.others ?? 0) > DISTURBED ? ' (DISTURBED: other load ran meanwhile)' : ''}`
  );
}

function requestsLine(counts: RequestCounts): string {
  const entries = Object.entries(counts).sort((x, y) => x[1].firstMs - y[1].firstMs);
  if (entries.length === 0) return 'none';
  const at = (ms: number) => `${(ms / 1000).toFixed(2)}`;
  return entries
    .map(([k, w]) => `${k} x${int(w.count)} (${at(w.firstMs)}-${at(w.lastMs)} s, answered in p50 ${millis(w.answerP50Ms)} p99 ${millis(w.answerP99Ms)})`)
    .join(', ');
}

function queueLine(q: QueueStats): string {
  return `max depth ${int(q.maxDepth)} jobs, ${int(q.failedAtEnd)} failed`;
}

/** The results as a table plus diagnostics, for people. */
export function formatReport(r: BenchResult): string {
  const p = r.parameters;
  const rows: string[][] = [['#', 'measurement', 'result', 'target', 'verdict']];
  if (r.raw) {
    rows.push([
      '1',
      'raw destination write rate',
      `${int(r.raw.writesPerSecond)} writes/s (${int(r.raw.ok)} in ${seconds(r.raw.elapsedMs)}${r.raw.rounds.length > 1 ? `; median of ${r.raw.rounds.length} rounds` : ''})${r.raw.timedOut ? ' TIMED OUT' : ''}`,
      'the ceiling',
      (r.raw.failed > 0 || r.raw.timedOut ? 'INCOMPLETE' : '') + disturbed(r.raw.cpu).trim(),
    ]);
  }
  if (r.cold) {
    const c = r.cold;
    // One decimal: 49.6% must not read as 50% next to MISSED.
    const ratio = c.ratioToRaw === undefined ? '' : ` = ${(c.ratioToRaw * 100).toFixed(1)}% of (1)`;
    rows.push([
      '2',
      'cold full sync',
      `${seconds(c.elapsedMs)}, ${int(c.copiesPerSecond)} copies/s${ratio}${c.timedOut ? ` (TIMED OUT at ${int(c.reached)}/${int(c.expected)})` : ''}`,
      `>= ${percent(c.target)} of (1)`,
      verdict(c.met) + disturbed(c.cpu, r.raw?.cpu),
    ]);
  }
  if (r.zk) {
    const z = r.zk;
    rows.push([
      '4',
      'cold sync ZooKeeper (Dubbo) -> Nacos',
      `${int(z.interfaces)} interfaces x ${z.providersPerInterface} providers in ${seconds(z.elapsedMs)}, ${int(z.copiesPerSecond)} copies/s${z.timedOut ? ` (TIMED OUT at ${int(z.reached)}/${int(z.expected)})` : ''}`,
      'figure only',
      '',
    ]);
  }
  if (r.latency) {
    const l = r.latency.latencyMs;
    rows.push([
      '3',
      'propagation latency',
      `p50 ${millis(l.p50)}, p90 ${millis(l.p90)}, p99 ${millis(l.p99)}, max ${millis(l.max)}${r.latency.lost > 0 ? `, ${r.latency.lost} lost` : ''}`,
      `p99 <= ${LATENCY_P99_TARGET_MS} ms at ${r.latency.rate}/s`,
      verdict(r.latency.met) + disturbed(r.latency.cpu),
    ]);
  }

  const out: string[] = [
    `regsync bench: node ${r.machine.node}, ${r.machine.platform}, ${r.machine.cpus} CPUs (${r.machine.cpuModel}), ${r.machine.memoryGiB.toFixed(1)} GiB; run took ${seconds(r.durationMs)}`,
    `parameters: ${int(p.services)} services x ${int(p.instances)} instances = ${int(p.services * p.instances)} copies; ` +
      `raw ${int(p.writes)} writes over ${int(p.services)} services at concurrency ${p.concurrency}, ${p.rawRounds} round(s); ` +
      `${int(p.changes)} changes at ${p.rate}/s${p.quick ? ' (--quick)' : ''}`,
    '',
    table(rows),
    '',
    'diagnostics',
  ];
  if (r.raw) {
    const w = r.raw;
    out.push(
      `  (1) rounds: ${w.rounds.map((x) => int(x)).join(', ')} writes/s; ${w.cpu ? `CPU: this process ${percent(w.cpu.bench)}, everything else ${percent(w.cpu.others ?? 0)}; ` : ''}registry thread busy ${percent(w.registryLoop)}, generator thread busy ${Number.isNaN(w.generatorLoop) ? 'n/a' : percent(w.generatorLoop)}; ` +
        `${int(w.warmup)} warm-up writes first; ${int(w.failed)} failed${w.firstError ? ` (${w.firstError})` : ''}; registry holds ${int(w.stored)}`,
    );
  }
  if (r.cold) {
    const c = r.cold;
    out.push(
      `  (2) task created (POST answered) after ${millis(c.taskCreatedMs)}, first copy after ${c.firstCopyMs === undefined ? 'n/a' : millis(c.firstCopyMs)}, ` +
        `queue empty ${c.queueDrainedMs === undefined ? 'not within 15 s' : `${millis(c.queueDrainedMs)}`} after the last copy`,
      `      CPU: ${cpuLine(c.cpu)}`,
      `      queue: ${queueLine(c.queue)}; per-service lag (queued -> done) ${c.serviceLagMs ? `p50 ${millis(c.serviceLagMs.p50)}, p99 ${millis(c.serviceLagMs.p99)}, max ${millis(c.serviceLagMs.max)}` : 'n/a'}`,
      `      requests to A (seconds after the task's creation): ${requestsLine(c.requestsToA)}`,
      `      requests to B: ${requestsLine(c.requestsToB)}; ${c.writesPerCopy.toFixed(2)} registers per copy`,
      `      copies over time: ${c.timeline.map(([s, n]) => `${s}s:${int(n)}`).join(' ')}`,
    );
    const steady = c.steady;
    if (steady) {
      const perSecond = (counts: RequestCounts) =>
        Object.entries(counts)
          .map(([k, w]) => `${k} ${(w.count / steady.seconds).toFixed(0)}/s`)
          .join(', ') || 'none';
      out.push(
        `      afterwards, ${steady.seconds} s with the task running and nothing changing: CPU ${cpuLine(steady.cpu)}`,
        `      requests to A: ${perSecond(steady.requestsToA)}; to B: ${perSecond(steady.requestsToB)}`,
      );
    }
  }
  if (r.latency) {
    const l = r.latency;
    out.push(
      `  (3) sent ${int(l.sent)} at ${l.sentRate.toFixed(1)}/s; ${l.failed} failed, ${l.lost} never visible in B; A answered the register in p50 ${millis(l.sourceAckMs.p50)}, p99 ${millis(l.sourceAckMs.p99)}`,
      `      split: sent -> stored in A p50 ${millis(l.sourceStoredMs.p50)}, p99 ${millis(l.sourceStoredMs.p99)}; stored in A -> copy in B (regsync's share) p50 ${millis(l.syncMs.p50)}, p90 ${millis(l.syncMs.p90)}, p99 ${millis(l.syncMs.p99)}, max ${millis(l.syncMs.max)}`,
      `      by quarter (instances in the service): ${l.quarters.map((q) => `${q.instances[0]}-${q.instances[1]}: p50 ${millis(q.p50)} p99 ${millis(q.p99)} max ${millis(q.max)}`).join('; ')}`,
      `      slowest: ${l.worst.map((w) => `#${w.index} sent at ${w.sentAtS.toFixed(2)} s: ${millis(w.ms)}`).join(', ')}`,
      `      CPU: ${cpuLine(l.cpu)}`,
      `      queue: ${queueLine(l.queue)}; ${l.reconcilesPerChange.toFixed(2)} reconciles (B lists) per change`,
      `      UDP pushes A -> regsync: ${int(l.pushes.sent)} sent, ${int(l.pushes.acked)} acked, ${int(l.pushes.retried)} resent, ${int(l.pushes.failed)} unacknowledged; last packet ${int(l.finalPushPacketBytes)} bytes (UDP limit 65,507)`,
      `      requests to A: ${requestsLine(l.requestsToA)}`,
      `      requests to B: ${requestsLine(l.requestsToB)}`,
    );
  }
  if (r.regsync) {
    const g = r.regsync;
    out.push(
      `  regsync process: peak RSS ${g.peakRssMiB === undefined ? 'n/a' : `${Math.round(g.peakRssMiB)} MiB`}; log ${g.logFile}`,
      g.logProblems.length === 0
        ? '      log: no warnings or errors'
        : `      log: ${g.logProblems.map((x) => `${x.level} "${x.msg}" x${x.count}`).join('; ')}`,
    );
  }
  for (const e of r.errors) out.push(`  ERROR ${e}`);
  for (const s of r.regsync?.profile ?? []) out.push('', formatProfileSummary(s));
  return out.join('\n');
}
