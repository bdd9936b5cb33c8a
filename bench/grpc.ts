import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { Redis } from 'ioredis';
import { startRegistry, type RunningRegistry } from '../src/registry/index.js';
import type { ServiceChange } from '../src/registry/naming-store.js';
import { answerOk, TestGrpcClient } from '../test/support/grpc-client.js';
import { startRedis, type RedisServer } from '../test/support/redis.js';
import { ByteProxy, type ByteCounts } from './byte-proxy.js';
import { CopyCounter } from './cold-sync.js';
import { batchHosts, publishServices, type GrpcPublishInput, type GrpcPublishResult } from './grpc-load.js';
import { GROUP, NAMESPACE, PORT, CLUSTER, ipOf } from './instances.js';
import { CpuMeter, type CpuShares } from './proc-stats.js';
import { profileFiles, summarizeProfile, type ProfileSummary } from './profile-summary.js';
import { callApi, QueueSampler, repoRoot, startRegsyncUp, type RegsyncUp } from './regsync.js';
import { RequestCounter, type RequestCounts } from './request-counter.js';
import { percentiles, type Percentiles } from './stats.js';

/*
 * The Nacos gRPC measurements (`rest`, `grpc-latency`, `grpc-cold`). Each run has a deployment of its
 * own (redis-server, registries A and B in this process, one `regsync up`), so that HTTP and gRPC
 * figures of one run are taken under the same conditions and nothing of one weighs on the other.
 */

type Protocol = 'v1' | 'grpc';

/** CPU profiles of the regsync processes these phases ran (with --profile), summarized once each stopped. */
export const grpcProfiles: ProfileSummary[] = [];

/** A redis-server, registries A and B, optional byte-counting relays in front of them, and `regsync up` with clusters `a` and `b`. */
interface Deployment {
  redis: RedisServer;
  redisClient: Redis;
  a: RunningRegistry;
  b: RunningRegistry;
  requestsA: RequestCounter;
  requestsB: RequestCounter;
  /** Relays regsync talks through (HTTP and gRPC port of each registry); empty when not proxied. */
  proxies: { a: ByteProxy[]; b: ByteProxy[] };
  regsync: RegsyncUp;
  queue: QueueSampler;
  cpu: CpuMeter;
  close(): Promise<void>;
}

async function startDeployment(opts: { protocol: Protocol; mergeWindowMs?: number; proxied: boolean; profileDir?: string | undefined; nodeFlags: string[] }): Promise<Deployment> {
  const closers: Array<() => Promise<void> | void> = [];
  const close = async () => {
    for (const c of closers.reverse()) await Promise.resolve(c()).catch(() => {});
  };
  try {
    const redis = await startRedis();
    closers.push(() => redis.cleanup());
    const redisClient = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    redisClient.on('error', () => {});
    closers.push(() => redisClient.disconnect());
    const grpc = opts.mergeWindowMs === undefined ? {} : { pushMergeWindowMs: opts.mergeWindowMs };
    const a = await startRegistry({ port: 0, grpc });
    closers.push(() => a.close());
    const b = await startRegistry({ port: 0, grpc });
    closers.push(() => b.close());
    const requestsA = new RequestCounter(a);
    const requestsB = new RequestCounter(b);
    closers.push(() => {
      requestsA.close();
      requestsB.close();
    });
    const proxies: Deployment['proxies'] = { a: [], b: [] };
    const endpointOf = async (r: RunningRegistry, side: ByteProxy[]) => {
      if (!opts.proxied) return { endpoint: r.endpoint, grpcPort: r.grpcPort as number };
      const http = await ByteProxy.start(r.port);
      const g = await ByteProxy.start(r.grpcPort as number);
      side.push(http, g);
      closers.push(() => http.close(), () => g.close());
      return { endpoint: `127.0.0.1:${http.port}`, grpcPort: g.port };
    };
    const ea = await endpointOf(a, proxies.a);
    const eb = await endpointOf(b, proxies.b);
    const regsync = await startRegsyncUp({ redisUrl: redis.url, logDir: join(repoRoot(), 'dist', 'bench-logs'), profileDir: opts.profileDir, nodeFlags: opts.nodeFlags });
    closers.push(async () => {
      await regsync.stop();
      if (regsync.profileDir) grpcProfiles.push(...profileFiles(regsync.profileDir).map((f) => summarizeProfile(f, 20)));
    });
    for (const [id, e] of [['a', ea], ['b', eb]] as const) {
      await callApi(regsync.url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [e.endpoint], options: { apiVersion: opts.protocol, grpcPort: e.grpcPort } }, 201);
    }
    const deployment = JSON.parse((await redisClient.get('regsync:deployment')) ?? '{"shards":1}') as { shards: number };
    const queue = new QueueSampler(redis.url, deployment.shards);
    closers.push(() => queue.close());
    return { redis, redisClient, a, b, requestsA, requestsB, proxies, regsync, queue, cpu: new CpuMeter(() => regsync.proc.pid, redisClient), close };
  } catch (err) {
    await close();
    throw err;
  }
}

