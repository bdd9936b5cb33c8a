import { performance } from 'node:perf_hooks';
import { rawWarmupWrites } from './args.js';
import { startRegistry } from '../src/registry/index.js';
import { GROUP, NAMESPACE } from './instances.js';
import type { CpuShares } from './proc-stats.js';
import { runWriteWorker, type WriteLoadInput } from './write-generator.js';

/** Result of measurement 1. */
export interface RawWriteResult {
  writes: number;
  services: number;
  concurrency: number;
  warmup: number;
  elapsedMs: number;
  writesPerSecond: number;
  ok: number;
  failed: number;
  firstError: string | undefined;
  /** Instances the registry holds afterwards in the measured services (should equal `writes`). */
  stored: number;
  /** Event-loop utilization of the registry's thread (1 = the registry was the bottleneck). */
  registryLoop: number;
  /** Event-loop utilization of the generator's thread. */
  generatorLoop: number;
  timedOut: boolean;
  /** CPU during the measured writes (`bench` counts the registry and the generator thread). */
  cpu: CpuShares | undefined;
  /** Writes per second of every round (each on a fresh registry); the fields above are the median round's. */
  rounds: number[];
}

/**
 * Measurement 1, the ceiling: `writes` v1 registers of persistent instances into a fresh embedded
 * registry over keep-alive HTTP, `concurrency` in flight. The generator runs in a worker thread, so
 * that the registry has this process's main thread to itself, as it has during the cold sync when
 * the writer is the regsync process. `rounds` rounds (each on a fresh registry, within the one
 * deadline); the median round is the result, since a shared or virtual machine's speed drifts.
 */
export async function measureRawWrites(
  opts: { writes: number; services: number; concurrency: number; rounds: number },
  deadlineMs: number,
): Promise<RawWriteResult> {
  const deadline = performance.now() + deadlineMs;
  const results: RawWriteResult[] = [];
  for (let i = 0; i < opts.rounds; i += 1) {
    const left = deadline - performance.now();
    if (left <= 0) break;
    const r = await measureRound(opts, left);
    results.push(r);
    if (r.timedOut || r.failed > 0) break;
  }
  const sorted = [...results].sort((x, y) => x.writesPerSecond - y.writesPerSecond);
  // A failed or timed-out round is reported as it is, not hidden behind a median.
  const pick = results.find((r) => r.timedOut || r.failed > 0) ?? (sorted[Math.floor((sorted.length - 1) / 2)] as RawWriteResult);
  return { ...pick, rounds: results.map((r) => r.writesPerSecond) };
}

async function measureRound(
  opts: { writes: number; services: number; concurrency: number },
  deadlineMs: number,
): Promise<RawWriteResult> {
  const registry = await startRegistry({ port: 0 });
  const warmup = rawWarmupWrites(opts.writes);
  const input: WriteLoadInput = { url: registry.url, writes: opts.writes, services: opts.services, concurrency: opts.concurrency, warmup };
  try {
    const { outcome, serverLoop: registryLoop, cpu, startedAt: started } = await runWriteWorker(new URL('./write-load.js', import.meta.url), input, deadlineMs, 'raw write generator');
    let stored = 0;
    for (const s of registry.store.listServices(NAMESPACE, GROUP)) if (s.name.startsWith('svc-')) stored += s.instances.size;
    if ('timedOut' in outcome) {
      return {
        ...opts,
        warmup,
        elapsedMs: performance.now() - started,
        writesPerSecond: stored / ((performance.now() - started) / 1000),
        ok: stored,
        failed: 0,
        firstError: `no result within ${deadlineMs} ms`,
        stored,
        registryLoop,
        generatorLoop: NaN,
        timedOut: true,
        cpu,
        rounds: [],
      };
    }
    const r = outcome.result;
    return {
      ...opts,
      warmup,
      elapsedMs: r.elapsedMs,
      writesPerSecond: r.ok / (r.elapsedMs / 1000),
      ok: r.ok,
      failed: r.failed,
      firstError: r.firstError,
      stored,
      registryLoop,
      generatorLoop: r.generatorLoop,
      timedOut: false,
      cpu,
      rounds: [],
    };
  } finally {
    await registry.close();
  }
}
