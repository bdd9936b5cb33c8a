import { parseArgs } from 'node:util';
import { DEFAULT_VERIFY_INTERVAL_MS } from '../src/model/types.js';

/** The phases of a run, in the order they run. */
export const PHASES = ['raw', 'cold', 'latency', 'zk', 'rest', 'grpc-latency', 'grpc-cold', 'dns', 'consul', 'eureka', 'shards', 'scale'] as const;
/** Phases run only when `--only` names them (minutes at their default size). */
export const OPT_IN_PHASES: readonly Phase[] = ['scale'];
export type Phase = (typeof PHASES)[number];

/** What one run measures and how hard it pushes. */
export interface BenchArgs {
  /** Services of the cold full sync (and of the raw write phase). */
  services: number;
  /** Instances per service of the cold full sync. */
  instances: number;
  /** Registers of the raw write phase; default services x instances, the same work as the cold sync. */
  writes: number;
  /** Requests in flight of the raw write phase. */
  concurrency: number;
  /** Rounds of the raw write phase; the median counts. */
  rawRounds: number;
  /** Rounds of the cold sync, each after a raw round of its own (with the raw phase); the median ratio counts. */
  coldRounds: number;
  /** Services of the warm-up sync run before the measured cold sync (0: none). */
  coldWarmupServices: number;
  /** Seconds the cold sync's (and the sharded phase's) task keeps running after it is done, to measure what a synced, unchanging task costs. */
  idleS: number;
  /** Changes of the propagation phase. */
  changes: number;
  /** Changes per second of the propagation phase. */
  rate: number;
  /** Dubbo interfaces and providers of each, for the ZooKeeper cold sync. */
  zkInterfaces: number;
  zkProviders: number;
  /** Services (one persistent instance each, so as many service syncs) of the sharded phase. */
  shardServices: number;
  /** Lease TTL of a shard's leadership in the sharded phase (`regsync worker --lease-ttl-ms`). */
  shardLeaseTtlMs: number;
  /** Services and ephemeral instances per service of the at-rest phase (HTTP vs gRPC). */
  restServices: number;
  restInstances: number;
  /** Seconds of the at-rest window, and the task's `fullSyncIntervalMs` (the window covers at least one full sync). */
  restIdleS: number;
  restFullSyncMs: number;
  /** Protocols of the at-rest phase, each a run of its own. */
  restProtocols: Array<'v1' | 'grpc'>;
  /** The at-rest phase without the byte-counting relays (regsync talks to the registries directly; no bytes counted). */
  restDirect: boolean;
  /** Push merge windows of the registries in the gRPC latency phase, one run each. */
  mergeWindows: number[];
  /** Services indexed by the DNS phase's server. */
  dnsNames: number;
  /** Seconds of load of each DNS run (regsync's server, then the bare UDP echo). */
  dnsSeconds: number;
  /** Queries in flight in the DNS phase. */
  dnsConcurrency: number;
  /** Registry changes timed until the DNS index serves them. */
  dnsChanges: number;
  /** Services and instances per service of the Consul phase (cold sync each way). */
  consulServices: number;
  consulInstances: number;
  /** Services of the warm-up sync before each direction of the Consul phase (0: none). */
  consulWarmupServices: number;
  /** Services, instances per service and warm-up services of the Eureka phase (as the Consul phase's). */
  eurekaServices: number;
  eurekaInstances: number;
  eurekaWarmupServices: number;
  /** The scale phase: services x ephemeral instances over gRPC, 3 workers with `scaleShards` shards x 2 replicas. */
  scaleServices: number;
  scaleInstances: number;
  scaleShards: number;
  /** The scale task's fullSyncIntervalMs and the rest window (longer, so that it holds a full sync), seconds. */
  scaleFullSyncMs: number;
  /** The scale task's verifyIntervalMs (regsync's default unless given). */
  scaleVerifyMs: number;
  scaleRestS: number;
  /** Longest wait after convergence for A's pushes to stop before the rest window, seconds. */
  scaleSettleS: number;
  /** New services registered after the rest window, each timed until its copies are in B. */
  scaleNewServices: number;
  /** Push merge window of registries A and B in the scale phase. */
  scaleMergeWindowMs: number;
  /** Deadline of the scale phase, seconds (it replaces --phase-timeout there). */
  scaleTimeoutS: number;
  /** Phases to run (default all but the opt-in ones). */
  only: Phase[];
  json: boolean;
  quick: boolean;
  /** Directory for a CPU profile of the regsync process (`node --cpu-prof`); undefined: no profile. */
  profileDir: string | undefined;
  /** Write every timing of the latency phase to a JSON file in dist/bench-logs. */
  trace: boolean;
  /** Extra node flags of the regsync process (e.g. --trace-gc, --max-old-space-size=512). */
  regsyncNodeFlags: string[];
  /** Deadline of each phase, seconds. */
  phaseTimeoutS: number;
  /** Deadline of the whole run, seconds; the run stops by itself after it. */
  timeoutS: number;
}