async function drainQueue(queue: QueueSampler, ms: number): Promise<void> {
  const until = performance.now() + ms;
  while ((await queue.depth().catch(() => 1)) > 0 && performance.now() < until) await delay(50);
}

function grpcRequestDelta(r: RunningRegistry, before: Record<string, number>): Record<string, number> {
  const after = r.grpc?.stats().requests ?? {};
  const out: Record<string, number> = {};
  for (const [k, v] of Object.entries(after)) if (v - (before[k] ?? 0) > 0) out[k] = v - (before[k] ?? 0);
  return out;
}

function sumBytes(proxies: ByteProxy[]): ByteCounts {
  return proxies.reduce((s, p) => ({ received: s.received + p.bytes().received, sent: s.sent + p.bytes().sent }), { received: 0, sent: 0 });
}

// ---------------------------------------------------------------------------------------------
// At rest

/** What one registry received from regsync during the at-rest window. */
export interface SideAtRest {
  /** HTTP requests by kind (the registry's request counter) and gRPC unary requests by class (`grpc.stats().requests`). */
  http: Record<string, number>;
  grpc: Record<string, number>;
  requestsPerS: number;
  /** TCP payload through the relay regsync uses, per second: received = regsync -> registry. */
  bytesReceivedPerS: number;
  bytesSentPerS: number;
  /** Bytes of the window by port (HTTP relay, gRPC relay). */
  bytesByPort: { http: ByteCounts; grpc: ByteCounts };
  /** The same per 1,000 copies. */
  per1000: { requestsPerS: number; bytesReceivedPerS: number; bytesSentPerS: number };
}

export interface AtRestRun {
  protocol: Protocol;
  services: number;
  instances: number;
  copies: number;
  /** From the task's creation until B held every copy (a cold sync, by the way; not the `grpc-cold` figure). */
  syncMs: number | undefined;
  idleS: number;
  fullSyncIntervalMs: number;
  source: SideAtRest;
  destination: SideAtRest;
  /** UDP pushes A sent to regsync (v1 only; they bypass the relay and are not in the bytes). */
  udpPushes: number;
  /** False when regsync talked to the registries directly (`--rest-direct`): the bytes are then 0, not counted. */
  bytesCounted: boolean;
  /** gRPC pushes A sent on regsync's connection. */
  grpcPushes: number;
  cpu: CpuShares;
  error?: string;
}

export interface AtRestResult {
  runs: AtRestRun[];
  /** Target: regsync under this share of one core at rest over gRPC (for 20,000 x 10). */
  cpuTarget: number;
}

export const AT_REST_CPU_TARGET = 0.1;

