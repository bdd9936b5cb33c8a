import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Worker } from 'node:worker_threads';
import { Redis } from 'ioredis';
import { CONSUL_CONNECTIONS } from '../adapters/consul/consul-http.js';
import { startRegistry } from '../src/registry/index.js';
import { startConsulServer, type ConsulRequestRecord, type ConsulServer } from '../test/support/consul-server.js';
import { startRedis } from '../test/support/redis.js';
import { rawWarmupWrites } from './args.js';
import { CopyCounter, seedSource } from './cold-sync.js';
import type { ConsulWriteLoadInput, ConsulWriteLoadResult } from './consul-write-load.js';
import { NAMESPACE, PORT, ipOf, serviceName } from './instances.js';
import { CpuMeter, type CpuShares } from './proc-stats.js';
import { profileFiles, summarizeProfile, type ProfileSummary } from './profile-summary.js';
import { measureRawWrites } from './raw-write.js';
import { callApi, logProblems, repoRoot, startRegsyncUp, type RegsyncUp } from './regsync.js';
import { RequestCounter, type RequestCounts } from './request-counter.js';

/*
 * The Consul phase (`--only consul`): regsync's cold sync into and out of a Consul, next to what the
 * test Consul (test/support/consul-server.ts, in this process's main thread as the embedded Nacos
 * registries are) takes when written to directly. A deployment of its own: a redis-server, one
 * `regsync up`, two embedded Nacos registries and two test Consuls (one per direction, each fresh).
 *
 *   raw            catalog registrations of services x instances copies (the adapter's own body)
 *                  sent straight over keep-alive HTTP (undici Pool) from a worker thread, as many
 *                  in flight as the adapter keeps connections to one agent; a fresh Consul per round
 *   Nacos -> Consul  services x instances persistent instances in Nacos A, one `*` task into Consul A,
 *                  until Consul A holds every copy on regsync's node
 *   Consul -> Nacos  the same number seeded into Consul B (services on 100 agent nodes, one passing
 *                  check each), one `*` task into Nacos B, until B holds every copy
 *
 * Each sync follows a raw round of its own, and its ratio compares the two (the machine's speed
 * drifts within minutes). Consul -> Nacos is also compared with the embedded Nacos registry's raw
 * write rate measured just before it (its destination's ceiling).
 */

/** The raw write rate of the test Consul. */
export interface ConsulRawResult {
  writes: number;
  concurrency: number;
  warmup: number;
  elapsedMs: number;
  writesPerSecond: number;
  ok: number;
  failed: number;
  firstError: string | undefined;
  /** Copies the server holds afterwards on regsync's node, warm-up excluded (should equal `writes`). */
  stored: number;
  /** Event-loop utilization of the thread serving the test Consul (1 = the server was the bottleneck). */
  serverLoop: number;
  generatorLoop: number;
  timedOut: boolean;
  cpu: CpuShares | undefined;
}

/** One direction of the cold sync. */
export interface ConsulSyncResult {
  direction: 'nacos-to-consul' | 'consul-to-nacos';
  expected: number;
  /** The warm-up sync before the measured one (another namespace and test Consul); undefined without one. */
  warmup: { services: number; elapsedMs: number } | undefined;
  reached: number;
  /** From the task's creation until the destination held every copy. */
  elapsedMs: number;
  copiesPerSecond: number;
  timedOut: boolean;
  /** `POST /api/v1/tasks` answered. */
  taskCreatedMs: number;
  firstCopyMs: number | undefined;
  /** The raw Consul round just before, and the ratio to it. */
  rawWritesPerSecond: number | undefined;
  ratioToRaw: number | undefined;
  /** Consul -> Nacos only: the embedded Nacos registry's raw write rate just before, and the ratio. */
  nacosRawWritesPerSecond?: number | undefined;
  ratioToNacosRaw?: number | undefined;
  /** Requests the Consul received from the task's creation until the end, by kind. */
  requestsToConsul: Record<string, number>;
  /** Requests the Nacos registry received meanwhile. */
  requestsToNacos: RequestCounts;
  /** Registrations (Nacos -> Consul) or registers (Consul -> Nacos) per copy: 1 means none wasted. */
  writesPerCopy: number;
  cpu: CpuShares;
  /** Copies in the destination over time, `[seconds, copies]`. */
  timeline: Array<[number, number]>;
}