/** Warm-up writes of the raw phase before its measured `writes`. */
export function rawWarmupWrites(writes: number): number {
  return Math.min(2_000, Math.max(200, Math.round(writes / 10)));
}

export const USAGE = `usage: npm run bench -- [options]

  --services <n>      services of the cold full sync (default 2000; --quick 200)
  --instances <n>     instances per service (default 10; --quick 5)
  --writes <n>        registers of the raw write phase (default services x instances)
  --concurrency <n>   requests in flight of the raw write phase (default 32)
  --raw-rounds <n>    rounds of the raw write phase, each on a fresh registry; the median counts
                      (default 3; --quick 1)
  --cold-rounds <n>   rounds of the cold sync, each in a namespace of its own and (with the raw
                      phase) right after a raw round of its own; the round with the median ratio
                      counts (default 3; --quick 1)
  --cold-warmup <n>   services of a warm-up sync (same instances per service, another namespace)
                      before the measured cold sync, as the raw phase warms up with writes first
                      (default: as many copies as the raw phase's warm-up writes; 0 skips)
  --idle <s>          after the cold sync and the sharded sync, seconds their task keeps running
                      with nothing changing, to measure its standing cost (default 10; --quick 2;
                      0 skips)
  --changes <n>       changes of the propagation phase (default 1000; --quick 200)
  --zk-interfaces <n> Dubbo interfaces of the ZooKeeper cold sync (default 1000; --quick 100)
  --zk-providers <n>  providers per interface (default 5)
  --rate <n>          changes per second of the propagation phase (default 200)
  --shard-services <n>  services (one instance each) of the sharded phase: 3 workers, 8 shards,
                      2 replicas (default 20000; --quick 2000)
  --shard-lease-ttl-ms <ms>  lease TTL of the sharded phase's workers (default 5000, regsync's)
  --rest-services <n> services of the at-rest phase, HTTP vs gRPC (default 2000; --quick 200)
  --rest-instances <n> ephemeral instances per service there (default 10; --quick 5)
  --rest-idle <s>     seconds at rest (default 15; --quick 5); longer than --rest-full-sync-ms for
                      the window to hold a full sync (shorter: the cost without full syncs)
  --rest-full-sync-ms <ms>  the at-rest task's fullSyncIntervalMs (default 10000; --quick 3000)
  --rest-protocols <list>  protocols of the at-rest phase, one run each: v1,grpc (default both;
                      grpc alone for 20,000 x 10, where HTTP would need ~44,000 requests/s)
  --rest-direct       at rest, regsync talks to the registries directly, without the byte-counting
                      relays (bytes are not counted), to tell their cost apart
  --merge-windows <list>  push merge windows (ms) of the registries in grpc-latency, one run each
                      (default 500,20; --quick 500)
  --dns-names <n>     services indexed by the DNS phase's server (default 10000; --quick 1000)
  --dns-seconds <s>   seconds of load per DNS run, regsync's server then a bare UDP echo
                      (default 5; --quick 2)
  --dns-concurrency <n>  DNS queries in flight (default 32)
  --dns-changes <n>   registry changes timed until the DNS index serves them (default 20; --quick 5)
  --consul-services <n>  services of the Consul phase's cold syncs, Nacos -> Consul and
                      Consul -> Nacos (default 1000; --quick 100)
  --consul-instances <n> instances per service there (default 5)
  --consul-warmup <n> services of a warm-up sync before each direction (default: as many copies
                      as the raw rounds' warm-up registrations; 0 skips)
  --eureka-services <n>, --eureka-instances <n>, --eureka-warmup <n>  the same for the Eureka
                      phase, Nacos -> Eureka and Eureka -> Nacos (default 1000, --quick 100; 5; as
                      many copies as the raw warm-up)
  --scale-services <n>  services of the scale phase (default 100000; --quick 1000), each with
  --scale-instances <n> ephemeral instances published over gRPC (default 10; --quick 5)
  --scale-shards <n>  shards of the scale phase's 3 workers, 2 replicas each (default 8)
  --scale-full-sync-ms <ms>  the scale task's fullSyncIntervalMs (default 30000, regsync's; --quick 5000)
  --scale-verify-ms <ms>     the scale task's verifyIntervalMs (default 1800000, regsync's): each full
                      sync checks its share of the service syncs against B
  --scale-rest <s>    seconds at rest once the scale sync settled and then cooled down for one
                      full-sync interval (default 120; --quick 8): longer than --scale-full-sync-ms,
                      so that the window holds full syncs; a resync of the task follows, timed, for
                      the cost of the full sync that verifies every service
  --scale-settle <s>  longest wait after convergence for A's pushes to stop (default 120; --quick 30)
  --scale-new-services <n>  new services after the rest window, each timed until it is in B
                      (default 20; --quick 5)
  --scale-merge-window-ms <ms>  push merge window of the scale phase's registries (default 500, Nacos')
  --scale-timeout <s> deadline of the scale phase (default 900; --quick 180); the whole run's
                      --timeout grows by as much when the phase is selected
  --only <list>       phases to run, comma separated: raw,cold,latency,zk,rest,grpc-latency,
                      grpc-cold,dns,consul,eureka,shards,scale (default all but scale, which runs
                      only when named: minutes at its default size)
  --profile           write a CPU profile of the regsync process (node --cpu-prof) and print
                      where its time went; best with --only (one phase per profile)
  --profile-dir <dir> where the profile goes (default dist/bench-profiles; implies --profile)
  --trace             write every timing of the latency phase (each change, each request A and B
                      received) to a JSON file in dist/bench-logs, for offline analysis
  --regsync-node-flag <flag>  a node flag for the regsync process, e.g. --trace-gc (its output goes
                      to regsync's log); repeatable
  --phase-timeout <s> deadline of each phase in seconds (default 180; --quick 60)
  --timeout <s>       deadline of the whole run in seconds (default 900; --quick 240)
  --quick             small sizes, for a smoke run
  --json              print the results as JSON instead of a table (progress stays on stderr)
  --help              this text
`;

