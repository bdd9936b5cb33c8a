import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { HeartbeatScheduler } from '../src/engine/heartbeat-scheduler.js';
import { silentLogger } from '../src/log.js';
import type { Instance, ServiceKey } from '../src/model/types.js';
import { FakeAdapter } from '../test/support/fake-adapter.js';
import { CLUSTER, GROUP, ipOf, NAMESPACE, PORT } from './instances.js';

/*
 * How long one `HeartbeatScheduler.set` of a big service holds the event loop that also turns the
 * 100 ms beat wheel. In-process, no servers, nothing beats (the wheel is not started):
 *
 *   npx tsc -p tsconfig.bench.json && node --expose-gc dist/bench/heartbeat-set.js [--instances 10000] [--rounds 5]
 */

const USAGE = 'usage: node dist/bench/heartbeat-set.js [--instances <n, default 10000>] [--rounds <n, default 5>] [--json]';

function instance(n: number): Instance {
  return { ip: ipOf(n), port: PORT, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: CLUSTER, metadata: {} };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? 0;
}

function timed(work: () => void): number {
  const start = performance.now();
  work();
  return performance.now() - start;
}

function main(): void {
  const { values } = parseArgs({ options: { instances: { type: 'string' }, rounds: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean' } } });
  if (values.help) {
    console.log(USAGE);
    return;
  }
  const count = Number(values.instances ?? 10_000);
  const rounds = Number(values.rounds ?? 5);
  if (!Number.isInteger(count) || count < 1 || !Number.isInteger(rounds) || rounds < 1) throw new Error(USAGE);
  const service: ServiceKey = { namespace: NAMESPACE, group: GROUP, name: 'big' };
  const all = Array.from({ length: count }, (_, i) => instance(i));
  // The same number of instances, half of them new: a rolling restart of the whole service.
  const shifted = Array.from({ length: count }, (_, i) => instance(i + Math.floor(count / 2)));
  // Needs beats, but none is sent: the wheel does not run.
  const dest = new FakeAdapter('b');
  const figures = { firstSetMs: [] as number[], sameSetMs: [] as number[], overlappingSetMs: [] as number[], clearMs: [] as number[] };
  const gc = (globalThis as { gc?: () => void }).gc;
  for (let round = 0; round < rounds; round += 1) {
    // With --expose-gc, each round starts on a collected heap (steadier figures).
    gc?.();
    const hb = new HeartbeatScheduler({ logger: silentLogger() });
    const owner = `task-${round}\nservice`;
    // A first reconcile registers every copy: all of them are `written`.
    figures.firstSetMs.push(timed(() => hb.set(owner, dest, service, all, all)));
    figures.sameSetMs.push(timed(() => hb.set(owner, dest, service, all)));
    figures.overlappingSetMs.push(timed(() => hb.set(owner, dest, service, shifted, shifted.slice(count - Math.floor(count / 2)))));
    figures.clearMs.push(timed(() => hb.clearPrefix(`task-${round}\n`)));
  }
  const result = {
    instances: count,
    rounds,
    medianMs: Object.fromEntries(Object.entries(figures).map(([name, ms]) => [name, Math.round(median(ms) * 10) / 10])),
  };
  if (values.json) {
    console.log(JSON.stringify(result));
    return;
  }
  console.log(`HeartbeatScheduler with ${count} instances of one service, median of ${rounds} rounds:`);
  console.log(`  set, all written (first reconcile)   ${result.medianMs.firstSetMs} ms`);
  console.log(`  set, the same instances again        ${result.medianMs.sameSetMs} ms`);
  console.log(`  set, half replaced (and written)     ${result.medianMs.overlappingSetMs} ms`);
  console.log(`  clearPrefix of its task              ${result.medianMs.clearMs} ms`);
}

main();