export interface ConsulBenchResult {
  services: number;
  instances: number;
  /** The raw round before each direction. */
  raw: ConsulRawResult[];
  toConsul: ConsulSyncResult | undefined;
  toNacos: ConsulSyncResult | undefined;
  regsync: { logFile: string; logProblems: Array<{ level: string; msg: string; count: number }>; profile: ProfileSummary[] | undefined } | undefined;
  errors: string[];
}

/** Agent nodes the Consul -> Nacos source spreads its services over. */
const SOURCE_NODES = 100;

/** Measures one raw round on a fresh test Consul. */
export async function measureConsulRaw(opts: { writes: number; services: number; concurrency: number }, deadlineMs: number): Promise<ConsulRawResult> {
  const server = await startConsulServer();
  const warmup = rawWarmupWrites(opts.writes);
  const input: ConsulWriteLoadInput = { url: `http://${server.endpoint}`, writes: opts.writes, services: opts.services, concurrency: opts.concurrency, warmup };
  const worker = new Worker(new URL('./consul-write-load.js', import.meta.url), { workerData: input });
  const started = performance.now();
  let eluStart = performance.eventLoopUtilization();
  const meter = new CpuMeter();
  let metering: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    const outcome = await new Promise<{ result: ConsulWriteLoadResult } | { timedOut: true }>((resolve, reject) => {
      timer = setTimeout(() => resolve({ timedOut: true }), deadlineMs);
      worker.on('message', (msg: { measuring?: true; result?: ConsulWriteLoadResult; error?: string }) => {
        if (msg.measuring) {
          eluStart = performance.eventLoopUtilization();
          metering = meter.start();
        } else if (msg.result) resolve({ result: msg.result });
        else reject(new Error(`raw Consul write generator failed: ${msg.error ?? 'unknown error'}`));
      });
      worker.once('error', reject);
      worker.once('exit', (code) => reject(new Error(`raw Consul write generator exited with code ${code}`)));
    });
    const serverLoop = performance.eventLoopUtilization(eluStart).utilization;
    const cpu = metering ? await metering.then(() => meter.stop()) : undefined;
    const stored = await copiesOnNode(server, 'regsync', 'svc-');
    if ('timedOut' in outcome) {
      const elapsedMs = performance.now() - started;
      return { ...opts, warmup, elapsedMs, writesPerSecond: stored / (elapsedMs / 1000), ok: stored, failed: 0, firstError: `no result within ${deadlineMs} ms`, stored, serverLoop, generatorLoop: NaN, timedOut: true, cpu };
    }
    const r = outcome.result;
    return { ...opts, warmup, elapsedMs: r.elapsedMs, writesPerSecond: r.ok / (r.elapsedMs / 1000), ok: r.ok, failed: r.failed, firstError: r.firstError, stored, serverLoop, generatorLoop: r.generatorLoop, timedOut: false, cpu };
  } finally {
    if (timer) clearTimeout(timer);
    worker.removeAllListeners('exit');
    await worker.terminate();
    await server.close();
  }
}

/** Successful catalog registrations among `records` from `from` on. */
function registered(records: readonly ConsulRequestRecord[], from: number): number {
  let n = 0;
  for (let i = from; i < records.length; i += 1) {
    const r = records[i] as ConsulRequestRecord;
    if (r.status === 200 && r.method === 'PUT' && r.path === '/v1/catalog/register') n += 1;
  }
  return n;
}

/** Services on a catalog node whose name starts with `prefix`, read as a Consul user would (`GET /v1/catalog/node-services/:node`). */
async function copiesOnNode(server: ConsulServer, node: string, prefix = ''): Promise<number> {
  const res = await fetch(`http://${server.endpoint}/v1/catalog/node-services/${node}`);
  const body = (await res.json()) as { Services?: Array<{ Service?: string }> } | null;
  return (body?.Services ?? []).filter((s) => (s.Service ?? '').startsWith(prefix)).length;
}

