import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import type { ShardsView, WorkerView } from '../../src/coord/deployment-view.js';
import { replicasFor, shardOf } from '../../src/coord/index.js';
import { DEFAULT_GROUP, DEFAULT_NAMESPACE, serviceSyncKey } from '../../src/model/index.js';
import { startRegsync, type RegsyncProcess } from './regsync-process.js';
import { makeTempDir, ManagedProcess, removeTempDir } from './server-process.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { api, copiesIn } from './sync-fixture.js';

const BIN = fileURLToPath(new URL('../../bin/regsync.js', import.meta.url));

export type { ShardView, ShardsView, WorkerView } from '../../src/coord/deployment-view.js';

/** What {@link RegsyncCluster.settled} found: both views, read one right after the other. */
export interface ClusterSnapshot {
  shards: ShardsView;
  workers: WorkerView[];
  /** shard -> leader id. */
  leaders: Map<number, string>;
}

/**
 * A multi-process regsync deployment on one Redis, for end-to-end tests: one `regsync api` process and
 * any number of `regsync worker` processes, each started as an operator would (bin/regsync.js, from dist/).
 *
 * Every process started here is stopped by {@link close}, which afterAll should call whatever happened.
 * The output of stopped processes is kept ({@link logs}), so a failing test can show it.
 */
export class RegsyncCluster {
  /** Live worker processes by worker id. */
  readonly workers = new Map<string, RegsyncProcess>();
  api: RegsyncProcess | undefined;
  private readonly all: RegsyncProcess[] = [];
  private readonly finished: Array<{ name: string; output: string }> = [];
  private readonly names = new Map<RegsyncProcess, string>();

  /** Every worker process started, stopping and stopped ones included, by pid: who sent what, to the end. */
  workerPids(): Map<number, string> {
    const pids = new Map<number, string>();
    for (const p of this.all) {
      const name = this.names.get(p);
      if (p.proc.pid !== undefined && name?.startsWith('worker ')) pids.set(p.proc.pid, name.slice('worker '.length));
    }
    return pids;
  }

  constructor(
    readonly redisUrl: string,
    /** Extra arguments of every worker (e.g. `--shards 8 --replicas 2 --lease-ttl-ms 2000`). */
    readonly workerArgs: string[] = [],
    readonly env: NodeJS.ProcessEnv = { REGSYNC_LOG_LEVEL: process.env.REGSYNC_E2E_LOG ?? 'info' },
  ) {}

  /** The API's `http://host:port`. */
  get url(): string {
    if (!this.api) throw new Error('no regsync api process started');
    return this.api.url;
  }

  /** Ids of the worker processes that are running (started here, neither killed nor stopped). */
  liveIds(): string[] {
    return [...this.workers.keys()].sort();
  }

  async startApi(): Promise<RegsyncProcess> {
    const p = await startRegsync(['api', '--listen', '127.0.0.1:0', '--redis', this.redisUrl], { env: this.env });
    this.track(p, 'api');
    this.api = p;
    return p;
  }

  /**
   * Starts `regsync worker --worker-id <id>` and waits for `regsync worker <id> running`. `redisUrl`
   * gives this worker its own way to Redis (a gate a test can cut for it alone).
   */
  async startWorker(id: string, extra: string[] = [], opts: { redisUrl?: string } = {}): Promise<RegsyncProcess> {
    const p = await startRegsync(['worker', '--redis', opts.redisUrl ?? this.redisUrl, '--worker-id', id, ...this.workerArgs, ...extra], {
      ready: /regsync worker (\S+) running/,
      env: this.env,
    });
    this.track(p, `worker ${id}`);
    if (p.url !== id) throw new Error(`worker started with --worker-id ${id} announced itself as ${p.url}`);
    this.workers.set(id, p);
    return p;
  }

  /** kill -9 of a worker; resolves once it is gone. */
  async kill(id: string): Promise<void> {
    const p = this.need(id);
    this.workers.delete(id);
    await p.proc.kill();
    this.keepOutput(p);
  }

