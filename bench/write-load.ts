import { performance } from 'node:perf_hooks';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Pool } from 'undici';
import { copyLikeMetadata, ipOf, registerForm, serviceName } from './instances.js';

/** What the raw write generator is asked to do. */
export interface WriteLoadInput {
  /** `http://host:port` of the registry. */
  url: string;
  writes: number;
  /** The writes are spread round-robin over this many services. */
  services: number;
  concurrency: number;
  /** Writes sent (to other services) before the measured ones, to warm up both sides. */
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

const HEADERS = { 'content-type': 'application/x-www-form-urlencoded' };

/**
 * Sends `count` v1 registers through `pool`, `concurrency` at a time (each lane sends its next one
 * when the previous one is answered), and counts the answers that are not `200 ok`.
 */
async function send(
  pool: Pool,
  count: number,
  concurrency: number,
  form: (i: number) => string,
): Promise<{ ok: number; failed: number; firstError: string | undefined }> {
  let next = 0;
  let ok = 0;
  let failed = 0;
  let firstError: string | undefined;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const i = next;
      next += 1;
      try {
        const res = await pool.request({ method: 'POST', path: '/nacos/v1/ns/instance', headers: HEADERS, body: form(i) });
        const text = await res.body.text();
        if (res.statusCode === 200 && text === 'ok') ok += 1;
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

/** Runs the raw write load against a registry (inside a worker thread, see raw-write.ts). */
export async function runWriteLoad(input: WriteLoadInput, onMeasureStart: () => void = () => {}): Promise<WriteLoadResult> {
  const pool = new Pool(input.url, { connections: input.concurrency, pipelining: 1 });
  try {
    // Warm-up on other services and addresses (above the measured ones), so the measured writes
    // all create new instances, as a cold sync's do.
    const warmBase = input.writes;
    await send(pool, input.warmup, input.concurrency, (i) => {
      const service = `warm-${serviceName(i % 100)}`;
      return registerForm(service, ipOf(warmBase + i), copyLikeMetadata(service));
    });
    onMeasureStart();
    const eluStart = performance.eventLoopUtilization();
    const started = performance.now();
    const result = await send(pool, input.writes, input.concurrency, (i) => {
      const service = serviceName(i % input.services);
      return registerForm(service, ipOf(i), copyLikeMetadata(service));
    });
    const elapsedMs = performance.now() - started;
    const generatorLoop = performance.eventLoopUtilization(eluStart).utilization;
    return { elapsedMs, ...result, generatorLoop };
  } finally {
    await pool.close();
  }
}

if (!isMainThread && parentPort) {
  const port = parentPort;
  runWriteLoad(workerData as WriteLoadInput, () => port.postMessage({ measuring: true })).then(
    (result) => port.postMessage({ result }),
    (err: unknown) => port.postMessage({ error: err instanceof Error ? err.stack ?? err.message : String(err) }),
  );
}