/** `GET /v1/health/service/:name (blocking)`: requests by method, route and whether they blocked. */
export function consulRequestCounts(records: readonly ConsulRequestRecord[], from: number): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = from; i < records.length; i += 1) {
    const r = records[i] as ConsulRequestRecord;
    const route = r.path.replace(/^(\/v1\/(?:health\/service|catalog\/service|catalog\/node-services))\/.+$/, '$1/:name');
    const key = `${r.method} ${route}${r.blocking ? ' (blocking)' : ''}${r.status === 200 ? '' : ` ${r.status}`}`;
    out[key] = (out[key] ?? 0) + 1;
  }
  return out;
}

/**
 * Seeds `services` x `instances` instances into a test Consul as agents register them: each on one
 * of {@link SOURCE_NODES} nodes (alive: `serfHealth` passing), with a passing service check, a tag
 * and meta. Addresses are made up and never contacted.
 */
export function seedConsul(server: ConsulServer, services: number, instances: number): void {
  for (let k = 0; k < SOURCE_NODES; k += 1) {
    server.catalogRegister({
      Node: `node-${k}`,
      Address: ipOf((1 << 23) + k),
      Check: { CheckID: 'serfHealth', Name: 'Serf Health Status', Status: 'passing' },
    });
  }
  for (let s = 0; s < services; s += 1) {
    const name = serviceName(s);
    for (let i = 0; i < instances; i += 1) {
      const n = s * instances + i;
      const id = `${name}-${i}`;
      server.catalogRegister({
        Node: `node-${n % SOURCE_NODES}`,
        SkipNodeUpdate: true,
        Service: { ID: id, Service: name, Address: ipOf(n), Port: PORT, Tags: ['v1'], Meta: { app: name, version: '1.0.0' } },
        Check: { CheckID: `service:${id}`, Name: `Service '${name}' check`, Status: 'passing', ServiceID: id },
      });
    }
  }
}

interface Deployment {
  regsync: RegsyncUp;
  cpu: CpuMeter;
  /** Services of the warm-up sync before each direction (0: none). */
  warmupServices: number;
  /** The warm-up syncs' Consuls, kept until the phase ends (their paused tasks still name them). */
  warmups: ConsulServer[];
}

/** Waits until `count()` reaches `expected` or the deadline passes, sampling every 20 ms; a timeline per second. */
async function until(count: () => number, expected: number, t0: number, deadlineMs: number, progress: (line: string) => void, what: string) {
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

/** Namespace (Nacos) and key namespace (Consul clusters) of the warm-up syncs. */
const WARMUP = 'warmup';

/**
 * Runs regsync's code of one direction before it is measured, as the raw rounds send warm-up
 * registrations first: `services` x `instances` through a task of its own, into (or out of) a test
 * Consul of its own, until every copy is there; then the task is paused. Answers how long it took (ms).
 */
async function warmUp(
  d: Deployment,
  direction: ConsulSyncResult['direction'],
  nacos: { id: string; registry: Awaited<ReturnType<typeof startRegistry>> },
  opts: { services: number; instances: number },
  deadlineMs: number,
): Promise<number> {
  const consul = await startConsulServer();
  d.warmups.push(consul);
  const expected = opts.services * opts.instances;
  const id = `warm-${direction}`;
  let counter: CopyCounter | undefined;
  let count: () => number;
  if (direction === 'nacos-to-consul') {
    seedSource(nacos.registry, opts.services, opts.instances, WARMUP);
    // Its service keys are in the warm-up namespace, as the source's.
    await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id, kind: 'consul', endpoints: [consul.endpoint], namespace: WARMUP }, 201);
    count = () => registered(consul.requests, 0);
  } else {
    seedConsul(consul, opts.services, opts.instances);
    await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id, kind: 'consul', endpoints: [consul.endpoint], namespace: WARMUP }, 201);
    const c = new CopyCounter(nacos.registry, expected, WARMUP);
    counter = c;
    count = () => c.total;
  }
  const t0 = performance.now();
  try {
    const task = direction === 'nacos-to-consul' ? { source: nacos.id, destination: id } : { source: id, destination: nacos.id };
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

/** Nacos A -> Consul A: seeded Nacos, fresh Consul, one `*` task. */
async function syncToConsul(d: Deployment, opts: { services: number; instances: number }, deadlineMs: number, progress: (line: string) => void): Promise<ConsulSyncResult> {
  const expected = opts.services * opts.instances;
  const nacos = await startRegistry({ port: 0 });
  const consul = await startConsulServer();
  const nacosRequests = new RequestCounter(nacos);
  try {
    seedSource(nacos, opts.services, opts.instances);
    await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id: 'nacos-a', kind: 'nacos', endpoints: [nacos.endpoint] }, 201);
    await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id: 'consul-a', kind: 'consul', endpoints: [consul.endpoint] }, 201);
    const warmupMs = d.warmupServices > 0 ? await warmUp(d, 'nacos-to-consul', { id: 'nacos-a', registry: nacos }, { services: d.warmupServices, instances: opts.instances }, deadlineMs) : undefined;
    const from = consul.requests.length;
    // Counted incrementally: a successful registration is a copy stored (checked against the node's services at the end).
    let scanned = from;
    let writes = 0;
    const count = (): number => {
      writes += registered(consul.requests, scanned);
      scanned = consul.requests.length;
      return writes;
    };
    nacosRequests.open();
    await d.cpu.start();
    const t0 = performance.now();
    await callApi(d.regsync.url, 'POST', '/api/v1/tasks', { id: 'to-consul', source: 'nacos-a', destination: 'consul-a', service: '*', namespace: NAMESPACE }, 201);
    const taskCreatedMs = performance.now() - t0;
    const run = await until(count, expected, t0, deadlineMs, progress, 'Nacos -> Consul');
    const cpu = await d.cpu.stop();
    const requestsToConsul = consulRequestCounts(consul.requests, from);
    const requestsToNacos = nacosRequests.window();
    await callApi(d.regsync.url, 'POST', '/api/v1/tasks/to-consul/pause', undefined, 200);
    const reached = await copiesOnNode(consul, 'regsync');
    const elapsedMs = run.end - t0;
    return {
      direction: 'nacos-to-consul',
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
      requestsToConsul,
      requestsToNacos,
      writesPerCopy: run.reached / Math.max(1, reached),
      cpu,
      timeline: run.timeline,
    };
  } finally {
    nacosRequests.close();
    await consul.close();
    await nacos.close();
  }
}