  /** SIGTERM of a worker; resolves with its exit code once it exited. */
  async stop(id: string): Promise<number | null> {
    const p = this.need(id);
    this.workers.delete(id);
    return this.stopProcess(p);
  }

  async shards(): Promise<ShardsView> {
    const res = await api(this.url, 'GET', '/api/v1/shards');
    if (res.status !== 200) throw new Error(`GET /api/v1/shards: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as ShardsView;
  }

  async workerViews(): Promise<WorkerView[]> {
    const res = await api(this.url, 'GET', '/api/v1/workers');
    if (res.status !== 200) throw new Error(`GET /api/v1/workers: ${res.status} ${JSON.stringify(res.body)}`);
    return (res.body as { items: WorkerView[] }).items;
  }

  /**
   * A snapshot when the deployment is settled for exactly the live workers started here, or a string
   * saying what is not settled yet (for waitUntil's timeout message, wrap with {@link settledProbe}):
   * every shard has one leader among its replicas; the replicas are the rendezvous set of the live
   * workers (`replicasFor`); `/workers` lists every live worker, and its leads and serves agree with
   * `/shards`; nobody else listed there leads or serves anything. With `preferred`, each leader is also
   * the shard's preferred (first rendezvous) replica, the state the coordinator hands leadership towards.
   */
  async settled(opts: { preferred?: boolean } = {}): Promise<ClusterSnapshot | string> {
    const live = this.liveIds();
    const shards = await this.shards();
    const workers = await this.workerViews();
    const problems: string[] = [];
    const leaders = new Map<number, string>();
    if (shards.items.length !== shards.shards) problems.push(`${shards.items.length} items for ${shards.shards} shards`);
    const r = Math.min(shards.replicas, live.length);
    for (const item of shards.items) {
      const expected = replicasFor(item.shard, live, shards.replicas);
      if (new Set(item.replicas).size !== r || item.replicas.length !== r) problems.push(`shard ${item.shard}: replicas ${item.replicas.join(',')}`);
      if ([...item.replicas].sort().join(',') !== [...expected].sort().join(',')) {
        problems.push(`shard ${item.shard}: replicas ${item.replicas.join(',')}, rendezvous says ${expected.join(',')}`);
      }
      if (item.leader === null) problems.push(`shard ${item.shard}: no leader`);
      else {
        leaders.set(item.shard, item.leader);
        if (!item.replicas.includes(item.leader)) problems.push(`shard ${item.shard}: leader ${item.leader} not among ${item.replicas.join(',')}`);
        if (opts.preferred && item.leader !== expected[0]) problems.push(`shard ${item.shard}: leader ${item.leader}, preferred ${expected[0]}`);
      }
    }
    const byId = new Map(workers.map((w) => [w.id, w]));
    for (const id of live) {
      const w = byId.get(id);
      if (!w) {
        problems.push(`worker ${id} missing from /workers`);
        continue;
      }
      const leads = shards.items.filter((s) => s.leader === id).map((s) => s.shard);
      const serves = shards.items.filter((s) => s.replicas.includes(id)).map((s) => s.shard);
      if (sorted(w.leads).join(',') !== leads.join(',')) problems.push(`worker ${id}: leads ${sorted(w.leads).join(',')}, /shards says ${leads.join(',')}`);
      if (sorted(w.serves).join(',') !== serves.join(',')) problems.push(`worker ${id}: serves ${sorted(w.serves).join(',')}, /shards says ${serves.join(',')}`);
    }
    for (const w of workers) {
      if (!live.includes(w.id) && (w.leads.length > 0 || w.serves.length > 0)) {
        problems.push(`${w.id} (roles ${w.roles.join(',')}, not a live worker) leads ${w.leads.join(',')} serves ${w.serves.join(',')}`);
      }
    }
    return problems.length === 0 ? { shards, workers, leaders } : problems.join('; ');
  }

  /** Output of every process, the stopped ones included, for a failing test. */
  logs(maxLines = 60): string {
    const parts = this.finished.map((f) => ({ name: `${f.name} (ended)`, output: f.output }));
    for (const p of this.all) {
      if (!p.proc.running) continue;
      try {
        parts.push({ name: this.names.get(p) ?? '?', output: p.output() });
      } catch {
        // log file already removed
      }
    }
    return parts.map((p) => `--- ${p.name}, last ${maxLines} lines ---\n${p.output.trimEnd().split('\n').slice(-maxLines).join('\n')}`).join('\n');
  }

  /** Stops every process still running (SIGTERM, SIGKILL after the grace period). */
  async close(): Promise<void> {
    const running = this.all.filter((p) => p.proc.running);
    this.workers.clear();
    this.api = undefined;
    await Promise.all(running.map((p) => this.stopProcess(p).catch(() => null)));
  }

  private track(p: RegsyncProcess, name: string): void {
    this.all.push(p);
    this.names.set(p, name);
  }

  private need(id: string): RegsyncProcess {
    const p = this.workers.get(id);
    if (!p) throw new Error(`no live worker ${id}`);
    return p;
  }

  private keepOutput(p: RegsyncProcess): void {
    try {
      this.finished.push({ name: this.names.get(p) ?? '?', output: p.output() });
    } catch {
      // log file already removed
    }
  }

  private async stopProcess(p: RegsyncProcess): Promise<number | null> {
    // stop() removes the log file: read the output once the process has exited.
    const info = await p.proc.stop();
    this.keepOutput(p);
    await p.stop();
    return info.code;
  }
}

/**
 * {@link RegsyncCluster.settled} as a waitUntil probe: throws the reason while not settled, so that a
 * timeout names what was still wrong.
 */
export function settledProbe(cluster: RegsyncCluster, opts: { preferred?: boolean } = {}): () => Promise<ClusterSnapshot> {
  return async () => {
    const s = await cluster.settled(opts);
    if (typeof s === 'string') throw new Error(`not settled: ${s}`);
    return s;
  };
}

/** The shard of the service sync (task, public/DEFAULT_GROUP/<service>). */
export function shardOfService(taskId: string, service: string, shards: number): number {
  return shardOf(serviceSyncKey({ taskId, service: { namespace: DEFAULT_NAMESPACE, group: DEFAULT_GROUP, name: service } }), shards);
}

function sorted(xs: number[]): number[] {
  return [...xs].sort((a, b) => a - b);
}

/**
 * Runs `regsync <args>` to completion, as runRegsync does, but SIGKILLs it after `timeoutMs` (a command
 * that should have refused to start but kept running) and then reports `timedOut`.
 */
export async function runRegsyncWithin(
  args: string[],
  timeoutMs: number,
): Promise<{ code: number | null; output: string; timedOut: boolean }> {
  const dir = makeTempDir('regsync-cli-');
  const logFile = join(dir, 'out.log');
  const proc = new ManagedProcess(process.execPath, [BIN, ...args], { logFile, env: { ...process.env, REGSYNC_LOG_LEVEL: 'warn' } });
  const timer = new AbortController();
  const outcome = await Promise.race([
    proc.exited,
    delay(timeoutMs, 'timeout' as const, { signal: timer.signal }).catch(() => 'aborted' as const),
  ]);
  timer.abort();
  const timedOut = outcome === 'timeout';
  const info = timedOut ? await proc.kill() : await proc.exited;
  const output = readFileSync(logFile, 'utf8');
  removeTempDir(dir);
  return { code: info.code, output, timedOut };
}

/**
 * Records, at every visible change of `registry`, each copy (of `services`) that was healthy when the
 * watch started, or was seen healthy since, and is now unhealthy or gone. `stop()` ends the recording.
 */
export function watchCopies(registry: RunningRegistry, services: readonly string[]): { violations: string[]; changes: () => number; stop(): void } {
  const tracked = new Set<string>();
  const violations: string[] = [];
  let changes = 0;
  const started = Date.now();
  const bad = new Map<string, string>();
  const look = (): void => {
    for (const service of services) {
      const copies = new Map(copiesIn(registry, service).map((c) => [`${service}/${c.ip}:${c.port}`, c]));
      for (const [key, c] of copies) if (c.healthy) tracked.add(key);
      for (const key of tracked) {
        if (!key.startsWith(`${service}/`)) continue;
        const c = copies.get(key);
        const state = !c ? 'gone' : c.healthy ? undefined : 'unhealthy';
        if (state !== undefined && bad.get(key) !== state) violations.push(`+${Date.now() - started} ms: ${key} ${state}`);
        if (state === undefined) bad.delete(key);
        else bad.set(key, state);
      }
    }
  };
  look();
  const onChange = (): void => {
    changes += 1;
    look();
  };
  registry.store.on('change', onChange);
  return { violations, changes: () => changes, stop: () => registry.store.off('change', onChange) };
}

/** Beats received so far by each copy of `services` in `registry`, by `service/ip:port`. */
export function beatsOf(registry: RunningRegistry, services: readonly string[]): Map<string, number> {
  const beats = new Map<string, number>();
  for (const service of services) for (const c of copiesIn(registry, service)) beats.set(`${service}/${c.ip}:${c.port}`, c.beats);
  return beats;
}

/** True once every copy counted in `since` has received at least `more` beats after it. */
export function beatenSince(registry: RunningRegistry, services: readonly string[], since: Map<string, number>, more: number): boolean {
  const now = beatsOf(registry, services);
  return [...since].every(([key, n]) => (now.get(key) ?? -1) >= n + more);
}

/**
 * Polls `/api/v1/shards` until stopped and records each shard's leaders in the order they showed
 * (consecutive repeats collapsed; null: no leader).
 */
export function sampleLeaders(cluster: RegsyncCluster, everyMs = 100) {
  const leaderHistory = new Map<number, Array<string | null>>();
  let samples = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      try {
        const shards = await cluster.shards();
        samples += 1;
        for (const item of shards.items) {
          const h = leaderHistory.get(item.shard) ?? [];
          if (h[h.length - 1] !== item.leader || h.length === 0) h.push(item.leader);
          leaderHistory.set(item.shard, h);
        }
      } catch {
        // a sample lost while the API is busy; the next one counts
      }
      await delay(everyMs);
    }
  })();
  return {
    leaderHistory,
    samples: () => samples,
    /** Shards whose leadership went back to `id` after another worker had led them. */
    reclaimedBy(id: string): number[] {
      return [...leaderHistory].filter(([, h]) => {
        const other = h.findIndex((l) => l !== null && l !== id);
        return other >= 0 && h.slice(other).includes(id);
      }).map(([shard]) => shard);
    },
    async stop(): Promise<void> {
      running = false;
      await loop;
    },
  };
}

/** One heartbeat that went through a {@link BeatTap}. */
export interface TappedBeat {
  /** `service/ip:port` of the beaten copy (service without the group). */
  copy: string;
  /** Worker id of the process that sent it, `pid <n>` when not one of the cluster's workers, `?` when unknown. */
  by: string;
  /** Date.now() when it arrived. */
  at: number;
}

/** One instance write (register, update or deregister) that went through a {@link BeatTap}. */
export interface TappedWrite extends TappedBeat {
  kind: 'register' | 'update' | 'deregister';
}

/**
 * An HTTP pass-through in front of a registry that records which worker process sends each heartbeat
 * (`PUT /nacos/v1/ns/instance/beat`) and each instance write (`POST`, `PUT`, `DELETE
 * /nacos/v1/ns/instance`). Give regsync `endpoint` instead of the registry's. The sender of a
 * connection is found through /proc (Linux): the socket inode of the client end, then the worker whose
 * file descriptors hold it.
 */
export interface BeatTap {
  endpoint: string;
  beats: TappedBeat[];
  writes: TappedWrite[];
  close(): Promise<void>;
}

const WRITE_KINDS: Record<string, TappedWrite['kind']> = { POST: 'register', PUT: 'update', DELETE: 'deregister' };

export async function startBeatTap(target: RunningRegistry, cluster: RegsyncCluster): Promise<BeatTap> {
  const beats: TappedBeat[] = [];
  const writes: TappedWrite[] = [];
  const senders = new WeakMap<Socket, string>();
  const [targetHost, targetPort] = [target.endpoint.slice(0, target.endpoint.lastIndexOf(':')), Number(target.endpoint.slice(target.endpoint.lastIndexOf(':') + 1))];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const url = new URL(req.url ?? '/', 'http://tap');
      const beat = req.method === 'PUT' && url.pathname === '/nacos/v1/ns/instance/beat';
      const write = url.pathname === '/nacos/v1/ns/instance' ? WRITE_KINDS[req.method ?? ''] : undefined;
      if (beat || write) {
        const params = new URLSearchParams(url.search);
        if (/x-www-form-urlencoded/.test(req.headers['content-type'] ?? '')) for (const [k, v] of new URLSearchParams(body.toString('utf8'))) params.set(k, v);
        const service = (params.get('serviceName') ?? '').split('@@').pop();
        const seen = { copy: `${service}/${params.get('ip')}:${params.get('port')}`, by: senderOf(req.socket), at: Date.now() };
        if (write) writes.push({ ...seen, kind: write });
        else beats.push(seen);
      }
      const upstream = httpRequest(
        { host: targetHost, port: targetPort, method: req.method, path: req.url, headers: { ...req.headers, host: target.endpoint } },
        (answer) => {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on('error', () => res.destroy());
      upstream.end(body);
    });
  });
  // Resolved when the connection comes, and again at a beat if that failed (a worker that has just
  // started may connect before the cluster lists it; /proc may lag under load).
  const senderOf = (socket: Socket): string => {
    const known = senders.get(socket);
    if (known !== undefined) return known;
    // A stopping worker is no longer among `cluster.workers` but may still send: look among them all.
    const pids = cluster.workerPids();
    const pid = pidOfPeer(socket.remotePort ?? 0, (server.address() as AddressInfo).port, [...pids.keys()]);
    if (pid === undefined) return '?';
    const sender = pids.get(pid) ?? `pid ${pid}`;
    senders.set(socket, sender);
    return sender;
  };
  server.on('connection', (socket: Socket) => void senderOf(socket));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    beats,
    writes,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** The pid among `pids` holding the TCP socket 127.0.0.1:`localPort` -> :`remotePort`. */
export function pidOfPeer(localPort: number, remotePort: number, pids: number[]): number | undefined {
  let inode: string | undefined;
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const port = (addr: string | undefined) => parseInt(addr?.split(':').pop() ?? '', 16);
      if (port(f[1]) === localPort && port(f[2]) === remotePort) inode = f[9];
    }
    if (inode !== undefined) break;
  }
  if (inode === undefined) return undefined;
  for (const pid of pids) {
    try {
      for (const fd of readdirSync(`/proc/${pid}/fd`)) {
        try {
          if (readlinkSync(`/proc/${pid}/fd/${fd}`) === `socket:[${inode}]`) return pid;
        } catch {
          // closed meanwhile
        }
      }
    } catch {
      // process gone
    }
  }
  return undefined;
}

/**
 * Copies whose heartbeats, in the order they arrived, went back to a worker after another one had
 * beaten them (A, B, A): two heartbeaters at once. `beats` should span one episode (a takeover), in
 * which leadership of a shard never legitimately returns to a worker that gave it up.
 */
export function interleavedBeats(beats: readonly TappedBeat[]): string[] {
  const runs = new Map<string, string[]>();
  for (const beat of beats) {
    const r = runs.get(beat.copy) ?? [];
    if (r[r.length - 1] !== beat.by) r.push(beat.by);
    runs.set(beat.copy, r);
  }
  return [...runs].filter(([, r]) => new Set(r).size !== r.length).map(([copy, r]) => `${copy}: ${r.join(' -> ')}`);
}
