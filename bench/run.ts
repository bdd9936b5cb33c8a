import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseBenchArgs, UsageError, USAGE, type BenchArgs } from './args.js';
import { startBackends, type BenchBackends } from './backends.js';
import { measureColdSync, type ColdSyncDeps, type ColdSyncPair, type ColdSyncResult } from './cold-sync.js';
import { measureZooKeeperColdSync } from './zookeeper-cold-sync.js';
import { CpuMeter, processPeakRssMiB } from './proc-stats.js';
import { profileFiles, summarizeProfile } from './profile-summary.js';
import { measurePropagation } from './propagation.js';
import { measureRawWrites } from './raw-write.js';
import { COLD_SYNC_TARGET, formatReport, LATENCY_P99_TARGET_MS, type BenchResult } from './report.js';
import { RedisCommandMeter } from './redis-commands.js';
import { callApi, logProblems, QueueSampler, repoRoot, startRegsyncUp, type RegsyncUp } from './regsync.js';
import { grpcProfiles, measureAtRest, measureGrpcCold, measureGrpcLatency } from './grpc.js';
import { measureSharded } from './sharded.js';
import { measureScale } from './scale.js';
import { measureDns } from './dns.js';
import { measureConsul } from './consul.js';
import { measureEureka } from './eureka.js';
import type { ForeignOptions } from './foreign-registry.js';

/*
 * `npm run bench`: the measurements of regsync's performance on this machine, bounded in time.
 * Everything binds to 127.0.0.1; instance addresses (10.x.y.z) are made up and never contacted.
 *
 *   this process        registries A and B (and C for measurement 1), load generators, bookkeeping
 *   regsync up          a separate process, as in production, so that it and the registries each
 *                       have a core (measurements 2-4)
 *   redis-server        started for the run on a free port, with a private data dir
 *
 * Measurement 5 (sharded) runs last with a deployment of its own: its own redis-server and
 * registries, one `regsync api` and three `regsync worker` processes (see sharded.ts).
 */

/** The sharded phase's deployment: workers, shards, replicas (each shard served by two workers). */
const SHARD_WORKERS = 3;
const SHARD_COUNT = 8;
const SHARD_REPLICAS = 2;
/** New instances registered in A right after the failover, in services of the killed worker's shards. */
const SHARD_FAILOVER_CHANGES = 20;

const started = performance.now();

function progress(line: string): void {
  process.stderr.write(`[bench ${((performance.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}\n`);
}