function side(http: RequestCounts, grpc: Record<string, number>, relays: ByteProxy[], seconds: number, copies: number): SideAtRest {
  const bytes = sumBytes(relays);
  const none = { received: 0, sent: 0 };
  const httpCounts = Object.fromEntries(Object.entries(http).map(([k, w]) => [k, w.count]));
  const n = Object.values(httpCounts).reduce((x, y) => x + y, 0) + Object.values(grpc).reduce((x, y) => x + y, 0);
  const requestsPerS = n / seconds;
  const k = copies / 1000;
  return {
    http: httpCounts,
    grpc,
    requestsPerS,
    bytesReceivedPerS: bytes.received / seconds,
    bytesSentPerS: bytes.sent / seconds,
    bytesByPort: { http: relays[0]?.bytes() ?? none, grpc: relays[1]?.bytes() ?? none },
    per1000: { requestsPerS: requestsPerS / k, bytesReceivedPerS: bytes.received / seconds / k, bytesSentPerS: bytes.sent / seconds / k },
  };
}

/**
 * `rest`: `services` x `instances` ephemeral instances published into A by a load-generator gRPC
 * connection (as Nacos 2.x apps publish them), one task A->B for `*` with `fullSyncIntervalMs`,
 * synced, then `idleS` seconds with nothing changing, once with both clusters on `apiVersion: v1` and
 * once on `grpc`. regsync talks to A and B through byte-counting relays.
 */
export async function measureAtRest(
  opts: { services: number; instances: number; idleS: number; fullSyncIntervalMs: number; protocols: Protocol[]; direct: boolean; profileDir?: string | undefined; nodeFlags: string[] },
  deadlineMs: number,
  progress: (line: string) => void,
): Promise<AtRestResult> {
  const runs: AtRestRun[] = [];
  for (const protocol of opts.protocols) {
    progress(`rest (${protocol}): ${opts.services.toLocaleString('en-US')} services x ${opts.instances} ephemeral instances, full sync every ${opts.fullSyncIntervalMs / 1000} s, ${opts.idleS} s at rest`);
    runs.push(await atRestRun(protocol, opts, deadlineMs, progress));
  }
  return { runs, cpuTarget: AT_REST_CPU_TARGET };
}

