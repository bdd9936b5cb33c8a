import type { DnsBenchResult } from './dns.js';
import type { ConsulBenchResult } from './consul.js';
import type { EurekaBenchResult } from './eureka.js';
import type { ForeignBenchResult, ForeignSyncResult, RawRoundResult } from './foreign-registry.js';
import type { BenchArgs } from './args.js';
import type { ColdSyncPair, ColdSyncResult } from './cold-sync.js';
import type { CpuShares } from './proc-stats.js';
import type { RedisCommands } from './redis-commands.js';
import type { ZooKeeperColdSyncResult } from './zookeeper-cold-sync.js';
import { formatProfileSummary, type ProfileSummary } from './profile-summary.js';
import type { LatencyResult } from './propagation.js';
import type { RawWriteResult } from './raw-write.js';
import type { QueueStats } from './regsync.js';
import type { RequestCounts } from './request-counter.js';
import type { AtRestResult, AtRestRun, GrpcColdResult, GrpcLatencyResult, SideAtRest } from './grpc.js';
import type { ShardedResult } from './sharded.js';
import type { ScaleResult } from './scale.js';
import { scaleLines, scaleRows } from './scale-report.js';
import { int, millis, percent, seconds, table } from './stats.js';

/** The cold sync should reach this share of the raw write rate. */
export const COLD_SYNC_TARGET = 0.5;
/** p99 propagation latency target, ms (at 200 changes/s). */
export const LATENCY_P99_TARGET_MS = 100;

/** Context for the sharded phase: nacos-sync's documentation quotes this many sync tasks on one 8-core, 16 GB node. */
export const NACOS_SYNC_TASKS = 6_000;

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
  /** The round with the median ratio (see `coldSyncRounds` in run.ts), and every round's figures. */
  cold: (ColdSyncResult & { pairs: ColdSyncPair[]; ratioToRaw: number | undefined; target: number; met: boolean | undefined }) | undefined;
  latency: (LatencyResult & { targetP99Ms: number; met: boolean }) | undefined;
  zk: ZooKeeperColdSyncResult | undefined;
  /** At rest, HTTP (v1) and gRPC clusters in one run. */
  rest: AtRestResult | undefined;
  grpcLatency: GrpcLatencyResult | undefined;
  grpcCold: GrpcColdResult | undefined;
  /** The DNS server: queries/s on one core next to a bare UDP echo, and change-to-answer times. */
  dns: DnsBenchResult | undefined;
  /** Cold sync Nacos -> Consul and Consul -> Nacos next to the test Consul's raw write rate. */
  consul: ConsulBenchResult | undefined;
  /** Cold sync Nacos -> Eureka and Eureka -> Nacos next to the test Eureka's raw register rate. */
  eureka: EurekaBenchResult | undefined;
  /** CPU profiles of the regsync processes of the gRPC phases (with --profile). */
  grpcProfiles?: ProfileSummary[];
  shards: ShardedResult | undefined;
  /** The scale phase (issue 28): 100,000 x 10 over gRPC on three workers, with its targets. */
  scale: ScaleResult | undefined;
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

const core = (x: number | undefined | null) => (typeof x !== 'number' ? 'n/a' : `${Math.round(x * 100)}%`);

/** `regsync`: how the regsync process(es) are named, e.g. `regsync (workers and api)`. */
/** `48,000 commands (24.0 per service sync), 8,000 scripts (4.0 per service sync); evalsha 8,000, xadd ...` (the ten most frequent). */
function redisLine(r: RedisCommands, serviceSyncs: number): string {
  const per = (n: number) => (n / Math.max(1, serviceSyncs)).toFixed(1);
  const top = r.calls.slice(0, 10).map((c) => `${c.command} ${int(c.calls)}`);
  return `${int(r.total)} commands (${per(r.total)} per service sync), of them ${int(r.scripts)} scripts (${per(r.scripts)} per service sync) and the commands scripts ran; ${top.join(', ')}${r.calls.length > 10 ? ', ...' : ''}`;
}