function describe(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

async function runBench(args: BenchArgs): Promise<BenchResult> {
  const cpuList = cpus();
  const result: BenchResult = {
    machine: {
      node: process.version,
      platform: `${process.platform} ${process.arch}`,
      cpus: cpuList.length,
      cpuModel: cpuList[0]?.model.trim() ?? 'unknown',
      memoryGiB: totalmem() / 2 ** 30,
    },
    parameters: (({ json: _json, ...rest }) => rest)(args),
    raw: undefined,
    cold: undefined,
    latency: undefined,
    zk: undefined,
    rest: undefined,
    grpcLatency: undefined,
    grpcCold: undefined,
    dns: undefined,
    consul: undefined,
    eureka: undefined,
    shards: undefined,
    scale: undefined,
    regsync: undefined,
    errors: [],
    durationMs: 0,
  };
  const phaseMs = args.phaseTimeoutS * 1000;
  try {
    if (args.only.includes('raw')) {
      progress(`(1) raw write rate: ${args.writes.toLocaleString('en-US')} registers, concurrency ${args.concurrency}, ${args.rawRounds} round(s)`);
      try {
        result.raw = await measureRawWrites(
          { writes: args.writes, services: args.services, concurrency: args.concurrency, rounds: args.rawRounds },
          phaseMs,
        );
        progress(`(1) ${result.raw.rounds.map((r) => Math.round(r).toLocaleString('en-US')).join(', ')} writes/s`);
      } catch (err) {
        result.errors.push(`raw write phase: ${describe(err)}`);
      }
    }
    if (args.only.some((p) => p === 'cold' || p === 'latency' || p === 'zk')) {
      try {
        await runSharedPhases(args, result, phaseMs);
      } catch (err) {
        result.errors.push(`setup of phases 2-4: ${describe(err)}`);
      }
    }
    await runGrpcPhases(args, result, phaseMs);
    // The foreign-registry phases: each its own deployment (see bench/foreign-registry.ts).
    const foreign = [
      {
        phase: 'consul',
        label: 'Consul',
        size: [args.consulServices, args.consulInstances, args.consulWarmupServices],
        run: async (o: ForeignOptions) => (result.consul = await measureConsul(o, phaseMs, progress)).errors,
      },
      {
        phase: 'eureka',
        label: 'Eureka',
        size: [args.eurekaServices, args.eurekaInstances, args.eurekaWarmupServices],
        run: async (o: ForeignOptions) => (result.eureka = await measureEureka(o, phaseMs, progress)).errors,
      },
    ] as const;
    for (const f of foreign) {
      if (!args.only.includes(f.phase)) continue;
      const [services, instances, warmupServices] = f.size;
      progress(`${f.phase}: ${services.toLocaleString('en-US')} services x ${instances} instances, Nacos -> ${f.label} and ${f.label} -> Nacos, its own redis-server and registries`);
      try {
        const errors = await f.run({ services, instances, warmupServices, nacosConcurrency: args.concurrency, profileDir: args.profileDir, nodeFlags: args.regsyncNodeFlags });
        for (const e of errors) result.errors.push(`${f.phase} phase: ${e}`);
      } catch (err) {
        result.errors.push(`${f.phase} phase: ${describe(err)}`);
      }
    }
    if (args.only.includes('shards')) {
      const n = args.shardServices.toLocaleString('en-US');
      progress(`(5) sharded sync: ${n} services x 1 instance over ${SHARD_WORKERS} workers (${SHARD_COUNT} shards, ${SHARD_REPLICAS} replicas), its own redis-server and registries`);
      try {
        result.shards = await measureSharded(
          {
            services: args.shardServices,
            workers: SHARD_WORKERS,
            shards: SHARD_COUNT,
            replicas: SHARD_REPLICAS,
            leaseTtlMs: args.shardLeaseTtlMs,
            idleS: args.idleS,
            changes: SHARD_FAILOVER_CHANGES,
            logDir: join(repoRoot(), 'dist', 'bench-logs'),
            nodeFlags: args.regsyncNodeFlags,
          },
          phaseMs,
          progress,
        );
      } catch (err) {
        result.errors.push(`sharded phase: ${describe(err)}`);
      }
    }
    if (args.only.includes('scale')) {
      progress(`scale: ${args.scaleServices.toLocaleString('en-US')} services x ${args.scaleInstances} ephemeral instances over gRPC, ${SHARD_WORKERS} workers (${args.scaleShards} shards, ${SHARD_REPLICAS} replicas), its own redis-server and registries; deadline ${args.scaleTimeoutS} s`);
      try {
        result.scale = await measureScale(
          {
            services: args.scaleServices,
            instances: args.scaleInstances,
            workers: SHARD_WORKERS,
            shards: args.scaleShards,
            replicas: SHARD_REPLICAS,
            leaseTtlMs: args.shardLeaseTtlMs,
            fullSyncIntervalMs: args.scaleFullSyncMs,
            verifyIntervalMs: args.scaleVerifyMs,
            restS: args.scaleRestS,
            settleMaxS: args.scaleSettleS,
            newServices: args.scaleNewServices,
            mergeWindowMs: args.scaleMergeWindowMs,
            concurrency: args.concurrency,
            logDir: join(repoRoot(), 'dist', 'bench-logs'),
            nodeFlags: args.regsyncNodeFlags,
            profileDir: args.profileDir,
          },
          args.scaleTimeoutS * 1000,
          progress,
        );
      } catch (err) {
        result.errors.push(`scale phase: ${describe(err)}`);
      }
    }
    return result;
  } finally {
    result.durationMs = performance.now() - started;
  }
}

/** The Nacos gRPC phases, each with deployments of its own (see grpc.ts). */
async function runGrpcPhases(args: BenchArgs, result: BenchResult, phaseMs: number): Promise<void> {
  const common = { profileDir: args.profileDir, nodeFlags: args.regsyncNodeFlags };
  if (args.only.includes('rest')) {
    try {
      result.rest = await measureAtRest(
        { services: args.restServices, instances: args.restInstances, idleS: args.restIdleS, fullSyncIntervalMs: args.restFullSyncMs, protocols: args.restProtocols, direct: args.restDirect, ...common },
        phaseMs,
        progress,
      );
    } catch (err) {
      result.errors.push(`at-rest phase: ${describe(err)}`);
    }
  }
  if (args.only.includes('dns')) {
    try {
      result.dns = await measureDns({ names: args.dnsNames, concurrency: args.dnsConcurrency, seconds: args.dnsSeconds, changes: args.dnsChanges }, progress);
    } catch (err) {
      result.errors.push(`dns phase: ${describe(err)}`);
    }
  }
  if (args.only.includes('grpc-latency')) {
    try {
      result.grpcLatency = await measureGrpcLatency({ changes: args.changes, rate: args.rate, mergeWindows: args.mergeWindows, ...common }, phaseMs, progress);
    } catch (err) {
      result.errors.push(`grpc latency phase: ${describe(err)}`);
    }
  }
  if (args.only.includes('grpc-cold')) {
    progress(`grpc-cold: ${args.services.toLocaleString('en-US')} services x ${args.instances} instances, ${args.coldRounds} round(s)`);
    try {
      result.grpcCold = await measureGrpcCold(
        { services: args.services, instances: args.instances, rounds: args.coldRounds, concurrency: args.concurrency, warmupServices: args.coldWarmupServices, ...common },
        phaseMs,
        progress,
      );
    } catch (err) {
      result.errors.push(`grpc cold sync phase: ${describe(err)}`);
    }
  }
  if (grpcProfiles.length > 0) result.grpcProfiles = grpcProfiles;
}

/**
 * Phases 2-4, which share one redis-server, registries A and B and one `regsync up`; all of it is
 * stopped again before this returns, so that the sharded phase has the machine to itself.
 */
async function runSharedPhases(args: BenchArgs, result: BenchResult, phaseMs: number): Promise<void> {
  let backends: BenchBackends | undefined;
  let regsync: RegsyncUp | undefined;
  let queue: QueueSampler | undefined;
  try {
    progress('starting redis-server, registries A and B, regsync up');
    backends = await startBackends();
    const { redis, redisClient, a, b, requestsA, requestsB } = backends;
    const logDir = join(repoRoot(), 'dist', 'bench-logs');
    regsync = await startRegsyncUp({ redisUrl: redis.url, logDir, profileDir: args.profileDir, nodeFlags: args.regsyncNodeFlags });
    const up = regsync;
    await callApi(up.url, 'POST', '/api/v1/clusters', { id: 'a', kind: 'nacos', endpoints: [a.endpoint] }, 201);
    await callApi(up.url, 'POST', '/api/v1/clusters', { id: 'b', kind: 'nacos', endpoints: [b.endpoint] }, 201);
    const deployment = JSON.parse((await redisClient.get('regsync:deployment')) ?? '{"shards":1}') as { shards: number };
    queue = new QueueSampler(redis.url, deployment.shards);
    const cpu = new CpuMeter(() => up.proc.pid, redisClient);
    const deps = { a, b, api: up.url, requestsA, requestsB, cpu, redisCommands: new RedisCommandMeter(redisClient), queue, progress };

    if (args.only.includes('cold')) {
      progress(`(2) cold full sync: ${args.services.toLocaleString('en-US')} services x ${args.instances} instances, ${args.coldRounds} round(s)`);
      try {
        result.cold = await coldSyncRounds(args, deps, phaseMs);
      } catch (err) {
        result.errors.push(`cold sync phase: ${describe(err)}`);
      }
    }
    if (args.only.includes('latency')) {
      progress(`(3) propagation latency: ${args.changes} changes at ${args.rate}/s`);
      try {
        const traceFile = args.trace ? join(logDir, `latency-trace-${new Date().toISOString().replace(/[:.]/g, '-')}.json`) : undefined;
        const latency = await measurePropagation(deps, { changes: args.changes, rate: args.rate, traceFile }, phaseMs);
        if (traceFile) progress(`(3) trace written to ${traceFile}`);
        result.latency = {
          ...latency,
          targetP99Ms: LATENCY_P99_TARGET_MS,
          met: latency.lost === 0 && latency.failed === 0 && latency.sent === latency.changes && latency.latencyMs.p99 <= LATENCY_P99_TARGET_MS,
        };
        progress(`(3) p50 ${latency.latencyMs.p50.toFixed(1)} ms, p99 ${latency.latencyMs.p99.toFixed(1)} ms`);
      } catch (err) {
        result.errors.push(`latency phase: ${describe(err)}`);
      }
    }
    if (args.only.includes('zk')) {
      progress(`(4) ZooKeeper cold sync: ${args.zkInterfaces} Dubbo interfaces x ${args.zkProviders} providers`);
      try {
        result.zk = await measureZooKeeperColdSync(deps, { interfaces: args.zkInterfaces, providers: args.zkProviders }, phaseMs);
        progress(`(4) ${(result.zk.elapsedMs / 1000).toFixed(2)} s, ${Math.round(result.zk.copiesPerSecond)} copies/s`);
      } catch (err) {
        result.errors.push(`zookeeper cold sync phase: ${describe(err)}`);
      }
    }
  } finally {
    progress('stopping');
    if (regsync) {
      const peakRssMiB = processPeakRssMiB(regsync.proc.pid);
      await regsync.stop();
      let profile;
      if (regsync.profileDir) {
        try {
          profile = profileFiles(regsync.profileDir).map((f) => summarizeProfile(f, 20));
        } catch (err) {
          result.errors.push(`profile: ${describe(err)}`);
        }
      }
      result.regsync = { logFile: regsync.logFile, peakRssMiB, logProblems: logProblems(regsync.output()), profile };
    }
    await queue?.close();
    await backends?.close();
  }
}

/**
 * Measurement 2 in `coldRounds` rounds, each in a namespace of its own. With the raw phase selected,
 * each round follows a raw round of its own (a fresh registry in this process, regsync idle), so
 * that a round's ratio compares two figures taken a few seconds apart on a machine whose speed
 * drifts; the result is the round with the median ratio, and the ratio is that median.
 */
async function coldSyncRounds(args: BenchArgs, deps: ColdSyncDeps, phaseMs: number): Promise<NonNullable<BenchResult['cold']>> {
  const pairs: ColdSyncPair[] = [];
  const results: ColdSyncResult[] = [];
  for (let k = 1; k <= args.coldRounds; k += 1) {
    let rawWritesPerSecond: number | undefined;
    if (args.only.includes('raw')) {
      const raw = await measureRawWrites({ writes: args.writes, services: args.services, concurrency: args.concurrency, rounds: 1 }, phaseMs);
      if (raw.failed === 0 && !raw.timedOut) rawWritesPerSecond = raw.writesPerSecond;
    }
    const cold = await measureColdSync(
      deps,
      {
        services: args.services,
        instances: args.instances,
        idleS: k === args.coldRounds ? args.idleS : 0,
        warmupServices: k === 1 ? args.coldWarmupServices : 0,
        ...(k === 1 ? {} : { namespace: `cold-${k}`, taskId: `cold-${k}` }),
      },
      phaseMs,
    );
    results.push(cold);
    const ratio = rawWritesPerSecond === undefined ? undefined : cold.copiesPerSecond / rawWritesPerSecond;
    pairs.push({ rawWritesPerSecond, copiesPerSecond: cold.copiesPerSecond, elapsedMs: cold.elapsedMs, timedOut: cold.timedOut, ratio });
    progress(
      `(2) round ${k}: ${(cold.elapsedMs / 1000).toFixed(2)} s, ${Math.round(cold.copiesPerSecond).toLocaleString('en-US')} copies/s` +
        (ratio === undefined ? '' : ` = ${(ratio * 100).toFixed(1)}% of ${Math.round(rawWritesPerSecond as number).toLocaleString('en-US')} writes/s just before`),
    );
  }
  // A timed-out round is shown as it is, not hidden behind a median.
  const failed = results.findIndex((r) => r.timedOut);
  const ranked = pairs.map((p, i) => ({ i, key: p.ratio ?? p.copiesPerSecond })).sort((x, y) => x.key - y.key);
  const shown = failed >= 0 ? failed : (ranked[Math.floor((ranked.length - 1) / 2)] as { i: number }).i;
  const ratioToRaw = pairs[shown]?.ratio;
  return {
    ...(results[shown] as ColdSyncResult),
    pairs,
    ratioToRaw,
    target: COLD_SYNC_TARGET,
    met: ratioToRaw === undefined ? undefined : failed < 0 && ratioToRaw >= COLD_SYNC_TARGET,
  };
}

async function main(argv: string[]): Promise<number> {
  let args: BenchArgs | undefined;
  try {
    args = parseBenchArgs(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`bench: ${err.message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }
  if (!args) {
    process.stdout.write(USAGE);
    return 0;
  }
  // The whole run is bounded: past the deadline it stops, and the exit hooks of test/support kill
  // redis-server and regsync.
  const timeoutS = args.timeoutS;
  const watchdog = setTimeout(() => {
    progress(`the run exceeded --timeout ${timeoutS} s; stopping`);
    process.exit(3);
  }, timeoutS * 1000);
  watchdog.unref();

  const result = await runBench(args);
  process.stdout.write(args.json ? `${JSON.stringify(result, null, 2)}\n` : `\n${formatReport(result)}\n`);
  return result.errors.length > 0 ? 1 : 0;
}

process.exitCode = await main(process.argv.slice(2));