/** Thrown for bad command-line input; the message is meant for the user. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

function positiveInt(name: string, value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${name} expects a positive integer, got ${JSON.stringify(value)}`);
  return n;
}

/** Parses the command line; `undefined` when `--help` was asked for. */
export function parseBenchArgs(argv: string[]): BenchArgs | undefined {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: false,
      options: {
        services: { type: 'string' },
        instances: { type: 'string' },
        writes: { type: 'string' },
        concurrency: { type: 'string' },
        'raw-rounds': { type: 'string' },
        idle: { type: 'string' },
        'cold-warmup': { type: 'string' },
        'cold-rounds': { type: 'string' },
        changes: { type: 'string' },
        rate: { type: 'string' },
        only: { type: 'string' },
        profile: { type: 'boolean' },
        'profile-dir': { type: 'string' },
        'regsync-node-flag': { type: 'string', multiple: true },
        trace: { type: 'boolean' },
        'phase-timeout': { type: 'string' },
        timeout: { type: 'string' },
        quick: { type: 'boolean' },
        'zk-interfaces': { type: 'string' },
        'zk-providers': { type: 'string' },
        'shard-services': { type: 'string' },
        'shard-lease-ttl-ms': { type: 'string' },
        'rest-services': { type: 'string' },
        'rest-instances': { type: 'string' },
        'rest-idle': { type: 'string' },
        'rest-full-sync-ms': { type: 'string' },
        'merge-windows': { type: 'string' },
        'rest-protocols': { type: 'string' },
        'rest-direct': { type: 'boolean' },
        'dns-names': { type: 'string' },
        'dns-seconds': { type: 'string' },
        'dns-concurrency': { type: 'string' },
        'dns-changes': { type: 'string' },
        'consul-services': { type: 'string' },
        'consul-instances': { type: 'string' },
        'consul-warmup': { type: 'string' },
        'eureka-services': { type: 'string' },
        'eureka-instances': { type: 'string' },
        'eureka-warmup': { type: 'string' },
        'scale-services': { type: 'string' },
        'scale-instances': { type: 'string' },
        'scale-shards': { type: 'string' },
        'scale-full-sync-ms': { type: 'string' },
        'scale-verify-ms': { type: 'string' },
        'scale-rest': { type: 'string' },
        'scale-settle': { type: 'string' },
        'scale-new-services': { type: 'string' },
        'scale-merge-window-ms': { type: 'string' },
        'scale-timeout': { type: 'string' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const v = parsed.values;
  if (v.help) return undefined;
  const quick = v.quick ?? false;
  const services = positiveInt('services', v.services, quick ? 200 : 2_000);
  const instances = positiveInt('instances', v.instances, quick ? 5 : 10);
  const only = v.only === undefined ? PHASES.filter((p) => !OPT_IN_PHASES.includes(p)) : v.only.split(',').map((p) => p.trim()).filter((p) => p !== '');
  for (const p of only) {
    if (!(PHASES as readonly string[]).includes(p)) throw new UsageError(`--only: unknown phase "${p}" (expected ${PHASES.join(', ')})`);
  }
  const shardServices = positiveInt('shard-services', v['shard-services'], quick ? 2_000 : 20_000);
  if (shardServices > 1_000_000) throw new UsageError('--shard-services must stay below one million');
  const restServices = positiveInt('rest-services', v['rest-services'], quick ? 200 : 2_000);
  const restInstances = positiveInt('rest-instances', v['rest-instances'], quick ? 5 : 10);
  const restIdleS = positiveInt('rest-idle', v['rest-idle'], quick ? 5 : 15);
  const restFullSyncMs = positiveInt('rest-full-sync-ms', v['rest-full-sync-ms'], quick ? 3_000 : 10_000);
  if (restServices * restInstances > 16_000_000) throw new UsageError('--rest-services x --rest-instances must stay below 16 million');
  const restProtocols = (v['rest-protocols'] ?? 'v1,grpc').split(',').map((x) => x.trim());
  for (const x of restProtocols) if (x !== 'v1' && x !== 'grpc') throw new UsageError(`--rest-protocols: unknown protocol "${x}" (expected v1, grpc)`);
  const mergeWindows = (v['merge-windows'] ?? (quick ? '500' : '500,20')).split(',').map((x) => positiveInt('merge-windows', x.trim(), 500));
  const consulServices = positiveInt('consul-services', v['consul-services'], quick ? 100 : 1_000);
  const consulInstances = positiveInt('consul-instances', v['consul-instances'], 5);
  if (consulServices * consulInstances > 1 << 22) throw new UsageError('--consul-services x --consul-instances must stay below 4 million');
  const eurekaServices = positiveInt('eureka-services', v['eureka-services'], quick ? 100 : 1_000);
  const eurekaInstances = positiveInt('eureka-instances', v['eureka-instances'], 5);
  if (eurekaServices * eurekaInstances > 1 << 22) throw new UsageError('--eureka-services x --eureka-instances must stay below 4 million');
  const warmupOf = (name: string, value: string | undefined, copies: number, perService: number): number =>
    value === '0' ? 0 : positiveInt(name, value, Math.max(1, Math.round(rawWarmupWrites(copies) / perService)));
  const scaleServices = positiveInt('scale-services', v['scale-services'], quick ? 1_000 : 100_000);
  const scaleInstances = positiveInt('scale-instances', v['scale-instances'], quick ? 5 : 10);
  if (scaleServices > 990_000) throw new UsageError('--scale-services must stay below 990,000 (the task\'s maxServices is at most 1,000,000)');
  if ((scaleServices + 1_000) * scaleInstances > 16_000_000) throw new UsageError('--scale-services x --scale-instances must stay below 16 million (one 10.x.y.z address each)');
  const scaleTimeoutS = positiveInt('scale-timeout', v['scale-timeout'], quick ? 180 : 900);
  const timeoutDefault = (quick ? 240 : 900) + (only.includes('scale') ? scaleTimeoutS : 0);
  if (services * instances > 16_000_000) throw new UsageError('--services x --instances must stay below 16 million (one 10.x.y.z address each)');
  return {
    services,
    instances,
    writes: positiveInt('writes', v.writes, services * instances),
    concurrency: positiveInt('concurrency', v.concurrency, 32),
    rawRounds: positiveInt('raw-rounds', v['raw-rounds'], quick ? 1 : 3),
    coldRounds: positiveInt('cold-rounds', v['cold-rounds'], quick ? 1 : 3),
    coldWarmupServices: v['cold-warmup'] === '0' ? 0 : positiveInt('cold-warmup', v['cold-warmup'], Math.max(1, Math.round(rawWarmupWrites(services * instances) / instances))),
    idleS: v.idle === '0' ? 0 : positiveInt('idle', v.idle, quick ? 2 : 10),
    changes: positiveInt('changes', v.changes, quick ? 200 : 1_000),
    rate: positiveInt('rate', v.rate, 200),
    zkInterfaces: positiveInt('zk-interfaces', v['zk-interfaces'], quick ? 100 : 1_000),
    zkProviders: positiveInt('zk-providers', v['zk-providers'], 5),
    shardServices,
    shardLeaseTtlMs: positiveInt('shard-lease-ttl-ms', v['shard-lease-ttl-ms'], 5_000),
    restServices,
    restInstances,
    restIdleS,
    restFullSyncMs,
    restDirect: v['rest-direct'] ?? false,
    restProtocols: restProtocols as Array<'v1' | 'grpc'>,
    mergeWindows,
    dnsNames: positiveInt('dns-names', v['dns-names'], quick ? 1_000 : 10_000),
    dnsSeconds: positiveInt('dns-seconds', v['dns-seconds'], quick ? 2 : 5),
    dnsConcurrency: positiveInt('dns-concurrency', v['dns-concurrency'], 32),
    dnsChanges: positiveInt('dns-changes', v['dns-changes'], quick ? 5 : 20),
    consulServices,
    consulInstances,
    consulWarmupServices: warmupOf('consul-warmup', v['consul-warmup'], consulServices * consulInstances, consulInstances),
    eurekaServices,
    eurekaInstances,
    eurekaWarmupServices: warmupOf('eureka-warmup', v['eureka-warmup'], eurekaServices * eurekaInstances, eurekaInstances),
    scaleServices,
    scaleInstances,
    scaleShards: positiveInt('scale-shards', v['scale-shards'], 8),
    scaleFullSyncMs: positiveInt('scale-full-sync-ms', v['scale-full-sync-ms'], quick ? 5_000 : 30_000),
    scaleVerifyMs: positiveInt('scale-verify-ms', v['scale-verify-ms'], DEFAULT_VERIFY_INTERVAL_MS),
    scaleRestS: positiveInt('scale-rest', v['scale-rest'], quick ? 8 : 120),
    scaleSettleS: positiveInt('scale-settle', v['scale-settle'], quick ? 30 : 120),
    scaleNewServices: v['scale-new-services'] === '0' ? 0 : positiveInt('scale-new-services', v['scale-new-services'], quick ? 5 : 20),
    scaleMergeWindowMs: positiveInt('scale-merge-window-ms', v['scale-merge-window-ms'], 500),
    scaleTimeoutS,
    only: PHASES.filter((p) => only.includes(p)),
    json: v.json ?? false,
    quick,
    profileDir: v['profile-dir'] ?? (v.profile ? 'dist/bench-profiles' : undefined),
    trace: v.trace ?? false,
    regsyncNodeFlags: v['regsync-node-flag'] ?? [],
    phaseTimeoutS: positiveInt('phase-timeout', v['phase-timeout'], quick ? 60 : 180),
    timeoutS: positiveInt('timeout', v.timeout, timeoutDefault),
  };
}
