import { performance } from 'node:perf_hooks';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Pool } from 'undici';
import { registrationOf } from '../adapters/consul/consul-meta.js';
import { DEFAULT_CONSUL_OPTIONS } from '../adapters/consul/consul-options.js';
import type { Instance } from '../src/model/index.js';
import { CLUSTER, PORT, copyLikeMetadata, ipOf, serviceName } from './instances.js';

/** What the raw Consul write generator is asked to do. */
export interface ConsulWriteLoadInput {
  /** `http://127.0.0.1:port` of the test Consul. */
  url: string;
  writes: number;
  /** The writes are spread round-robin over this many services. */
  services: number;
  concurrency: number;
  /** Registrations sent (to other services) before the measured ones, to warm up both sides. */
  warmup: number;
}

/** What it measured. */
export interface ConsulWriteLoadResult {
  elapsedMs: number;
  ok: number;
  failed: number;
  firstError: string | undefined;
  /** Event-loop utilization of the generator's thread during the measured writes (1 = it was the bottleneck). */
  generatorLoop: number;
}

const HEADERS = { 'content-type': 'application/json', accept: 'application/json' };

/** The catalog registration regsync's adapter sends for copy `n` of `service`: the same body, byte for byte in shape. */
export function copyRegistration(service: string, n: number): string {
  const instance: Instance = {
    ip: ipOf(n),
    port: PORT,
    weight: 1,
    healthy: true,
    enabled: true,
    ephemeral: false,
    cluster: CLUSTER,
    metadata: copyLikeMetadata(service),
  };
  const o = DEFAULT_CONSUL_OPTIONS;
  const body = registrationOf(service, instance, { node: o.nodeName, nodeAddress: o.nodeAddress });
  if (typeof body === 'string') throw new Error(body);
  return JSON.stringify(body);
}

/** Sends `count` registrations through `pool`, `concurrency` lanes each sending its next once the last is answered. */
async function send(pool: Pool, count: number, concurrency: number, body: (i: number) => string): Promise<{ ok: number; failed: number; firstError: string | undefined }> {
  let next = 0;
  let ok = 0;
  let failed = 0;
  let firstError: string | undefined;
  const lane = async (): Promise<void> => {
    while (next < count) {
      const i = next;
      next += 1;
      try {
        const res = await pool.request({ method: 'PUT', path: '/v1/catalog/register', headers: HEADERS, body: body(i) });
        const text = await res.body.text();
        if (res.statusCode === 200 && text === 'true') ok += 1;
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

/** Runs the raw write load against a test Consul (inside a worker thread, see consul.ts). */
export async function runConsulWriteLoad(input: ConsulWriteLoadInput, onMeasureStart: () => void = () => {}): Promise<ConsulWriteLoadResult> {
  const pool = new Pool(input.url, { connections: input.concurrency, pipelining: 1 });
  try {
    // Warm-up on other services and addresses, so that the measured writes all create new entries.
    await send(pool, input.warmup, input.concurrency, (i) => copyRegistration(`warm-${serviceName(i % 100)}`, input.writes + i));
    onMeasureStart();
    const eluStart = performance.eventLoopUtilization();
    const started = performance.now();
    const result = await send(pool, input.writes, input.concurrency, (i) => copyRegistration(serviceName(i % input.services), i));
    const elapsedMs = performance.now() - started;
    return { elapsedMs, ...result, generatorLoop: performance.eventLoopUtilization(eluStart).utilization };
  } finally {
    await pool.close();
  }
}

if (!isMainThread && parentPort) {
  const port = parentPort;
  runConsulWriteLoad(workerData as ConsulWriteLoadInput, () => port.postMessage({ measuring: true })).then(
    (result) => port.postMessage({ result }),
    (err: unknown) => port.postMessage({ error: err instanceof Error ? err.stack ?? err.message : String(err) }),
  );
}
