import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { startRegistry } from '../src/registry/index.js';
import { TestGrpcClient } from '../test/support/grpc-client.js';
import { startRedis } from '../test/support/redis.js';
import { CopyCounter } from './cold-sync.js';
import { batchHosts, publishServices } from './grpc-load.js';
import { GROUP, NAMESPACE, serviceName } from './instances.js';
import { RedisCommandMeter, type RedisCommands } from './redis-commands.js';
import { callApi, QueueSampler, repoRoot, startRegsyncUp } from './regsync.js';

/*
 * Redis commands per reconcile and per full sync (`INFO commandstats` deltas, every client of the
 * redis-server counted: regsync's store, queues, leases and event log), with what an idle process
 * runs in as long subtracted. Registries A and B in this process, one `regsync up`, clusters over
 * gRPC, a `*` task of `services` x `instances` and a one-service task `one` (its first service):
 *
 * - a reconcile of an unchanged service (`POST /tasks/one/resync`, 20 times),
 * - a reconcile of a changed one (an instance added to it in A, or removed again; 20 times),
 * - a full sync of the `*` task (`POST /tasks/all/resync`: every service reconciled, none changed).
 *
 *   node dist/bench/redis-per-reconcile.js [services=2000] [instances=5]
 */

const services = Number(process.argv[2] ?? 2_000);
const instances = Number(process.argv[3] ?? 5);

async function main(): Promise<void> {
  const redis = await startRedis();
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  const a = await startRegistry({ port: 0 });
  const b = await startRegistry({ port: 0 });
  const regsync = await startRegsyncUp({ redisUrl: redis.url, logDir: join(repoRoot(), 'dist', 'bench-logs') });
  const publisher = await TestGrpcClient.connect(a.grpcEndpoint as string);
  const meter = new RedisCommandMeter(client);
  const deployment = JSON.parse((await client.get('regsync:deployment')) ?? '{"shards":1}') as { shards: number };
  const queue = new QueueSampler(redis.url, deployment.shards);
  const settle = async () => {
    // The queue empty (looked at once a second: each look is a few commands), then 3 s more for
    // status writes and events; the idle rate covers those seconds.
    while ((await queue.depth()) > 0) await delay(1_000);
    await delay(3_000);
  };
  /**
   * Commands of `run` and its settling, less an idle process's in as long; `idlePerS` from a quiet
   * window. A single reconcile is given 4 s (no queue polls, which would count); many are waited for.
   */
  const measure = async (run: () => Promise<void>, idlePerS: Map<string, number>, many = false): Promise<RedisCommands> => {
    await meter.start();
    const t0 = performance.now();
    await run();
    if (many) await settle();
    else await delay(4_000);
    const seconds = (performance.now() - t0) / 1000;
    const got = (await meter.stop()) as RedisCommands;
    const calls = got.calls
      .map((c) => ({ command: c.command, calls: Math.max(0, Math.round(c.calls - (idlePerS.get(c.command) ?? 0) * seconds)) }))
      .filter((c) => c.calls > 0)
      .sort((x, y) => y.calls - x.calls);
    const total = calls.reduce((s, c) => s + c.calls, 0);
    return { total, scripts: calls.filter((c) => c.command === 'evalsha' || c.command === 'eval').reduce((s, c) => s + c.calls, 0), calls };
  };
  const print = (label: string, per: number, c: RedisCommands) => {
    const top = c.calls.slice(0, 12).map((x) => `${x.command} ${(x.calls / per).toFixed(1)}`).join(', ');
    console.log(`${label}: ${(c.total / per).toFixed(1)} commands (${(c.scripts / per).toFixed(1)} scripts) per reconcile; ${top}`);
  };
  try {
    for (const [id, r] of [['a', a], ['b', b]] as const) {
      await callApi(regsync.url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [r.endpoint], options: { apiVersion: 'grpc', grpcPort: r.grpcPort } }, 201);
    }
    await publishServices(publisher, { services, instances });
    const counter = new CopyCounter(b, services * instances);
    await meter.start();
    await callApi(regsync.url, 'POST', '/api/v1/tasks', { id: 'all', source: 'a', destination: 'b', service: '*', options: { fullSyncIntervalMs: 3_600_000 } }, 201);
    await counter.reached(performance.now() + 600_000);
    counter.close();
    await settle();
    const cold = (await meter.stop()) as RedisCommands;
    await delay(3_000);
    // What an idle process runs (BullMQ's blocking fetches, leases, membership), per second.
    await meter.start();
    const i0 = performance.now();
    await delay(10_000);
    const idle = (await meter.stop()) as RedisCommands;
    const idleS = (performance.now() - i0) / 1000;
    const idlePerS = new Map(idle.calls.map((c) => [c.command, c.calls / idleS]));
    console.log(`idle: ${(idle.total / idleS).toFixed(1)} commands/s; ${idle.calls.slice(0, 8).map((x) => `${x.command} ${(x.calls / idleS).toFixed(1)}/s`).join(', ')}`);

    print(`cold sync of ${services} services (idle not subtracted)`, services, cold);
    const one = serviceName(0);
    await callApi(regsync.url, 'POST', '/api/v1/tasks', { id: 'one', source: 'a', destination: 'b', service: one, options: { fullSyncIntervalMs: 3_600_000 } }, 201);
    await settle();
    const repeats = 20;
    const unchanged = await measure(async () => {
      for (let i = 0; i < repeats; i += 1) {
        await callApi(regsync.url, 'POST', '/api/v1/tasks/one/resync', undefined, 202);
        await delay(300);
      }
    }, idlePerS);
    print(`one reconcile, unchanged (${repeats} resyncs of a one-service task, API and control bus included)`, repeats, unchanged);
    const changed = await measure(async () => {
      for (let i = 0; i < repeats; i += 1) {
        const answer = await publisher.naming('BatchInstanceRequest', one, { type: 'batchRegisterInstance', instances: batchHosts(one, 0, instances + (i % 2 === 0 ? 1 : 0)) }, { namespace: NAMESPACE, groupName: GROUP });
        if (answer.body.resultCode !== 200) throw new Error('publish refused');
        await delay(600);
      }
    }, idlePerS);
    // Each change reaches both tasks (`all` and `one`): two reconciles.
    print(`one reconcile, changed (${repeats} changes of one service, an instance added or removed; two tasks read it)`, 2 * repeats, changed);
    const full = await measure(() => callApi(regsync.url, 'POST', '/api/v1/tasks/all/resync', undefined, 202).then(() => undefined), idlePerS, true);
    print(`full sync of ${services} services (resync, nothing changed)`, services, full);
    console.log(`  full sync total: ${full.total} commands for ${services} services`);
  } finally {
    publisher.close();
    await queue.close();
    await regsync.stop();
    client.disconnect();
    await a.close();
    await b.close();
    await redis.cleanup();
  }
}

await main();