async function atRestRun(
  protocol: Protocol,
  opts: { services: number; instances: number; idleS: number; fullSyncIntervalMs: number; direct: boolean; profileDir?: string | undefined; nodeFlags: string[] },
  deadlineMs: number,
  progress: (line: string) => void,
): Promise<AtRestRun> {
  const d = await startDeployment({ protocol, proxied: !opts.direct, profileDir: opts.profileDir, nodeFlags: opts.nodeFlags });
  const copies = opts.services * opts.instances;
  let publisher: TestGrpcClient | undefined;
  try {
    publisher = await TestGrpcClient.connect(d.a.grpcEndpoint as string);
    await publishServices(publisher, { services: opts.services, instances: opts.instances });
    const counter = new CopyCounter(d.b, copies);
    const t0 = performance.now();
    let reached: number | undefined;
    try {
      await callApi(d.regsync.url, 'POST', '/api/v1/tasks', { id: 'rest', source: 'a', destination: 'b', service: '*', options: { fullSyncIntervalMs: opts.fullSyncIntervalMs } }, 201);
      reached = await counter.reached(t0 + deadlineMs);
    } finally {
      counter.close();
    }
    if (reached === undefined) throw new Error(`B held ${counter.total} of ${copies} copies after ${deadlineMs} ms`);
    const syncMs = reached - t0;
    progress(`rest (${protocol}): synced in ${(syncMs / 1000).toFixed(1)} s; at rest for ${opts.idleS} s`);
    await drainQueue(d.queue, 15_000);
    // A subscribe is followed by a push of the service (as Nacos does): at 20,000 services those
    // pushes drain for seconds after the sync. The window opens once A's pushes are answered.
    const pushesDone = performance.now() + 60_000;
    for (;;) {
      const st = d.a.grpc?.stats();
      if (!st || st.pushesAcked + st.pushesFailed >= st.pushesSent || performance.now() > pushesDone) break;
      await delay(100);
    }
    // Let the settling after a sync pass (first polls, subscriptions confirmed) before the window.
    await delay(1_000);
    d.requestsA.open();
    d.requestsB.open();
    for (const p of [...d.proxies.a, ...d.proxies.b]) p.reset();
    const grpcA = { ...(d.a.grpc?.stats().requests ?? {}) };
    const grpcB = { ...(d.b.grpc?.stats().requests ?? {}) };
    const udpBefore = d.a.pusher.stats().sent;
    const pushBefore = d.a.grpc?.stats().pushesSent ?? 0;
    await d.cpu.start();
    const w0 = performance.now();
    await delay(opts.idleS * 1000);
    const cpu = await d.cpu.stop();
    const seconds = (performance.now() - w0) / 1000;
    return {
      protocol,
      services: opts.services,
      instances: opts.instances,
      copies,
      syncMs,
      idleS: opts.idleS,
      fullSyncIntervalMs: opts.fullSyncIntervalMs,
      source: side(d.requestsA.window(), grpcRequestDelta(d.a, grpcA), d.proxies.a, seconds, copies),
      destination: side(d.requestsB.window(), grpcRequestDelta(d.b, grpcB), d.proxies.b, seconds, copies),
      bytesCounted: !opts.direct,
      udpPushes: d.a.pusher.stats().sent - udpBefore,
      grpcPushes: (d.a.grpc?.stats().pushesSent ?? 0) - pushBefore,
      cpu,
    };
  } finally {
    publisher?.close();
    await d.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Propagation

export const GRPC_LATENCY_SERVICE = 'lat';
/** Connections that publish the latency phase's instances; change i goes over connection i % PUBLISHERS, whose set grows by one. */
const PUBLISHERS = 20;
const WARMUP_CHANGES = 20;
const DRAIN_MS = 10_000;

export interface GrpcLatencyRun {
  mergeWindowMs: number;
  changes: number;
  rate: number;
  sent: number;
  /** Published in A (BatchInstanceRequest sent) -> copy in B's store: regsync's propagation. */
  regsyncMs: Percentiles;
  /** Published in A -> a push holding it reached a plain gRPC subscriber of A: the registry's own push. */
  pushMs: Percentiles;
  /** regsync p99 / push p99. */
  ratioP99: number;
  lost: number;
  lostPushes: number;
  /** Pushes the plain subscriber got during the run. */
  pushes: number;
  cpu: CpuShares;
}

export interface GrpcLatencyResult {
  runs: GrpcLatencyRun[];
  /** Target: regsync's p99 within this factor of the registry's push p99. */
  targetRatio: number;
}

export const GRPC_LATENCY_TARGET_RATIO = 2;

/**
 * `grpc-latency`: clusters on gRPC, a task A->B for service `lat`; `changes` new ephemeral instances
 * published in A at `rate`/s by 20 SDK connections (each BatchInstanceRequest carries its connection's
 * whole set, one instance more than before), each timed until its copy is in B's store, next to a plain
 * subscriber of A timed until a push holding it arrives. Once per merge window.
 */
export async function measureGrpcLatency(
  opts: { changes: number; rate: number; mergeWindows: number[]; profileDir?: string | undefined; nodeFlags: string[] },
  deadlineMs: number,
  progress: (line: string) => void,
): Promise<GrpcLatencyResult> {
  const runs: GrpcLatencyRun[] = [];
  for (const w of opts.mergeWindows) {
    progress(`grpc-latency: ${opts.changes} changes at ${opts.rate}/s, registries' push merge window ${w} ms`);
    const run = await latencyRun(w, opts, deadlineMs);
    progress(`grpc-latency (${w} ms): regsync p50 ${run.regsyncMs.p50.toFixed(1)} p99 ${run.regsyncMs.p99.toFixed(1)} ms; push to a subscriber p50 ${run.pushMs.p50.toFixed(1)} p99 ${run.pushMs.p99.toFixed(1)} ms`);
    runs.push(run);
  }
  return { runs, targetRatio: GRPC_LATENCY_TARGET_RATIO };
}

async function latencyRun(mergeWindowMs: number, opts: { changes: number; rate: number; profileDir?: string | undefined; nodeFlags: string[] }, deadlineMs: number): Promise<GrpcLatencyRun> {
  const d = await startDeployment({ protocol: 'grpc', mergeWindowMs, proxied: false, profileDir: opts.profileDir, nodeFlags: opts.nodeFlags });
  const phaseDeadline = performance.now() + deadlineMs;
  const publishers: TestGrpcClient[] = [];
  let subscriber: TestGrpcClient | undefined;
  const sentAt = new Map<number, number>();
  const pendingB = new Map<string, number>();
  const pendingPush = new Map<string, number>();
  const inB = new Map<number, number>();
  const pushed = new Map<number, number>();
  let pushes = 0;
  const grouped = `${GROUP}@@${GRPC_LATENCY_SERVICE}`;
  const onB = (change: ServiceChange) => {
    if (change.namespaceId !== NAMESPACE || change.groupedName !== grouped || pendingB.size === 0) return;
    const now = performance.now();
    const instances = d.b.store.getService(NAMESPACE, GROUP, GRPC_LATENCY_SERVICE)?.instances;
    if (!instances) return;
    // Published (gRPC) instances are keyed on the whole instance: match on the address.
    for (const i of instances.values()) {
      const index = i.port === PORT && i.clusterName === CLUSTER ? pendingB.get(i.ip) : undefined;
      if (index === undefined) continue;
      inB.set(index, now);
      pendingB.delete(i.ip);
    }
  };
  d.b.store.on('change', onB);
  try {
    for (let i = 0; i < PUBLISHERS; i += 1) publishers.push(await TestGrpcClient.connect(d.a.grpcEndpoint as string));
    subscriber = await TestGrpcClient.connect(d.a.grpcEndpoint as string);
    subscriber.answer = (message) => {
      if (message.type === 'NotifySubscriberRequest') {
        const now = performance.now();
        pushes += 1;
        const hosts = ((message.body.serviceInfo as { hosts?: Array<{ ip?: string }> } | undefined)?.hosts ?? []);
        if (pendingPush.size > 0) {
          for (const h of hosts) {
            const index = h.ip === undefined ? undefined : pendingPush.get(h.ip);
            if (index === undefined) continue;
            pushed.set(index, now);
            pendingPush.delete(h.ip as string);
          }
        }
      }
      return answerOk(message);
    };
    const sub = await subscriber.naming('SubscribeServiceRequest', GRPC_LATENCY_SERVICE, { subscribe: true, clusters: '' });
    if (sub.body.resultCode !== 200) throw new Error(`subscribe: ${JSON.stringify(sub.body).slice(0, 200)}`);
    const sets: number[][] = publishers.map(() => []);
    let n = 0;
    /** Publishes one more instance (address n) over the next connection, timing change `index`. */
    const change = async (index: number): Promise<void> => {
      const k = n % PUBLISHERS;
      const addr = n;
      n += 1;
      const set = sets[k] as number[];
      set.push(addr);
      const ip = ipOf(addr);
      const hosts = set.map((x) => batchHosts(GRPC_LATENCY_SERVICE, x, 1)[0] as Record<string, unknown>);
      const t = performance.now();
      sentAt.set(index, t);
      pendingB.set(ip, index);
      pendingPush.set(ip, index);
      const answer = await (publishers[k] as TestGrpcClient).naming('BatchInstanceRequest', GRPC_LATENCY_SERVICE, { type: 'batchRegisterInstance', instances: hosts });
      if (answer.body.resultCode !== 200) throw new Error(`BatchInstanceRequest: ${JSON.stringify(answer.body).slice(0, 200)}`);
    };
    const run = async (count: number, indexBase: number): Promise<number> => {
      const interval = 1000 / opts.rate;
      const start = performance.now();
      const inflight: Array<Promise<void>> = [];
      for (let i = 0; i < count; i += 1) {
        const wait = start + i * interval - performance.now();
        if (wait >= 1) await delay(wait);
        if (performance.now() > phaseDeadline) break;
        inflight.push(change(indexBase + i));
      }
      await Promise.all(inflight);
      return inflight.length;
    };
    const drain = async (ms: number) => {
      const until = Math.min(phaseDeadline, performance.now() + ms);
      while ((pendingB.size > 0 || pendingPush.size > 0) && performance.now() < until) await delay(5);
    };
    await callApi(d.regsync.url, 'POST', '/api/v1/tasks', { id: 'lat', source: 'a', destination: 'b', service: GRPC_LATENCY_SERVICE }, 201);
    await run(1, -1000);
    await drain(20_000);
    if (pendingB.size > 0) throw new Error('the latency task did not start: no copy in B within 20 s');
    await run(WARMUP_CHANGES, -WARMUP_CHANGES - 1);
    await drain(DRAIN_MS);
    for (const m of [sentAt, inB, pushed, pendingB, pendingPush]) m.clear();
    pushes = 0;
    await d.cpu.start();
    const sent = await run(opts.changes, 0);
    await drain(DRAIN_MS);
    const cpu = await d.cpu.stop();
    const regsyncMs = percentiles([...inB].map(([i, t]) => t - (sentAt.get(i) as number)));
    const pushMs = percentiles([...pushed].map(([i, t]) => t - (sentAt.get(i) as number)));
    return {
      mergeWindowMs,
      changes: opts.changes,
      rate: opts.rate,
      sent,
      regsyncMs,
      pushMs,
      ratioP99: regsyncMs.p99 / Math.max(pushMs.p99, 1e-3),
      lost: sent - inB.size,
      lostPushes: sent - pushed.size,
      pushes,
      cpu,
    };
  } finally {
    d.b.store.off('change', onB);
    for (const p of publishers) p.close();
    subscriber?.close();
    await d.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Cold sync

export interface GrpcColdRound {
  /** BatchInstanceRequests of the same sizes from one SDK connection into a fresh registry (a worker thread). */
  rawCopiesPerSecond: number | undefined;
  rawGeneratorLoop: number | undefined;
  elapsedMs: number | undefined;
  copiesPerSecond: number | undefined;
  ratio: number | undefined;
}

export interface GrpcColdResult {
  services: number;
  instances: number;
  rounds: GrpcColdRound[];
  /** The round with the median ratio. */
  median: GrpcColdRound;
  cpu: CpuShares | undefined;
}

async function rawBatchRound(opts: { services: number; instances: number; concurrency: number }, deadlineMs: number): Promise<GrpcPublishResult> {
  const registry = await startRegistry({ port: 0 });
  const input: GrpcPublishInput = { address: registry.grpcEndpoint as string, ...opts, warmupServices: Math.max(1, Math.round(opts.services / 10)) };
  const worker = new Worker(new URL('./grpc-load.js', import.meta.url), { workerData: input });
  let timer: NodeJS.Timeout | undefined;
  try {
    return await new Promise<GrpcPublishResult>((resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`raw batch publish: no result within ${deadlineMs} ms`)), deadlineMs);
      worker.on('message', (msg: { measuring?: true; result?: GrpcPublishResult; error?: string }) => {
        if (msg.result) resolve(msg.result);
        else if (msg.error) reject(new Error(`raw batch publish failed: ${msg.error}`));
      });
      worker.once('error', reject);
    });
  } finally {
    if (timer) clearTimeout(timer);
    await worker.terminate();
    await registry.close();
  }
}

/**
 * `grpc-cold`: per round, the raw batch-publish rate into a fresh registry, then a `*` task A->B over
 * gRPC (A's `services` x `instances` ephemeral instances published by a load-generator connection, in
 * a namespace of the round's own), timed from the task's creation until B holds every copy.
 */
export async function measureGrpcCold(
  opts: { services: number; instances: number; rounds: number; concurrency: number; warmupServices: number; profileDir?: string | undefined; nodeFlags: string[] },
  deadlineMs: number,
  progress: (line: string) => void,
): Promise<GrpcColdResult> {
  const d = await startDeployment({ protocol: 'grpc', proxied: false, profileDir: opts.profileDir, nodeFlags: opts.nodeFlags });
  const copies = opts.services * opts.instances;
  const publisher = await TestGrpcClient.connect(d.a.grpcEndpoint as string);
  const rounds: GrpcColdRound[] = [];
  let cpu: CpuShares | undefined;
  try {
    const sync = async (namespace: string, services: number, id: string): Promise<number | undefined> => {
      await publishServices(publisher, { services, instances: opts.instances, namespace });
      const counter = new CopyCounter(d.b, services * opts.instances, namespace);
      const t0 = performance.now();
      try {
        await callApi(d.regsync.url, 'POST', '/api/v1/tasks', { id, source: 'a', destination: 'b', service: '*', namespace }, 201);
        const at = await counter.reached(t0 + deadlineMs);
        return at === undefined ? undefined : at - t0;
      } finally {
        counter.close();
        await callApi(d.regsync.url, 'POST', `/api/v1/tasks/${id}/pause`, undefined, 200).catch(() => {});
        await drainQueue(d.queue, 15_000);
      }
    };
    if (opts.warmupServices > 0) {
      const ms = await sync('warmup', opts.warmupServices, 'warmup');
      progress(`grpc-cold: warm-up ${opts.warmupServices} services synced in ${ms === undefined ? 'n/a' : (ms / 1000).toFixed(2)} s`);
    }
    for (let k = 1; k <= opts.rounds; k += 1) {
      let raw: GrpcPublishResult | undefined;
      try {
        raw = await rawBatchRound(opts, deadlineMs);
      } catch (err) {
        progress(`grpc-cold: raw round failed: ${err instanceof Error ? err.message : String(err)}`);
      }
      const rawCopiesPerSecond = raw ? raw.published / (raw.elapsedMs / 1000) : undefined;
      await d.cpu.start();
      const ms = await sync(k === 1 ? NAMESPACE : `cold-${k}`, opts.services, `cold-${k}`);
      const roundCpu = await d.cpu.stop();
      const copiesPerSecond = ms === undefined ? undefined : copies / (ms / 1000);
      const ratio = copiesPerSecond !== undefined && rawCopiesPerSecond !== undefined ? copiesPerSecond / rawCopiesPerSecond : undefined;
      rounds.push({ rawCopiesPerSecond, rawGeneratorLoop: raw?.generatorLoop, elapsedMs: ms, copiesPerSecond, ratio });
      if (k === Math.ceil(opts.rounds / 2)) cpu = roundCpu;
      progress(
        `grpc-cold round ${k}: raw ${rawCopiesPerSecond === undefined ? 'n/a' : Math.round(rawCopiesPerSecond)} copies/s, cold ${ms === undefined ? 'timed out' : `${(ms / 1000).toFixed(2)} s, ${Math.round(copiesPerSecond as number)} copies/s`}` +
          (ratio === undefined ? '' : ` = ${(ratio * 100).toFixed(1)}%`),
      );
    }
  } finally {
    publisher.close();
    await d.close();
  }
  const ranked = [...rounds].sort((x, y) => (x.ratio ?? x.copiesPerSecond ?? 0) - (y.ratio ?? y.copiesPerSecond ?? 0));
  return { services: opts.services, instances: opts.instances, rounds, median: ranked[Math.floor((ranked.length - 1) / 2)] as GrpcColdRound, cpu };
}
