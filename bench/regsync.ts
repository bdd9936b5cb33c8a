import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { shardQueueName, type ReconcileJobData } from '../src/queue/shard-queue.js';
import { ManagedProcess, waitForReady } from '../test/support/server-process.js';

/** The checkout's root: the nearest directory above this file with regsync's package.json (works from bench/ and dist/bench/). */
export function repoRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (;;) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg) && (JSON.parse(readFileSync(pkg, 'utf8')) as { name?: string }).name === 'regsync') return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error('cannot find the regsync checkout above bench/');
    dir = parent;
  }
}

/** A `regsync` command (`up`, `worker`, `api`) running as its own process. */
export interface RegsyncCommand {
  proc: ManagedProcess;
  /** What the first group of the ready pattern matched: the API's URL (`up`, `api`), the worker's id (`worker`). */
  ready: string;
  logFile: string;
  /** Where `--cpu-prof` writes the profile when the process exits; undefined without profiling. */
  profileDir: string | undefined;
  output(): string;
  /** SIGTERM, wait for the exit (the profile is written then). */
  stop(): Promise<void>;
}

/** `regsync up` running as its own process. */
export interface RegsyncUp extends RegsyncCommand {
  url: string;
}

/** What `regsync up` and `regsync api` print once they listen; the first group is the URL. */
export const API_READY = / on (http:\/\/[^\s]+)/;
/** What `regsync worker` prints once it runs; the first group is its id. */
export const WORKER_READY = /regsync worker (\S+) running/;

/**
 * Starts `node bin/regsync.js <args>` as test/support's `startRegsync` does (ManagedProcess:
 * SIGKILLed if this process dies) and waits until its output matches `ready`, plus what a benchmark
 * needs: node flags (`--cpu-prof`) and a log file (`regsync-<name>-<time>.log` in `logDir`) that
 * outlives the process. Its own function because `startRegsync` finds bin/ relative to its source
 * file, which is not where its compiled copy in dist/ sits.
 */
