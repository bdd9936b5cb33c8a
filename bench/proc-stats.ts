import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance, type EventLoopUtilization, type IntervalHistogram } from 'node:perf_hooks';
import type { Redis } from 'ioredis';

/*
 * Where the CPU went during a phase: the regsync process (from /proc), redis-server (its own INFO
 * counters), and this process (process.cpuUsage, plus the event-loop utilization of its main
 * thread, which serves the embedded registries). A process at ~100% of one core is saturated:
 * Node runs JavaScript on one thread.
 */

let clockTicks: number | undefined;

function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    const out = spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' });
    const n = Number(out.stdout?.trim());
    clockTicks = Number.isFinite(n) && n > 0 ? n : 100;
  }
  return clockTicks;
}

/** CPU seconds (user + system) a process used so far; undefined where /proc cannot tell (not Linux, gone). */
export function processCpuSeconds(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces; the fields after its closing parenthesis do not.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks / ticksPerSecond() : undefined;
  } catch {
    return undefined;
  }
}

/** Peak resident set size of a process in MiB (VmHWM), or undefined. */
export function processPeakRssMiB(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const m = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** Resident set size of a process now in MiB (VmRSS), or undefined. */
export function processRssMiB(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** CPU seconds redis-server used so far (user + sys of the main process and its children). */
export async function redisCpuSeconds(redis: Redis): Promise<number | undefined> {
  try {
    const info = await redis.info('cpu');
    let total = 0;
    for (const key of ['used_cpu_sys', 'used_cpu_user', 'used_cpu_sys_children', 'used_cpu_user_children']) {
      const m = new RegExp(`^${key}:([0-9.]+)`, 'm').exec(info);
      if (m) total += Number(m[1]);
    }
    return total;
  } catch {
    return undefined;
  }
}

/** CPU seconds the whole machine spent busy so far (all CPUs; /proc/stat), or undefined. */
export function machineBusySeconds(): number | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? '';
    // cpu user nice system idle iowait irq softirq steal ...: busy = all but idle and iowait.
    const f = line.trim().split(/\s+/).slice(1).map(Number);
    if (f.length < 8 || f.some((x) => !Number.isFinite(x))) return undefined;
    const busy = f.slice(0, 8).reduce((a, b) => a + b, 0) - (f[3] ?? 0) - (f[4] ?? 0);
    return busy / ticksPerSecond();
  } catch {
    return undefined;
  }
}

/** CPU use of each process during one phase, as a share of one core (1 = one core busy all along). */
export interface CpuShares {
  /** Every regsync process metered, summed. */
  regsync: number | undefined;
  /** Each regsync process, in the order the meter was given them; only when it meters several. */
  regsyncEach?: Array<number | undefined>;
  redis: number | undefined;
  /** This process: embedded registries, load generators, bookkeeping (all threads). */
  bench: number;
  /** Event-loop utilization of this process's main thread, which serves registries A, B (and C). */
  benchMainLoop: number;
  /** How late that thread's timers ran (ms): how long a request to A or B could wait before it was even read. */
  benchLoopDelayP99Ms: number;
  benchLoopDelayMaxMs: number;
  /**
   * Everything else the machine did meanwhile (other processes, the kernel's share of networking
   * not charged to ours): well above a few percent means the figures are disturbed.
   */
  others: number | undefined;
}

/** Measures {@link CpuShares} between `start()` and `stop()`. */
export class CpuMeter {
  private wallStart = 0;
  private regsyncStart: Array<number | undefined> = [];
  private redisStart: number | undefined;
  private benchStart: NodeJS.CpuUsage = { user: 0, system: 0 };
  private eluStart: EventLoopUtilization | undefined;
  private delay: IntervalHistogram | undefined;
  private machineStart: number | undefined;

  /** `regsyncPid`: the regsync process, or several (their shares are summed, and kept one by one). */
  constructor(
    private readonly regsyncPid: () => number | undefined | ReadonlyArray<number | undefined> = () => undefined,
    private readonly redis: Redis | undefined = undefined,
  ) {}

  async start(): Promise<void> {
    this.wallStart = performance.now();
    this.regsyncStart = this.pids().map(processCpuSeconds);
    this.redisStart = this.redis ? await redisCpuSeconds(this.redis) : undefined;
    this.machineStart = machineBusySeconds();
    this.benchStart = process.cpuUsage();
    this.eluStart = performance.eventLoopUtilization();
    this.delay?.disable();
    this.delay = monitorEventLoopDelay({ resolution: 5 });
    this.delay.enable();
  }

  async stop(): Promise<CpuShares> {
    const wallS = Math.max(1e-6, (performance.now() - this.wallStart) / 1000);
    const pids = this.pids();
    const each = pids.map((pid, i) => {
      const now = processCpuSeconds(pid);
      const then = this.regsyncStart[i];
      return now !== undefined && then !== undefined ? (now - then) / wallS : undefined;
    });
    const known = each.filter((x): x is number => x !== undefined);
    const redis = this.redis ? await redisCpuSeconds(this.redis) : undefined;
    const machine = machineBusySeconds();
    const bench = process.cpuUsage(this.benchStart);
    const elu = performance.eventLoopUtilization(this.eluStart);
    this.delay?.disable();
    // The histogram counts in nanoseconds and includes the 5 ms resolution itself.
    const late = (ns: number | undefined) => Math.max(0, (ns ?? 0) / 1e6 - 5);
    const delayP99 = late(this.delay?.percentile(99));
    const delayMax = late(this.delay?.max);
    const shares = {
      regsync: known.length === 0 ? undefined : known.reduce((a, b) => a + b, 0),
      redis: redis !== undefined && this.redisStart !== undefined ? (redis - this.redisStart) / wallS : undefined,
      bench: (bench.user + bench.system) / 1e6 / wallS,
    };
    const machineShare = machine !== undefined && this.machineStart !== undefined ? (machine - this.machineStart) / wallS : undefined;
    return {
      ...shares,
      ...(pids.length > 1 ? { regsyncEach: each } : {}),
      others: machineShare === undefined ? undefined : Math.max(0, machineShare - shares.bench - (shares.regsync ?? 0) - (shares.redis ?? 0)),
      benchMainLoop: elu.utilization,
      benchLoopDelayP99Ms: delayP99,
      benchLoopDelayMaxMs: delayMax,
    };
  }

  private pids(): Array<number | undefined> {
    const p = this.regsyncPid();
    return typeof p === 'number' || p === undefined ? [p] : [...p];
  }
}