/** Consul B -> Nacos B: seeded Consul, fresh Nacos, one `*` task. */
async function syncToNacos(d: Deployment, opts: { services: number; instances: number }, deadlineMs: number, progress: (line: string) => void): Promise<ConsulSyncResult> {
  const expected = opts.services * opts.instances;
  const consul = await startConsulServer();
  const nacos = await startRegistry({ port: 0 });
  const nacosRequests = new RequestCounter(nacos);
  const counter = new CopyCounter(nacos, expected, NAMESPACE);
  try {
    seedConsul(consul, opts.services, opts.instances);
    await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id: 'consul-b', kind: 'consul', endpoints: [consul.endpoint] }, 201);
    await callApi(d.regsync.url, 'POST', '/api/v1/clusters', { id: 'nacos-b', kind: 'nacos', endpoints: [nacos.endpoint] }, 201);
    const warmupMs = d.warmupServices > 0 ? await warmUp(d, 'consul-to-nacos', { id: 'nacos-b', registry: nacos }, { services: d.warmupServices, instances: opts.instances }, deadlineMs) : undefined;
    const from = consul.requests.length;
    nacosRequests.open();
    await d.cpu.start();
    const t0 = performance.now();
    await callApi(d.regsync.url, 'POST', '/api/v1/tasks', { id: 'to-nacos', source: 'consul-b', destination: 'nacos-b', service: '*' }, 201);
    const taskCreatedMs = performance.now() - t0;
    const run = await until(() => counter.total, expected, t0, deadlineMs, progress, 'Consul -> Nacos');
    const end = counter.total >= expected ? ((await counter.reached(t0 + deadlineMs)) ?? run.end) : run.end;
    const cpu = await d.cpu.stop();
    const requestsToConsul = consulRequestCounts(consul.requests, from);
    const requestsToNacos = nacosRequests.window();
    await callApi(d.regsync.url, 'POST', '/api/v1/tasks/to-nacos/pause', undefined, 200);
    const elapsedMs = end - t0;
    const registers = Object.entries(requestsToNacos).reduce((n, [k, w]) => (/^POST \/nacos\/v1\/ns\/instance$/.test(k) ? n + w.count : n), 0);
    return {
      direction: 'consul-to-nacos',
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
      requestsToConsul,
      requestsToNacos,
      writesPerCopy: registers / Math.max(1, counter.total),
      cpu,
      timeline: run.timeline,
    };
  } finally {
    counter.close();
    nacosRequests.close();
    await consul.close();
    await nacos.close();
  }
}