export async function startRegsyncCommand(opts: {
  /** The arguments after `bin/regsync.js`, command first. */
  args: string[];
  /** Printed once the command is up; its first group is returned as `ready`. */
  ready: RegExp;
  /** Part of the log file's name, e.g. `up`, `worker-w1`. */
  name: string;
  logDir: string;
  profileDir?: string | undefined;
  nodeFlags?: string[];
  /** Added to the process' environment. */
  env?: Record<string, string>;
  logLevel?: string;
  timeoutMs?: number;
}): Promise<RegsyncCommand> {
  const root = repoRoot();
  mkdirSync(opts.logDir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const logFile = join(opts.logDir, `regsync-${opts.name}-${stamp}.log`);
  const nodeFlags: string[] = [...(opts.nodeFlags ?? [])];
  let profileDir: string | undefined;
  if (opts.profileDir !== undefined) {
    profileDir = resolve(root, opts.profileDir, `${stamp}-${opts.name}`);
    mkdirSync(profileDir, { recursive: true });
    nodeFlags.push('--cpu-prof', `--cpu-prof-dir=${profileDir}`);
  }
  const proc = new ManagedProcess(process.execPath, [...nodeFlags, join(root, 'bin', 'regsync.js'), ...opts.args], {
    logFile,
    cwd: root,
    env: { ...process.env, ...opts.env, REGSYNC_LOG_LEVEL: opts.logLevel ?? 'info' },
  });
  const output = () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');
  let ready = '';
  await waitForReady(
    proc,
    async () => {
      ready = opts.ready.exec(output())?.[1] ?? '';
      return ready !== '';
    },
    { what: `regsync ${opts.name}`, timeoutMs: opts.timeoutMs ?? 30_000, logFiles: [logFile] },
  );
  return {
    proc,
    ready,
    logFile,
    profileDir,
    output,
    async stop() {
      // A profile of a busy process takes a moment to write; SIGKILL only after 20 s.
      await proc.stop(20_000);
    },
  };
}

/** `node bin/regsync.js up --redis <url> --listen 127.0.0.1:0`, ready once it prints its URL. */
export async function startRegsyncUp(opts: {
  redisUrl: string;
  logDir: string;
  profileDir?: string | undefined;
  nodeFlags?: string[];
  logLevel?: string;
}): Promise<RegsyncUp> {
  const { redisUrl, ...rest } = opts;
  const up = await startRegsyncCommand({ ...rest, args: ['up', '--redis', redisUrl, '--listen', '127.0.0.1:0'], ready: API_READY, name: 'up' });
  return { ...up, url: up.ready };
}

/** Calls regsync's REST API; rejects on a status other than `expect`. */
export async function callApi(url: string, method: string, path: string, body: unknown, expect: number): Promise<unknown> {
  const res = await fetch(`${url}${path}`, {
    method,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  const text = await res.text();
  if (res.status !== expect) throw new Error(`${method} ${path}: expected ${expect}, got ${res.status}: ${text.slice(0, 500)}`);
  return text === '' ? undefined : (JSON.parse(text) as unknown);
}

/** Statistics of regsync's shard queue during a phase. */
export interface QueueStats {
  samples: number;
  /** Most jobs waiting, delayed, prioritized or running at once. */
  maxDepth: number;
  /** Jobs failed (kept by BullMQ) at the end of the phase; each is a reconcile that gave up. */
  failedAtEnd: number;
  /** Depth over time, `[seconds since start, depth]`, one entry per second at most. */
  timeline: Array<[number, number]>;
}

/**
 * Samples the depth of regsync's shard queues (BullMQ `shard-<n>` under the default `regsync:bull`
 * prefix, all of them summed) from outside the process, every `intervalMs`.
 */
export class QueueSampler {
  private readonly redis: Redis;
  private readonly queues: Array<Queue<ReconcileJobData>>;
  private timer: NodeJS.Timeout | undefined;
  private started = 0;
  private stats: QueueStats = { samples: 0, maxDepth: 0, failedAtEnd: 0, timeline: [] };
  private busy = false;
  private lastSecond = -1;

  /** `shards`: how many shards the deployment has (its `regsync:deployment` record). */
  constructor(redisUrl: string, shards: number) {
    this.redis = new Redis(redisUrl, { maxRetriesPerRequest: null });
    this.redis.on('error', () => {});
    this.queues = Array.from({ length: shards }, (_, shard) => new Queue<ReconcileJobData>(shardQueueName(shard), { connection: this.redis, prefix: 'regsync:bull' }));
  }

  /** Jobs waiting, delayed, prioritized or running now, in every shard. */
  async depth(): Promise<number> {
    const all = await Promise.all(this.queues.map((q) => q.getJobCounts('waiting', 'delayed', 'prioritized', 'active', 'waiting-children')));
    return all.reduce((sum, counts) => sum + Object.values(counts).reduce((a, b) => a + b, 0), 0);
  }

  start(intervalMs = 200): void {
    this.stop();
    this.stats = { samples: 0, maxDepth: 0, failedAtEnd: 0, timeline: [] };
    this.started = performance.now();
    this.lastSecond = -1;
    this.timer = setInterval(() => void this.sample(), intervalMs);
  }

  async finish(): Promise<QueueStats> {
    this.stop();
    await this.sample();
    this.stats.failedAtEnd = (await Promise.all(this.queues.map((q) => q.getFailedCount()))).reduce((a, b) => a + b, 0);
    return this.stats;
  }

  async close(): Promise<void> {
    this.stop();
    await Promise.all(this.queues.map((q) => q.close()));
    this.redis.disconnect();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }

  private async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const depth = await this.depth();
      this.stats.samples += 1;
      this.stats.maxDepth = Math.max(this.stats.maxDepth, depth);
      const second = Math.floor((performance.now() - this.started) / 1000);
      if (second !== this.lastSecond) {
        this.lastSecond = second;
        this.stats.timeline.push([second, depth]);
      }
    } catch {
      // Sampling is best effort.
    } finally {
      this.busy = false;
    }
  }
}

/** Warnings and errors in regsync's JSON log, by message, most frequent first. */
export function logProblems(output: string): Array<{ level: string; msg: string; count: number }> {
  const counts = new Map<string, { level: string; msg: string; count: number }>();
  for (const line of output.split('\n')) {
    if (!line.startsWith('{')) continue;
    let entry: { level?: number; msg?: string };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    if ((entry.level ?? 0) < 40) continue;
    const level = (entry.level ?? 0) >= 50 ? 'error' : 'warn';
    const key = `${level}\n${entry.msg ?? ''}`;
    const found = counts.get(key) ?? { level, msg: entry.msg ?? '', count: 0 };
    found.count += 1;
    counts.set(key, found);
  }
  return [...counts.values()].sort((a, b) => b.count - a.count);
}