function cpuLine(cpu: CpuShares, regsync = 'regsync'): string {
  return (
    `${regsync} ${core(cpu.regsync)}, redis-server ${core(cpu.redis)}, bench process ${core(cpu.bench)} of one core ` +
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

/** Requests per second over `seconds`, by kind. */
function perSecond(counts: RequestCounts, seconds: number): string {
  return (
    Object.entries(counts)
      .map(([k, w]) => `${k} ${(w.count / seconds).toFixed(w.count / seconds < 10 ? 1 : 0)}/s`)
      .join(', ') || 'none'
  );
}

const kib = (bytesPerS: number) => (bytesPerS >= 10 * 1024 ? `${int(bytesPerS / 1024)} KiB` : `${(bytesPerS / 1024).toFixed(1)} KiB`);

const AT_REST_CPU_TARGET_FALLBACK = 0.1;
/** The size the at-rest CPU target is set for (20,000 services x 10 copies). */
const AT_REST_TARGET_COPIES = 200_000;

/** Requests at rest that are neither a service-list poll (Nacos pushes nothing about services) nor a full sync's read of the destination. */
export function pollsAndBeats(run: AtRestRun): number {
  const beats = (x: SideAtRest) => Object.entries(x.http).reduce((n, [k, c]) => (/beat|\(subscribe\)|\/v3\//.test(k) ? n + c : n), 0);
  // The source is read from the subscription's pushes: any instance read of A is a poll.
  const sourceReads = Object.entries(run.source.http).reduce((n, [k, c]) => (/instance\/list/.test(k) ? n + c : n), 0) + (run.source.grpc.ServiceQueryRequest ?? 0);
  return beats(run.source) + beats(run.destination) + sourceReads;
}

/** Destination reads per service sync and full-sync interval (about 1: each full sync reads B once). */
export function destinationReadsPerFullSync(run: AtRestRun): number {
  const reads = Object.entries(run.destination.http).reduce((n, [k, c]) => (/instance\/list/.test(k) ? n + c : n), 0) + (run.destination.grpc.ServiceQueryRequest ?? 0);
  return reads / Math.max(1, (run.services * run.idleS * 1000) / run.fullSyncIntervalMs);
}

function restVerdict(run: AtRestRun, cpuTarget: number): string {
  const quiet = pollsAndBeats(run) === 0;
  if (run.idleS * 1000 <= run.fullSyncIntervalMs) return `${quiet ? 'MET' : 'MISSED'} (polls/beats); no full sync in the window`;
  if (run.copies < AT_REST_TARGET_COPIES) return `${quiet ? 'MET' : 'MISSED'} (polls/beats); CPU n/a below 20,000 x 10`;
  return verdict(quiet && (run.cpu.regsync ?? 1) < cpuTarget);
}

const mib = (x: number | undefined) => (x === undefined ? 'n/a' : `${Math.round(x)} MiB`);

function shardedLines(s: ShardedResult): string[] {
  const workers = s.processes.filter((p) => p.name !== 'api');
  const apiProc = s.processes.find((p) => p.name === 'api');
  const names = [...workers.map((w) => w.name), 'api'];
  const each = s.cpu.regsyncEach?.map((x, i) => `${names[i] ?? `#${i}`} ${core(x)}`).join(', ') ?? '';
  const out = [
    `  (5) ${int(s.services)} services x 1 instance, ${s.workers} workers, ${s.shards} shards x ${s.replicas} replicas, lease TTL ${seconds(s.leaseTtlMs)}; ` +
      `task created (POST answered) after ${millis(s.taskCreatedMs)}, first copy after ${s.firstCopyMs === undefined ? 'n/a' : millis(s.firstCopyMs)}, ` +
      `${int(s.copiesPerSecond)} copies/s, queues empty ${s.queueDrainedMs === undefined ? 'not within 15 s' : millis(s.queueDrainedMs)} after the last copy`,
    `      CPU while converging: ${each}; ${cpuLine(s.cpu, 'regsync (all four)')}`,
    `      memory (RSS, workers): ${mib(s.memory.idleMiB)} before the task, ${mib(s.memory.convergedMiB)} once converged = ${s.memory.kibPerServiceSync.toFixed(1)} KiB per service sync; ` +
      workers.map((w) => `${w.name} ${mib(w.idleRssMiB)} -> ${mib(w.convergedRssMiB)} (peak ${mib(w.peakRssMiB)})`).join(', ') +
      (apiProc ? `; api ${mib(apiProc.idleRssMiB)} -> ${mib(apiProc.convergedRssMiB)}` : ''),
    `      service syncs per shard: ${s.serviceSyncsPerShard.map((n) => int(n)).join(', ')}; leaders: ${workers.map((w) => `${w.name} ${w.leads.length === 0 ? '-' : w.leads.join(',')}`).join('; ')}; queue: ${queueLine(s.queue)}`,
    `      requests to A while converging: ${requestsLine(s.requestsToA)}`,
    `      requests to B: ${requestsLine(s.requestsToB)}`,
    `      copies over time: ${s.timeline.map(([t, n]) => `${t}s:${int(n)}`).join(' ')}`,
  ];
  if (s.rest) {
    out.push(
      `      afterwards, ${s.rest.seconds} s with the task running and nothing changing: ${s.rest.cpu.regsyncEach?.map((x, i) => `${names[i] ?? `#${i}`} ${core(x)}`).join(', ') ?? ''}; ${cpuLine(s.rest.cpu, 'regsync (all four)')}`,
      `      requests to A at rest: ${perSecond(s.rest.requestsToA, s.rest.seconds)}; to B: ${perSecond(s.rest.requestsToB, s.rest.seconds)}; ` +
        `queued jobs over time: ${s.rest.queue.timeline.map(([t, n]) => `${t}s:${int(n)}`).join(' ')}`,
    );
  }
  const f = s.failover;
  if (f) {
    out.push(
      `      failover: kill -9 of ${f.victim} (leader of shards ${f.victimLeads.join(',') || 'none'}); every shard led by a live worker after ${f.elapsedMs === undefined ? 'NOT within the deadline' : seconds(f.elapsedMs)} (lease TTL ${seconds(s.leaseTtlMs)}); ` +
        `takeovers: ${f.takeovers.map((t) => `${t.shard}->${t.leader} at ${seconds(t.ms)}`).join(', ') || 'none'}; ` +
        `GET /api/v1/shards polled ${int(f.polls)} times, answered in p50 ${millis(f.pollMs.p50)}, max ${millis(f.pollMs.max)}`,
      `      ${f.changes} new instances in A (services of ${f.victim}'s shards) right after the failover: ${f.changesLanded} in B, ` +
        `${f.changeLandedMs ? `after p50 ${millis(f.changeLandedMs.p50)}, max ${millis(f.changeLandedMs.max)}` : 'none landed'}; ` +
        `${f.victim} left GET /api/v1/workers ${f.victimUnlistedMs === undefined ? 'not while we looked' : `${seconds(f.victimUnlistedMs)} after the kill`}; ` +
        `B holds ${int(s.copiesAtEnd)} copies at the end (expected ${int(s.expected + f.changes)})`,
    );
    if (f.cpu) out.push(`      CPU from the kill until then: ${f.cpu.regsyncEach?.map((x, i) => `${names[i] ?? `#${i}`} ${core(x)}`).join(', ') ?? ''}; ${cpuLine(f.cpu, 'regsync (the survivors and api)')}`);
  }
  for (const p of s.processes) {
    out.push(
      `      ${p.name}${p.killed ? ' (killed)' : ''}: ${p.logProblems.length === 0 ? 'no warnings or errors' : p.logProblems.map((x) => `${x.level} "${x.msg}" x${x.count}`).join('; ')}; log ${p.logFile}`,
    );
  }
  return out;
}

/** A foreign-registry phase (Consul, Eureka) as the report shows it. */
interface ForeignView {
  /** Row letter (`K`: Consul). */
  letter: string;
  /** `Consul`. */
  label: string;
  /** What a raw write is (`catalog registrations`). */
  writes: string;
  raw: RawRoundResult[];
  services: number;
  instances: number;
  /** Each direction with its row label and the requests the registry received. */
  syncs: Array<{ label: string; x: Omit<ForeignSyncResult, 'requestsToRegistry'>; requests: Record<string, number> }>;
  regsync: ForeignBenchResult['regsync'];
}

function consulView(c: ConsulBenchResult): ForeignView {
  const syncs: ForeignView['syncs'] = [];
  if (c.toConsul) syncs.push({ label: 'cold sync Nacos -> Consul', x: c.toConsul, requests: c.toConsul.requestsToConsul });
  if (c.toNacos) syncs.push({ label: 'cold sync Consul -> Nacos', x: c.toNacos, requests: c.toNacos.requestsToConsul });
  return { letter: 'K', label: 'Consul', writes: 'catalog registrations', raw: c.raw, services: c.services, instances: c.instances, syncs, regsync: c.regsync };
}

function eurekaView(c: ForeignBenchResult, pollIntervalMs: number): ForeignView {
  const syncs: ForeignView['syncs'] = [];
  if (c.toRegistry) syncs.push({ label: 'cold sync Nacos -> Eureka', x: c.toRegistry, requests: c.toRegistry.requestsToRegistry });
  if (c.toNacos) syncs.push({ label: `cold sync Eureka -> Nacos (delta poll ${pollIntervalMs / 1000} s)`, x: c.toNacos, requests: c.toNacos.requestsToRegistry });
  return { letter: 'E', label: 'Eureka', writes: 'registrations (POST /apps/{APP})', raw: c.raw, services: c.services, instances: c.instances, syncs, regsync: c.regsync };
}

/** A foreign-registry phase's rows: the raw rate, then each direction with its share of the raw round just before it. */
function foreignRows(c: ForeignView): string[][] {
  const rows: string[][] = [];
  const rates = c.raw.map((x) => x.writesPerSecond);
  const failed = c.raw.some((x) => x.failed > 0 || x.timedOut);
  if (c.raw.length > 0) {
    rows.push([
      c.letter,
      `raw test ${c.label} write rate`,
      `${rates.map((x) => int(x)).join(', ')} registrations/s (${int(c.raw[0]?.writes ?? 0)} ${c.writes} at concurrency ${c.raw[0]?.concurrency ?? 0}; a round before each direction)`,
      'the ceiling',
      (failed ? 'INCOMPLETE' : '') + disturbed(...c.raw.map((x) => x.cpu)).trim(),
    ]);
  }
  for (const { label, x } of c.syncs) {
    rows.push([
      c.letter,
      label,
      `${int(c.services)} x ${c.instances} in ${seconds(x.elapsedMs)}, ${int(x.copiesPerSecond)} copies/s` +
        (x.ratioToRaw === undefined ? '' : ` = ${(x.ratioToRaw * 100).toFixed(1)}% of ${int(x.rawWritesPerSecond as number)} raw ${c.label} registrations/s just before`) +
        (x.ratioToNacosRaw === undefined ? '' : `; ${(x.ratioToNacosRaw * 100).toFixed(1)}% of ${int(x.nacosRawWritesPerSecond as number)} raw Nacos writes/s`) +
        (x.timedOut ? ` (TIMED OUT at ${int(x.reached)}/${int(x.expected)})` : ''),
      'figure (vs the raw rate)',
      disturbed(x.cpu).trim(),
    ]);
  }
  return rows;
}

function foreignLines(c: ForeignView): string[] {
  const out = c.raw.map(
    (w, i) =>
      `  (${c.letter} raw ${i + 1}) ${int(w.ok)} in ${seconds(w.elapsedMs)} after ${int(w.warmup)} warm-up registrations; server thread busy ${percent(w.serverLoop)}, generator thread busy ${Number.isNaN(w.generatorLoop) ? 'n/a' : percent(w.generatorLoop)}; ` +
      `${w.cpu ? `CPU: this process ${percent(w.cpu.bench)}, everything else ${percent(w.cpu.others ?? 0)}; ` : ''}${int(w.failed)} failed${w.firstError ? ` (${w.firstError})` : ''}; the server holds ${int(w.stored)}`,
  );
  const counts = (x: Record<string, number>) =>
    Object.entries(x)
      .sort((a, b) => b[1] - a[1])
      .map(([k, n]) => `${k} x${int(n)}`)
      .join(', ') || 'none';
  for (const { x, requests } of c.syncs) {
    out.push(
      `  (${c.letter} ${x.direction}) ${x.warmup ? `after a warm-up sync of ${int(x.warmup.services)} services (${seconds(x.warmup.elapsedMs)}): ` : ''}task created (POST answered) after ${millis(x.taskCreatedMs)}, first copy after ${x.firstCopyMs === undefined ? 'n/a' : millis(x.firstCopyMs)}; ${x.writesPerCopy.toFixed(2)} writes per copy`,
      `      CPU: ${cpuLine(x.cpu)}`,
      `      requests to ${c.label}: ${counts(requests)}`,
      `      requests to Nacos: ${requestsLine(x.requestsToNacos)}`,
      `      copies over time: ${x.timeline.map(([t, n]) => `${t}s:${int(n)}`).join(' ')}`,
    );
  }
  if (c.regsync) {
    out.push(
      `  (${c.letter}) regsync: ${c.regsync.logProblems.length === 0 ? 'no warnings or errors' : c.regsync.logProblems.map((x) => `${x.level} "${x.msg}" x${x.count}`).join('; ')}; log ${c.regsync.logFile}`,
    );
  }
  return out;
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
    const ratio =
      c.ratioToRaw === undefined
        ? ''
        : ` = ${(c.ratioToRaw * 100).toFixed(1)}% of the raw rate measured just before it${c.pairs.length > 1 ? ` (median of ${c.pairs.length} rounds)` : ''}`;
    rows.push([
      '2',
      'cold full sync',
      `${seconds(c.elapsedMs)}, ${int(c.copiesPerSecond)} copies/s${ratio}${c.timedOut ? ` (TIMED OUT at ${int(c.reached)}/${int(c.expected)})` : ''}`,
      `>= ${percent(c.target)} of the raw rate`,
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
  for (const run of r.rest?.runs ?? []) {
    const per = (x: SideAtRest) => `${x.per1000.requestsPerS.toFixed(1)} req/s, ${kib(x.per1000.bytesReceivedPerS)}/s in`;
    rows.push([
      'R',
      `at rest over ${run.protocol === 'grpc' ? 'gRPC' : 'HTTP (v1)'}`,
      `${int(run.services)} x ${run.instances} ephemeral: regsync ${core(run.cpu.regsync)} of a core; per 1,000 copies: source ${per(run.source)}, destination ${per(run.destination)}`,
      run.protocol === 'grpc' ? `no polls, no beats; < ${percent(r.rest?.cpuTarget ?? 0.1)} of a core for 20,000 x 10` : 'reference',
      (run.protocol === 'grpc' ? restVerdict(run, r.rest?.cpuTarget ?? AT_REST_CPU_TARGET_FALLBACK) : '') + disturbed(run.cpu),
    ]);
  }
  for (const run of r.grpcLatency?.runs ?? []) {
    const l = run.regsyncMs;
    rows.push([
      'L',
      `propagation over gRPC (merge ${run.mergeWindowMs} ms)`,
      `p50 ${millis(l.p50)}, p90 ${millis(l.p90)}, p99 ${millis(l.p99)}, max ${millis(l.max)}; registry's push p99 ${millis(run.pushMs.p99)} = ${run.ratioP99.toFixed(2)}x${run.lost > 0 ? `, ${run.lost} lost` : ''}`,
      `p99 <= ${r.grpcLatency?.targetRatio ?? 2}x push p99`,
      verdict(run.lost === 0 && run.ratioP99 <= (r.grpcLatency?.targetRatio ?? 2)) + disturbed(run.cpu),
    ]);
  }
  if (r.grpcCold) {
    const c = r.grpcCold.median;
    rows.push([
      'C',
      'cold full sync over gRPC',
      `${int(r.grpcCold.services * r.grpcCold.instances)} copies in ${c.elapsedMs === undefined ? 'TIMED OUT' : seconds(c.elapsedMs)}, ${c.copiesPerSecond === undefined ? 'n/a' : int(c.copiesPerSecond)} copies/s` +
        (c.ratio === undefined ? '' : ` = ${percent(c.ratio)} of ${int(c.rawCopiesPerSecond as number)} batch-published/s`),
      'figure (vs raw batch publish)',
      disturbed(r.grpcCold.cpu).trim(),
    ]);
  }
  if (r.dns) {
    const d = r.dns;
    rows.push([
      'D',
      'DNS server, one core',
      `${int(d.dns.queriesPerSecond)} queries/s, p50 ${millis(d.dns.latencyMs.p50)}, p99 ${millis(d.dns.latencyMs.p99)} with ${int(d.names)} services indexed; ` +
        `bare UDP echo ${int(d.echo.queriesPerSecond)}/s, p99 ${millis(d.echo.latencyMs.p99)} (${percent(d.dns.queriesPerSecond / Math.max(1, d.echo.queriesPerSecond))} of it)`,
      'figure (vs the loopback ceiling)',
      '',
    ]);
    rows.push([
      'D',
      'DNS: registry change to answer',
      `p50 ${millis(d.changeMs.p50)}, p99 ${millis(d.changeMs.p99)}, max ${millis(d.changeMs.max)} over ${d.changeMs.count} changes (Nacos gRPC push, 500 ms merge window); ` +
        `with a 20 ms window p50 ${millis(d.changeMsShortWindow.p50)}, p99 ${millis(d.changeMsShortWindow.p99)}`,
      'within 1 s',
      verdict(d.changeMs.count > 0 && d.changeMs.max <= 1_000),
    ]);
  }
  if (r.consul) rows.push(...foreignRows(consulView(r.consul)));
  if (r.eureka) rows.push(...foreignRows(eurekaView(r.eureka, r.eureka.pollIntervalMs)));
  if (r.shards) {
    const s = r.shards;
    const f = s.failover;
    rows.push([
      '5',
      `sharded sync, ${s.workers} workers`,
      `${int(s.services)} service syncs: ${s.timedOut ? `TIMED OUT at ${int(s.reached)}/${int(s.expected)}` : `converged in ${seconds(s.convergedMs)}`}; ` +
        `${s.memory.kibPerServiceSync.toFixed(1)} KiB per service sync; ` +
        `failover ${f === undefined ? 'n/a' : f.elapsedMs === undefined ? 'NOT DONE' : seconds(f.elapsedMs)}`,
      `figure only (nacos-sync: ${int(NACOS_SYNC_TASKS)} tasks on 8 cores)`,
      disturbed(s.cpu, s.rest?.cpu, f?.cpu).trim(),
    ]);
  }
  if (r.scale) rows.push(...scaleRows(r.scale));

  const out: string[] = [
    `regsync bench: node ${r.machine.node}, ${r.machine.platform}, ${r.machine.cpus} CPUs (${r.machine.cpuModel}), ${r.machine.memoryGiB.toFixed(1)} GiB; run took ${seconds(r.durationMs)}`,
    `parameters: ${int(p.services)} services x ${int(p.instances)} instances = ${int(p.services * p.instances)} copies; ` +
      `raw ${int(p.writes)} writes over ${int(p.services)} services at concurrency ${p.concurrency}, ${p.rawRounds} round(s); ` +
      `${int(p.changes)} changes at ${p.rate}/s; ${int(p.shardServices)} service syncs in the sharded phase` +
      `${p.only.includes('scale') ? `; scale ${int(p.scaleServices)} x ${p.scaleInstances}` : ''}${p.quick ? ' (--quick)' : ''}`,
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
    if (c.pairs.length > 1 || c.pairs[0]?.rawWritesPerSecond !== undefined) {
      out.push(
        `  (2) rounds (raw writes/s just before -> cold copies/s = ratio): ${c.pairs
          .map((p) => `${p.rawWritesPerSecond === undefined ? 'n/a' : int(p.rawWritesPerSecond)} -> ${int(p.copiesPerSecond)}${p.timedOut ? ' TIMED OUT' : ''}${p.ratio === undefined ? '' : ` = ${(p.ratio * 100).toFixed(1)}%`}`)
          .join('; ')}; the figures below are the median round's`,
      );
    }
    out.push(
      `  (2) ${c.warmup ? `after a warm-up sync of ${int(c.warmup.services)} services (${seconds(c.warmup.elapsedMs)}): ` : ''}task created (POST answered) after ${millis(c.taskCreatedMs)}, first copy after ${c.firstCopyMs === undefined ? 'n/a' : millis(c.firstCopyMs)}, ` +
        `queue empty ${c.queueDrainedMs === undefined ? 'not within 15 s' : `${millis(c.queueDrainedMs)}`} after the last copy`,
      `      CPU: ${cpuLine(c.cpu)}`,
      ...(c.redisCommands ? [`      redis: ${redisLine(c.redisCommands, c.services)}`] : []),
      `      queue: ${queueLine(c.queue)}; per-service lag (queued -> done) ${c.serviceLagMs ? `p50 ${millis(c.serviceLagMs.p50)}, p99 ${millis(c.serviceLagMs.p99)}, max ${millis(c.serviceLagMs.max)}` : 'n/a'}`,
      `      requests to A (seconds after the task's creation): ${requestsLine(c.requestsToA)}`,
      `      requests to B: ${requestsLine(c.requestsToB)}; ${c.writesPerCopy.toFixed(2)} registers per copy`,
      `      copies over time: ${c.timeline.map(([s, n]) => `${s}s:${int(n)}`).join(' ')}`,
    );
    const steady = c.steady;
    if (steady) {
      out.push(
        `      afterwards, ${steady.seconds} s with the task running and nothing changing: CPU ${cpuLine(steady.cpu)}`,
        `      requests to A: ${perSecond(steady.requestsToA, steady.seconds)}; to B: ${perSecond(steady.requestsToB, steady.seconds)}`,
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
  for (const run of r.rest?.runs ?? []) {
    const counts = (x: SideAtRest) =>
      [...Object.entries(x.http).map(([k, n]) => `${k} ${(n / run.idleS).toFixed(1)}/s`), ...Object.entries(x.grpc).map(([k, n]) => `gRPC ${k} ${(n / run.idleS).toFixed(1)}/s`)].join(', ') || 'none';
    const bytes = (x: SideAtRest) =>
      `${kib(x.bytesReceivedPerS)}/s received, ${kib(x.bytesSentPerS)}/s sent (HTTP port ${kib(x.bytesByPort.http.received / run.idleS)}/s in, ${kib(x.bytesByPort.http.sent / run.idleS)}/s out; gRPC port ${kib(x.bytesByPort.grpc.received / run.idleS)}/s in, ${kib(x.bytesByPort.grpc.sent / run.idleS)}/s out)`;
    out.push(
      `  (R ${run.protocol}) ${int(run.copies)} copies synced in ${run.syncMs === undefined ? 'n/a' : seconds(run.syncMs)}; then ${run.idleS} s at rest, task fullSyncIntervalMs ${int(run.fullSyncIntervalMs)} (${run.idleS * 1000 > run.fullSyncIntervalMs ? 'at least one full sync of every service sync in the window' : 'NO full sync in the window: the cost without full syncs'})`,
      `      ${int(pollsAndBeats(run))} watch polls, source reads and beats; destination reads per service sync and full-sync interval ${destinationReadsPerFullSync(run).toFixed(2)}`,
      `      source A: ${run.source.requestsPerS.toFixed(1)} req/s (${counts(run.source)}); ${bytes(run.source)}; UDP pushes ${int(run.udpPushes)}, gRPC pushes ${int(run.grpcPushes)}`,
      `      destination B: ${run.destination.requestsPerS.toFixed(1)} req/s (${counts(run.destination)}); ${bytes(run.destination)}`,
      `      CPU: ${cpuLine(run.cpu)}`,
    );
  }
  for (const run of r.grpcLatency?.runs ?? []) {
    const p = run.pushMs;
    out.push(
      `  (L ${run.mergeWindowMs} ms) ${int(run.sent)} changes at ${run.rate}/s; plain subscriber's push: p50 ${millis(p.p50)}, p90 ${millis(p.p90)}, p99 ${millis(p.p99)}, max ${millis(p.max)} (${int(run.pushes)} pushes, ${run.lostPushes} changes never pushed); ${run.lost} copies never in B`,
      `      CPU: ${cpuLine(run.cpu)}`,
    );
  }
  if (r.grpcCold) {
    out.push(
      `  (C) rounds (raw batch-published/s -> cold copies/s = ratio): ${r.grpcCold.rounds
        .map((x) => `${x.rawCopiesPerSecond === undefined ? 'n/a' : int(x.rawCopiesPerSecond)} -> ${x.copiesPerSecond === undefined ? 'TIMED OUT' : int(x.copiesPerSecond)}${x.ratio === undefined ? '' : ` = ${(x.ratio * 100).toFixed(1)}%`}`)
        .join('; ')}; raw generator thread busy ${r.grpcCold.rounds.map((x) => (x.rawGeneratorLoop === undefined ? 'n/a' : percent(x.rawGeneratorLoop))).join(', ')}`,
      ...(r.grpcCold.cpu ? [`      CPU (middle round): ${cpuLine(r.grpcCold.cpu)}`] : []),
    );
  }
  if (r.regsync) {
    const g = r.regsync;
    out.push(
      `  regsync process (up, phases 2-4): peak RSS ${g.peakRssMiB === undefined ? 'n/a' : `${Math.round(g.peakRssMiB)} MiB`}; log ${g.logFile}`,
      g.logProblems.length === 0
        ? '      log: no warnings or errors'
        : `      log: ${g.logProblems.map((x) => `${x.level} "${x.msg}" x${x.count}`).join('; ')}`,
    );
  }
  if (r.consul) out.push(...foreignLines(consulView(r.consul)));
  if (r.eureka) out.push(...foreignLines(eurekaView(r.eureka, r.eureka.pollIntervalMs)));
  if (r.shards) out.push(...shardedLines(r.shards));
  if (r.scale) out.push(...scaleLines(r.scale));
  for (const e of r.errors) out.push(`  ERROR ${e}`);
  for (const s of [...(r.regsync?.profile ?? []), ...(r.grpcProfiles ?? []), ...(r.consul?.regsync?.profile ?? []), ...(r.eureka?.regsync?.profile ?? []), ...(r.scale?.profiles ?? [])]) out.push('', formatProfileSummary(s));
  return out.join('\n');
}