/** The Consul phase: raw rate, then each direction after a raw round of its own. */
export async function measureConsul(
  opts: { services: number; instances: number; warmupServices: number; nacosConcurrency: number; profileDir: string | undefined; nodeFlags: string[] },
  deadlineMs: number,
  progress: (line: string) => void,
): Promise<ConsulBenchResult> {
  const size = { services: opts.services, instances: opts.instances };
  const writes = opts.services * opts.instances;
  const result: ConsulBenchResult = { ...size, raw: [], toConsul: undefined, toNacos: undefined, regsync: undefined, errors: [] };
  const raw = async (label: string): Promise<number | undefined> => {
    const r = await measureConsulRaw({ writes, services: opts.services, concurrency: CONSUL_CONNECTIONS }, deadlineMs);
    result.raw.push(r);
    progress(`consul: raw ${label}: ${Math.round(r.writesPerSecond).toLocaleString('en-US')} registrations/s${r.failed > 0 ? `, ${r.failed} failed (${r.firstError ?? ''})` : ''}`);
    return r.failed === 0 && !r.timedOut ? r.writesPerSecond : undefined;
  };
  const redis = await startRedis();
  const redisClient = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  redisClient.on('error', () => {});
  let regsync: RegsyncUp | undefined;
  const warmups: ConsulServer[] = [];
  try {
    regsync = await startRegsyncUp({ redisUrl: redis.url, logDir: join(repoRoot(), 'dist', 'bench-logs'), profileDir: opts.profileDir, nodeFlags: opts.nodeFlags });
    const up = regsync;
    const d: Deployment = { regsync: up, cpu: new CpuMeter(() => up.proc.pid, redisClient), warmupServices: opts.warmupServices, warmups };

    const before = await raw('before Nacos -> Consul');
    progress(`consul: Nacos -> Consul, ${opts.services.toLocaleString('en-US')} services x ${opts.instances} instances`);
    try {
      const r = await syncToConsul(d, size, deadlineMs, progress);
      r.rawWritesPerSecond = before;
      r.ratioToRaw = before === undefined ? undefined : r.copiesPerSecond / before;
      result.toConsul = r;
      progress(`consul: Nacos -> Consul ${(r.elapsedMs / 1000).toFixed(2)} s, ${Math.round(r.copiesPerSecond).toLocaleString('en-US')} copies/s`);
    } catch (err) {
      result.errors.push(`Nacos -> Consul: ${err instanceof Error ? err.message : String(err)}`);
    }

    const beforeBack = await raw('before Consul -> Nacos');
    const nacosRaw = await measureRawWrites({ writes, services: opts.services, concurrency: opts.nacosConcurrency, rounds: 1 }, deadlineMs);
    const nacosRate = nacosRaw.failed === 0 && !nacosRaw.timedOut ? nacosRaw.writesPerSecond : undefined;
    progress(`consul: raw Nacos writes: ${Math.round(nacosRaw.writesPerSecond).toLocaleString('en-US')}/s`);
    progress(`consul: Consul -> Nacos, ${opts.services.toLocaleString('en-US')} services x ${opts.instances} instances`);
    try {
      const r = await syncToNacos(d, size, deadlineMs, progress);
      r.rawWritesPerSecond = beforeBack;
      r.ratioToRaw = beforeBack === undefined ? undefined : r.copiesPerSecond / beforeBack;
      r.nacosRawWritesPerSecond = nacosRate;
      r.ratioToNacosRaw = nacosRate === undefined ? undefined : r.copiesPerSecond / nacosRate;
      result.toNacos = r;
      progress(`consul: Consul -> Nacos ${(r.elapsedMs / 1000).toFixed(2)} s, ${Math.round(r.copiesPerSecond).toLocaleString('en-US')} copies/s`);
    } catch (err) {
      result.errors.push(`Consul -> Nacos: ${err instanceof Error ? err.message : String(err)}`);
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
