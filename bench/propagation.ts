import { writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { gzipSync } from 'node:zlib';
import { Pool } from 'undici';
import type { PushStats, RunningRegistry } from '../src/registry/index.js';
import type { ServiceChange } from '../src/registry/naming-store.js';
import { GROUP, NAMESPACE, ipOf, registerForm, storeKey } from './instances.js';
import type { CpuMeter, CpuShares } from './proc-stats.js';
import { countOf, type RequestCounter, type RequestCounts } from './request-counter.js';
import { callApi, type QueueSampler, type QueueStats } from './regsync.js';
import { percentiles, type Percentiles } from './stats.js';

export const LATENCY_SERVICE = 'lat';
const GROUPED = `${GROUP}@@${LATENCY_SERVICE}`;
const WARMUP_CHANGES = 20;
/** A change not visible in B this long after the last one was sent counts as lost. */
const DRAIN_MS = 10_000;

/** Latency of one slice of the run (the service grows by one instance per change). */
export interface SliceLatency {
  /** Instances in A's `lat` service during the slice, first..last. */
  instances: [number, number];
  p50: number;
  p99: number;
  max: number;
}

/** Result of measurement 3. */
export interface LatencyResult {
  changes: number;
  rate: number;
  /** Changes sent (fewer than `changes` only when the phase deadline cut the run short). */
  sent: number;
  /** Changes per second actually sent (the generator keeps to the schedule unless this process is overloaded). */
  sentRate: number;
  /** Registered in A (sent) -> visible in B, ms. */
  latencyMs: Percentiles;
  /** Registered in A (sent) -> A answered `ok`, ms. */
  sourceAckMs: Percentiles;
  /** Sent -> A's store holds the instance, ms: the source registry's share of the latency. */
  sourceStoredMs: Percentiles;
  /** A's store holds it -> B's store holds the copy, ms: regsync's share (push, queue, reconcile, write to B). */
  syncMs: Percentiles;
  /** The slowest changes: when they were sent (s after the first) and their latency split. */
  worst: Array<{ index: number; sentAtS: number; ms: number; syncMs: number | undefined }>;
  /** Quarters of the run in order: how latency grows with the service. */
  quarters: SliceLatency[];
  /** Changes sent but never visible in B within the drain deadline. */
  lost: number;
  /** Registers A refused or failed. */
  failed: number;
  requestsToA: RequestCounts;
  requestsToB: RequestCounts;
  /** Lists of the service B received per change: about one per reconcile. */
  reconcilesPerChange: number;
  /** UDP pushes A sent to regsync during the run. */
  pushes: PushStats;
  /** Size of A's push packet of the service at the end (gzipped above 1 KiB, as A sends it); UDP carries at most 65,507 bytes. */
  finalPushPacketBytes: number;
  cpu: CpuShares;
  queue: QueueStats;
}

export interface LatencyDeps {
  a: RunningRegistry;
  b: RunningRegistry;
  api: string;
  requestsA: RequestCounter;
  requestsB: RequestCounter;
  cpu: CpuMeter;
  queue: QueueSampler;
  progress: (line: string) => void;
}

interface Pending {
  index: number;
  sentAt: number;
}

/** Notes when each awaited instance first shows in a registry's store (`lat` service). */
class VisibilityWatch {
  readonly pending = new Map<string, Pending>();
  /** performance.now() when the instance of change `index` showed up. */
  readonly visibleAt = new Map<number, number>();
  private readonly onChange = (change: ServiceChange): void => {
    if (change.namespaceId !== NAMESPACE || change.groupedName !== GROUPED || this.pending.size === 0) return;
    const now = performance.now();
    const instances = this.registry.store.getService(NAMESPACE, GROUP, LATENCY_SERVICE)?.instances;
    if (!instances) return;
    for (const [key, p] of this.pending) {
      if (!instances.has(key)) continue;
      this.visibleAt.set(p.index, now);
      this.pending.delete(key);
    }
  };

  constructor(private readonly registry: RunningRegistry) {
    registry.store.on('change', this.onChange);
  }

  reset(): void {
    this.pending.clear();
    this.visibleAt.clear();
  }

  close(): void {
    this.registry.store.off('change', this.onChange);
  }
}

function pushDelta(after: PushStats, before: PushStats): PushStats {
  return { sent: after.sent - before.sent, acked: after.acked - before.acked, retried: after.retried - before.retried, failed: after.failed - before.failed };
}

/**
 * Writes every timing of the run for offline analysis: per change when it was sent, stored in A and
 * visible in B, and when each request reached A and B, all in ms after A's request window opened.
 */
function writeTrace(file: string, sentAt: Map<number, number>, storedAt: Map<number, number>, visibleAt: Map<number, number>, deps: LatencyDeps): void {
  const a = deps.requestsA.arrivals();
  const b = deps.requestsB.arrivals();
  const rel = (t: number | undefined) => (t === undefined ? null : Math.round((t - a.openedAt) * 100) / 100);
  const shift = (byKind: Record<string, number[]>, by: number) =>
    Object.fromEntries(Object.entries(byKind).map(([k, times]) => [k, times.map((t) => Math.round((t + by) * 100) / 100)]));
  const changes = [...sentAt].sort(([x], [y]) => x - y).map(([index, sent]) => ({ index, sent: rel(sent), storedInA: rel(storedAt.get(index)), visibleInB: rel(visibleAt.get(index)) }));
  writeFileSync(file, JSON.stringify({ changes, requestsToA: a.byKind, requestsToB: shift(b.byKind, b.openedAt - a.openedAt) }));
}

/** Size of the `dom` packet A would push for the service now. */
async function pushPacketBytes(a: RunningRegistry): Promise<number> {
  const res = await fetch(`${a.url}/nacos/v1/ns/instance/list?serviceName=${encodeURIComponent(GROUPED)}&healthyOnly=false`);
  const json = Buffer.from(JSON.stringify({ type: 'dom', data: await res.text(), lastRefTime: Date.now() * 1000 }));
  return json.length > 1024 ? gzipSync(json).length : json.length;
}

/**
 * Measurement 3: one task A->B for service `lat`; `changes` registers of new persistent instances
 * into A over HTTP at `rate` per second, each timed until its copy is in B's store.
 */
export async function measurePropagation(
  deps: LatencyDeps,
  opts: { changes: number; rate: number; traceFile?: string | undefined },
  deadlineMs: number,
): Promise<LatencyResult> {
  const { a, b, api } = deps;
  const phaseDeadline = performance.now() + deadlineMs;
  const pool = new Pool(a.url, { connections: 8, pipelining: 1 });
  const inA = new VisibilityWatch(a);
  const watch = new VisibilityWatch(b);
  const sentAt = new Map<number, number>();
  const acks = new Map<number, number>();
  let failed = 0;

  /** Registers instance `n` in A, timing change `index`; records how long A took to answer. */
  const register = async (n: number, index: number): Promise<void> => {
    const ip = ipOf(n);
    const body = registerForm(LATENCY_SERVICE, ip, { app: LATENCY_SERVICE, seq: String(index) });
    const sent = performance.now();
    sentAt.set(index, sent);
    inA.pending.set(storeKey(ip), { index, sentAt: sent });
    watch.pending.set(storeKey(ip), { index, sentAt: sent });
    try {
      const res = await pool.request({ method: 'POST', path: '/nacos/v1/ns/instance', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body });
      const text = await res.body.text();
      if (res.statusCode !== 200 || text !== 'ok') throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
      acks.set(index, performance.now() - sent);
    } catch {
      failed += 1;
      inA.pending.delete(storeKey(ip));
      watch.pending.delete(storeKey(ip));
    }
  };

  /** Sends `count` changes on schedule, `rate` per second; resolves when all are sent and answered. */
  const run = async (first: number, count: number, indexBase: number): Promise<{ sent: number; rate: number }> => {
    const interval = 1000 / opts.rate;
    const start = performance.now();
    const inflight: Array<Promise<void>> = [];
    for (let i = 0; i < count; i += 1) {
      const wait = start + i * interval - performance.now();
      if (wait >= 1) await delay(wait);
      if (performance.now() > phaseDeadline) break;
      inflight.push(register(first + i, indexBase + i));
    }
    const sendSeconds = (performance.now() - start) / 1000;
    await Promise.all(inflight);
    return { sent: inflight.length, rate: inflight.length / Math.max(sendSeconds, 1e-3) };
  };

  const waitVisible = async (until: number): Promise<void> => {
    while (watch.pending.size > 0 && performance.now() < until) await delay(5);
  };

  try {
    await callApi(api, 'POST', '/api/v1/tasks', { id: 'lat', source: 'a', destination: 'b', service: LATENCY_SERVICE }, 201);
    // Warm-up: the first copy shows the task runs; A's subscriber list shows regsync listens to pushes.
    await run(opts.changes + 1, 1, -1);
    await waitVisible(performance.now() + 20_000);
    const subscribed = performance.now() + 20_000;
    while (a.pusher.subscribersOf(NAMESPACE, GROUPED).length === 0 && performance.now() < subscribed) await delay(20);
    if (watch.pending.size > 0 || a.pusher.subscribersOf(NAMESPACE, GROUPED).length === 0) {
      throw new Error('the latency task did not start: no copy in B, or regsync did not subscribe to A within 20 s');
    }
    await run(opts.changes + 2, WARMUP_CHANGES, -1 - WARMUP_CHANGES);
    await waitVisible(performance.now() + DRAIN_MS);
    inA.reset();
    watch.reset();
    sentAt.clear();
    acks.clear();
    failed = 0;

    deps.requestsA.open();
    deps.requestsB.open();
    const pushesBefore = a.pusher.stats();
    await deps.cpu.start();
    deps.queue.start(100);
    deps.progress(`latency: ${opts.changes} changes at ${opts.rate}/s`);
    const sent = await run(0, opts.changes, 0);
    await waitVisible(Math.min(phaseDeadline, performance.now() + DRAIN_MS));
    const cpu = await deps.cpu.stop();
    const queue = await deps.queue.finish();
    const requestsToA = deps.requestsA.window();
    const requestsToB = deps.requestsB.window();
    const pushes = pushDelta(a.pusher.stats(), pushesBefore);

    // Change index -> ms from sent to visible in B, and how that splits at the moment A stored it.
    const latencies: Array<[number, number]> = [];
    const sourceSide: number[] = [];
    const syncSide: number[] = [];
    for (const [index, visible] of [...watch.visibleAt].sort(([x], [y]) => x - y)) {
      const sent = sentAt.get(index) as number;
      latencies.push([index, visible - sent]);
      const stored = inA.visibleAt.get(index);
      if (stored !== undefined) {
        sourceSide.push(stored - sent);
        syncSide.push(visible - stored);
      }
    }
    const base = 1 + WARMUP_CHANGES; // instances in `lat` before the measured changes
    if (opts.traceFile) writeTrace(opts.traceFile, sentAt, inA.visibleAt, watch.visibleAt, deps);
    const firstSent = sentAt.get(0) ?? 0;
    const worst = [...latencies]
      .sort((x, y) => y[1] - x[1])
      .slice(0, 5)
      .map(([index, ms]) => {
        const stored = inA.visibleAt.get(index);
        const visible = watch.visibleAt.get(index);
        return {
          index,
          sentAtS: ((sentAt.get(index) ?? 0) - firstSent) / 1000,
          ms,
          syncMs: stored !== undefined && visible !== undefined ? visible - stored : undefined,
        };
      });
    const quarters: SliceLatency[] = [];
    for (let q = 0; q < 4; q += 1) {
      const from = Math.floor((q * opts.changes) / 4);
      const to = Math.floor(((q + 1) * opts.changes) / 4);
      const slice = latencies.filter(([i]) => i >= from && i < to).map(([, ms]) => ms);
      if (slice.length === 0) continue;
      const p = percentiles(slice);
      quarters.push({ instances: [base + from + 1, base + to], p50: p.p50, p99: p.p99, max: p.max });
    }
    return {
      changes: opts.changes,
      rate: opts.rate,
      sent: sent.sent,
      sentRate: sent.rate,
      latencyMs: percentiles(latencies.map(([, ms]) => ms)),
      sourceAckMs: percentiles([...acks.values()]),
      sourceStoredMs: percentiles(sourceSide),
      syncMs: percentiles(syncSide),
      quarters,
      worst,
      lost: watch.pending.size,
      failed,
      requestsToA,
      requestsToB,
      reconcilesPerChange: countOf(requestsToB, /^GET \/nacos\/v1\/ns\/instance\/list$/) / Math.max(1, opts.changes),
      pushes,
      finalPushPacketBytes: await pushPacketBytes(a),
      cpu,
      queue,
    };
  } finally {
    inA.close();
    watch.close();
    await pool.close();
    await callApi(api, 'POST', '/api/v1/tasks/lat/pause', undefined, 200).catch(() => undefined);
  }
}
