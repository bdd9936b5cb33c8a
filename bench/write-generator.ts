import { performance } from 'node:perf_hooks';
import { isMainThread, parentPort, workerData, Worker } from 'node:worker_threads';
import { Pool } from 'undici';
import type { Instance } from '../src/model/index.js';
import { CpuMeter, type CpuShares } from './proc-stats.js';
import { CLUSTER, PORT, copyLikeMetadata, ipOf, serviceName } from './instances.js';

/*
 * The raw write generators (Nacos in raw-write.ts, Consul and Eureka in foreign-registry.ts): a
 * worker thread sends registrations straight over keep-alive HTTP, `concurrency` lanes each
 * sending its next once the last is answered, while the registry serves in the main thread. Each
 * registry's worker module says what one registration is (write-load.ts, consul-write-load.ts,
 * eureka-write-load.ts) and starts with {@link serveWriteLoad}; {@link runWriteWorker} runs one.
 */

/** What a raw write generator is asked to do. */
export interface WriteLoadInput {
  /** `http://host:port` of the registry. */
  url: string;
  writes: number;
  /** The writes are spread round-robin over this many services. */
  services: number;
  concurrency: number;
  /** Registrations sent (to other services) before the measured ones, to warm up both sides. */
  warmup: number;
}

/** What it measured. */
export interface WriteLoadResult {
  elapsedMs: number;
  ok: number;
  failed: number;
  firstError: string | undefined;
  /** Event-loop utilization of the generator's thread during the measured writes (1 = it was the bottleneck). */
  generatorLoop: number;
}

/** One registration: copy `n` of `service`, and whether an answer stored it. */
export interface WriteKind {
  headers: Record<string, string>;
  request(service: string, n: number): { method: 'PUT' | 'POST'; path: string; body: string };
  stored(status: number, text: string): boolean;
}

/** Copy `n` of `service` as regsync writes copies: address 10.x.y.z, copy-like metadata. */
export function copyLikeInstance(service: string, n: number): Instance {
  return { ip: ipOf(n), port: PORT, weight: 1, healthy: true, enabled: true, ephemeral: false, cluster: CLUSTER, metadata: copyLikeMetadata(service) };
}

/** Sends `count` registrations through `pool`, `concurrency` lanes each sending its next once the last is answered. */
async function send(pool: Pool, kind: WriteKind, count: number, concurrency: number, copy: (i: number) => [string, number]): Promise<{ ok: number; failed: number; firstError: string | undefined }> {
  let next = 0;
  let ok = 0;
  let failed = 0;
  let firstError: string | undefined;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const i = next;
      next += 1;
      try {
        const [service, n] = copy(i);
        const res = await pool.request({ ...kind.request(service, n), headers: kind.headers });
        const text = await res.body.text();
        if (kind.stored(res.statusCode, text)) ok += 1;
        else {
          failed += 1;
          firstError ??= `HTTP ${res.statusCode}: ${text.slice(0, 200)}`;
        }
      } catch (err) {
        failed += 1;
        firstError ??= err instanceof Error ? err.message : String(err);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
  return { ok, failed, firstError };
}

/** Runs the raw write load of `kind` against a test registry. */
export async function runWriteLoad(kind: WriteKind, input: WriteLoadInput, onMeasureStart: () => void = () => {}): Promise<WriteLoadResult> {
  const pool = new Pool(input.url, { connections: input.concurrency, pipelining: 1 });
  try {
    // Warm-up on other services and addresses (above the measured ones), so that the measured
    // writes all create new entries, as a cold sync's do.
    await send(pool, kind, input.warmup, input.concurrency, (i) => [`warm-${serviceName(i % 100)}`, input.writes + i]);
    onMeasureStart();
    const eluStart = performance.eventLoopUtilization();
    const started = performance.now();
    const result = await send(pool, kind, input.writes, input.concurrency, (i) => [serviceName(i % input.services), i]);
    const elapsedMs = performance.now() - started;
    return { elapsedMs, ...result, generatorLoop: performance.eventLoopUtilization(eluStart).utilization };
  } finally {
    await pool.close();
  }
}

/** In a worker thread: runs the load of `kind` on the thread's `workerData` and posts `{measuring}`, then `{result}` or `{error}`. */
export function serveWriteLoad(kind: WriteKind): void {
  if (isMainThread || !parentPort) return;
  const port = parentPort;
  runWriteLoad(kind, workerData as WriteLoadInput, () => port.postMessage({ measuring: true })).then(
    (result) => port.postMessage({ result }),
    (err: unknown) => port.postMessage({ error: err instanceof Error ? err.stack ?? err.message : String(err) }),
  );
}

/** What a worker run of a generator came to: its result (or a timeout), and the main thread's share meanwhile. */
export interface WriteWorkerOutcome {
  outcome: { result: WriteLoadResult } | { timedOut: true };
  /** Event-loop utilization of this (the serving) thread during the measured writes. */
  serverLoop: number;
  cpu: CpuShares | undefined;
  /** From the worker's start (a timeout's elapsed time). */
  startedAt: number;
}

/** Runs the generator module `worker` on `input` in a worker thread, until its result or `deadlineMs`. */
export async function runWriteWorker(worker: URL, input: WriteLoadInput, deadlineMs: number, what: string): Promise<WriteWorkerOutcome> {
  const thread = new Worker(worker, { workerData: input });
  const startedAt = performance.now();
  let eluStart = performance.eventLoopUtilization();
  const meter = new CpuMeter();
  let metering: Promise<void> | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    const outcome = await new Promise<{ result: WriteLoadResult } | { timedOut: true }>((resolve, reject) => {
      timer = setTimeout(() => resolve({ timedOut: true }), deadlineMs);
      thread.on('message', (msg: { measuring?: true; result?: WriteLoadResult; error?: string }) => {
        if (msg.measuring) {
          eluStart = performance.eventLoopUtilization();
          metering = meter.start();
        } else if (msg.result) resolve({ result: msg.result });
        else reject(new Error(`${what} failed: ${msg.error ?? 'unknown error'}`));
      });
      thread.once('error', reject);
      thread.once('exit', (code) => reject(new Error(`${what} exited with code ${code}`)));
    });
    const serverLoop = performance.eventLoopUtilization(eluStart).utilization;
    const cpu = metering ? await metering.then(() => meter.stop()) : undefined;
    return { outcome, serverLoop, cpu, startedAt };
  } finally {
    if (timer) clearTimeout(timer);
    thread.removeAllListeners('exit');
    await thread.terminate();
  }
}
