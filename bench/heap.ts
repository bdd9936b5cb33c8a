import { mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { TestGrpcClient } from '../test/support/grpc-client.js';
import { startBackends, type BenchBackends } from './backends.js';
import { CopyCounter } from './cold-sync.js';
import { publishServices } from './grpc-load.js';
import { serviceName } from './instances.js';
import { processRssMiB } from './proc-stats.js';
import { API_READY, callApi, QueueSampler, repoRoot, startRegsyncCommand, WORKER_READY, type RegsyncCommand } from './regsync.js';

/*
 * Where the memory of a service sync goes: one `regsync worker` (its own process, `--shards 8
 * --replicas 1`, so it holds every service sync once) and a `regsync api` against a private
 * redis-server and two embedded registries A and B in this process, clusters over gRPC. A holds
 * `services` x `instances` ephemeral instances published over one gRPC connection (as Nacos 2.x
 * SDKs do); one `*` task A->B makes a service sync per service. The worker runs with
 * `--heapsnapshot-signal=SIGUSR2`: one snapshot before the task (clusters defined, every shard led),
 * one after convergence and a settle. A snapshot is taken after a full GC, so the difference is what
 * the synced, quiet task holds. It is grouped by node type and name (constructor, closure name,
 * `(string)`...), divided by the service syncs and the copies, and the biggest groups are traced to
 * the retainer chains that hold them (shortest path from the GC roots, as DevTools shows it).
 *
 * RSS and the V8 heap's committed and used sizes (from a diagnostic report, `--report-signal`) are
 * printed too; a snapshot grows the worker's RSS by itself, so take RSS figures with `--rss-only`,
 * and with `--settle-s 60` or so, which lets V8 give back what the convergence left behind.
 *
 *   npx tsc -p tsconfig.bench.json
 *   node --max-old-space-size=8192 dist/bench/heap.js --services 10000 --instances 10
 *   node dist/bench/heap.js --services 10000 --instances 10 --rss-only --settle-s 60
 *
 * `--keep` keeps the snapshots and the logs (in dist/bench-heap/).
 */

const { values: flags } = parseArgs({
  options: {
    services: { type: 'string', default: '1000' },
    instances: { type: 'string', default: '10' },
    'settle-s': { type: 'string', default: '10' },
    top: { type: 'string', default: '25' },
    chains: { type: 'string', default: '10' },
    dir: { type: 'string', default: 'dist/bench-heap' },
    keep: { type: 'boolean', default: false },
    /** RSS only, no snapshots (writing a snapshot grows the worker's RSS by itself). */
    'rss-only': { type: 'boolean', default: false },
  },
});
const SERVICES = Number(flags.services);
const INSTANCES = Number(flags.instances);
const SETTLE_S = Number(flags['settle-s']);
const TOP = Number(flags.top);
const CHAINS = Number(flags.chains);
/** Services of the warm-up task (their own namespace), synced before the baseline. */
const WARM = 5;
const WARM_NAMESPACE = 'heap-warm';

// ---------------------------------------------------------------------------------------------
// The .heapsnapshot format, read without JSON.parse of the whole file (a worker's file is hundreds
// of MB, past V8's string limit): the header and the strings as JSON, nodes and edges as numbers.

interface Snapshot {
  nodeFields: number;
  nodeTypes: string[];
  edgeFields: number;
  edgeTypes: string[];
  nodes: Float64Array;
  edges: Uint32Array;
  strings: string[];
  /** Index into `nodes` (already multiplied by nodeFields) of each node's first edge. */
  firstEdge: Uint32Array;
}

function numbersAt(buf: Buffer, start: number, count: number, into: Float64Array | Uint32Array): number {
  let i = start;
  let n = 0;
  while (n < count) {
    let c = buf[i] as number;
    while (c < 48 || c > 57) {
      i += 1;
      c = buf[i] as number;
    }
    let v = 0;
    while (c >= 48 && c <= 57) {
      v = v * 10 + (c - 48);
      i += 1;
      c = buf[i] as number;
    }
    into[n] = v;
    n += 1;
  }
  return i;
}

function readSnapshot(file: string): Snapshot {
  const buf = readFileSync(file);
  const nodesAt = buf.indexOf('"nodes":[');
  const header = JSON.parse(`${buf.subarray(0, nodesAt).toString('utf8').replace(/,\s*$/, '')}}`) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]]; edge_fields: string[]; edge_types: [string[]] }; node_count: number; edge_count: number };
  };
  const meta = header.snapshot.meta;
  const nodeFields = meta.node_fields.length;
  const edgeFields = meta.edge_fields.length;
  const nodes = new Float64Array(header.snapshot.node_count * nodeFields);
  const afterNodes = numbersAt(buf, nodesAt + 9, nodes.length, nodes);
  const edgesAt = buf.indexOf('"edges":[', afterNodes);
  const edges = new Uint32Array(header.snapshot.edge_count * edgeFields);
  numbersAt(buf, edgesAt + 9, edges.length, edges);
  const stringsAt = buf.indexOf('"strings":[', edgesAt);
  const end = buf.lastIndexOf(']');
  const strings = JSON.parse(buf.subarray(stringsAt + 10, end + 1).toString('utf8')) as string[];
  const firstEdge = new Uint32Array(header.snapshot.node_count + 1);
  const edgeCountAt = meta.node_fields.indexOf('edge_count');
  let e = 0;
  for (let n = 0; n < header.snapshot.node_count; n += 1) {
    firstEdge[n] = e;
    e += (nodes[n * nodeFields + edgeCountAt] as number) * edgeFields;
  }
  firstEdge[header.snapshot.node_count] = e;
  return { nodeFields, nodeTypes: meta.node_types[0], edgeFields, edgeTypes: meta.edge_types[0], nodes, edges, strings, firstEdge };
}

/** The group a node counts in: its type and, where the name says what it is, its name. */
function groupOf(s: Snapshot, n: number): string {
  const type = s.nodeTypes[s.nodes[n * s.nodeFields] as number] as string;
  const name = s.strings[s.nodes[n * s.nodeFields + 1] as number] as string;
  switch (type) {
    case 'string':
    case 'concatenated string':
    case 'sliced string':
      return '(string)';
    case 'number':
      return '(number)';
    case 'code':
      return '(code)';
    case 'object shape':
      return '(object shape)';
    case 'hidden':
    case 'array':
    case 'native':
    case 'synthetic':
      return `(${type}) ${name.replace(/ \/ .*$/, '')}`.slice(0, 60);
    case 'closure':
      return `closure ${name || '(anonymous)'}`;
    default:
      return name.slice(0, 60);
  }
}

interface Group {
  count: number;
  size: number;
}

function groups(s: Snapshot): Map<string, Group> {
  const out = new Map<string, Group>();
  const count = s.nodes.length / s.nodeFields;
  for (let n = 0; n < count; n += 1) {
    const g = groupOf(s, n);
    const entry = out.get(g) ?? { count: 0, size: 0 };
    entry.count += 1;
    entry.size += s.nodes[n * s.nodeFields + 3] as number;
    out.set(g, entry);
  }
  return out;
}

function totalSize(s: Snapshot): number {
  let sum = 0;
  for (let i = 3; i < s.nodes.length; i += s.nodeFields) sum += s.nodes[i] as number;
  return sum;
}

/** Shortest paths from the root over strong edges: for each node, the node and edge that first reached it. */
interface Paths {
  viaNode: Int32Array;
  viaEdge: Int32Array;
}

function shortestPaths(s: Snapshot): Paths {
  const count = s.nodes.length / s.nodeFields;
  const weak = s.edgeTypes.indexOf('weak');
  const shortcut = s.edgeTypes.indexOf('shortcut');
  const seen = new Uint8Array(count);
  const viaNode = new Int32Array(count).fill(-1);
  const viaEdge = new Int32Array(count).fill(-1);
  const queue = new Uint32Array(count);
  let head = 0;
  let tail = 0;
  seen[0] = 1;
  queue[tail++] = 0;
  while (head < tail) {
    const n = queue[head++] as number;
    for (let e = s.firstEdge[n] as number; e < (s.firstEdge[n + 1] as number); e += s.edgeFields) {
      const type = s.edges[e] as number;
      if (type === weak || type === shortcut) continue;
      const to = (s.edges[e + 2] as number) / s.nodeFields;
      if (seen[to] === 1) continue;
      seen[to] = 1;
      viaNode[to] = n;
      viaEdge[to] = e;
      queue[tail++] = to;
    }
  }
  return { viaNode, viaEdge };
}

function edgeName(s: Snapshot, e: number): string {
  const type = s.edgeTypes[s.edges[e] as number];
  const name = type === 'element' || type === 'hidden' ? '[]' : (s.strings[s.edges[e + 1] as number] ?? '?');
  return /^\d+$/.test(name) ? '[]' : name.slice(0, 30);
}

/** Built-in containers and V8 internals: a path passes through them on its way to the class that owns the data. */
const GENERIC = /^(Object|Array|Map|Set|WeakMap|WeakSet|Promise|\(.*|system .*|closure .*)$/;

/**
 * Self sizes summed by owner: the nearest object on the node's shortest path from the root whose
 * constructor is a named class of the program (not Object, Array, Map, a context...), with the
 * property through which the path enters it (`PublishSets.entries`). `(root)` when there is none.
 */
function byOwner(s: Snapshot, paths: Paths): Map<string, Group> {
  const count = s.nodes.length / s.nodeFields;
  const owner = new Int32Array(count).fill(-2);
  const labels: string[] = [];
  const labelIds = new Map<string, number>();
  const labelOf = (n: number): number => {
    const stack: number[] = [];
    let at = n;
    let found = -1;
    while (at > 0) {
      if ((owner[at] as number) !== -2) {
        found = owner[at] as number;
        break;
      }
      stack.push(at);
      const up = paths.viaNode[at] as number;
      if (up <= 0) break;
      const g = groupOf(s, up);
      if (!GENERIC.test(g)) {
        const label = `${g}.${edgeName(s, paths.viaEdge[at] as number)}`;
        let id = labelIds.get(label);
        if (id === undefined) {
          id = labels.length;
          labels.push(label);
          labelIds.set(label, id);
        }
        found = id;
        break;
      }
      at = up;
    }
    for (const x of stack) owner[x] = found;
    return found;
  };
  const out = new Map<string, Group>();
  for (let n = 1; n < count; n += 1) {
    const id = labelOf(n);
    const label = id < 0 ? '(root)' : (labels[id] as string);
    const entry = out.get(label) ?? { count: 0, size: 0 };
    entry.count += 1;
    entry.size += s.nodes[n * s.nodeFields + 3] as number;
    out.set(label, entry);
  }
  return out;
}

/** Shortest-path retainer chains of the nodes of `wanted` groups, summed by chain. */
function retainerChains(s: Snapshot, paths: Paths, wanted: Set<string>, depth: number): Map<string, Map<string, Group>> {
  const count = s.nodes.length / s.nodeFields;
  const out = new Map<string, Map<string, Group>>();
  for (let n = 0; n < count; n += 1) {
    const g = groupOf(s, n);
    if (!wanted.has(g)) continue;
    const parts: string[] = [];
    let at = n;
    for (let d = 0; d < depth && (paths.viaNode[at] as number) > 0; d += 1) {
      const up = paths.viaNode[at] as number;
      parts.push(`${groupOf(s, up)}.${edgeName(s, paths.viaEdge[at] as number)}`);
      at = up;
    }
    const chain = parts.join(' <- ') || '(root)';
    const byChain = out.get(g) ?? new Map<string, Group>();
    const entry = byChain.get(chain) ?? { count: 0, size: 0 };
    entry.count += 1;
    entry.size += s.nodes[n * s.nodeFields + 3] as number;
    byChain.set(chain, entry);
    out.set(g, byChain);
  }
  return out;
}

/** `after - before` of two summaries, biggest first. */
function difference(before: Map<string, Group>, after: Map<string, Group>): Array<{ key: string; count: number; size: number }> {
  const keys = new Set([...before.keys(), ...after.keys()]);
  const rows = [...keys].map((key) => {
    const x = after.get(key) ?? { count: 0, size: 0 };
    const y = before.get(key) ?? { count: 0, size: 0 };
    return { key, count: x.count - y.count, size: x.size - y.size };
  });
  return rows.sort((x, y) => y.size - x.size);
}

// ---------------------------------------------------------------------------------------------

/** SIGUSR2 to `pid` (started with --heapsnapshot-signal=SIGUSR2), and the file once complete. */
async function snapshotOf(pid: number, dir: string): Promise<string> {
  const before = new Set(readdirSync(dir));
  process.kill(pid, 'SIGUSR2');
  for (;;) {
    await delay(500);
    const file = readdirSync(dir).find((f) => f.endsWith('.heapsnapshot') && !before.has(f));
    if (file === undefined) continue;
    const path = join(dir, file);
    // Written synchronously by the worker's main thread: complete once it answers on the event loop again.
    const size = statSync(path).size;
    await delay(1000);
    if (statSync(path).size !== size || size === 0) continue;
    const tail = readFileSync(path).subarray(-4).toString();
    if (tail.trimEnd().endsWith(']}')) return path;
  }
}

const kib = (bytes: number) => (bytes / 1024).toFixed(2);

/** SIGURG to `pid` (started with --report-on-signal --report-signal=SIGURG): its V8 heap as the diagnostic report gives it. */
async function heapReport(pid: number, dir: string): Promise<{ committedMiB: number; usedMiB: number }> {
  const before = new Set(readdirSync(dir));
  process.kill(pid, 'SIGURG');
  for (;;) {
    await delay(200);
    const file = readdirSync(dir).find((f) => f.startsWith('report.') && f.endsWith('.json') && !before.has(f));
    if (file === undefined) continue;
    try {
      const report = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { javascriptHeap: { totalCommittedMemory: number; usedMemory: number } };
      return { committedMiB: report.javascriptHeap.totalCommittedMemory / 1048576, usedMiB: report.javascriptHeap.usedMemory / 1048576 };
    } catch {
      // Still being written.
    }
  }
}

async function main(): Promise<void> {
  const root = repoRoot();
  const dir = resolve(root, flags.dir ?? 'dist/bench-heap', `${SERVICES}x${INSTANCES}-${Date.now()}`);
  mkdirSync(dir, { recursive: true });
  const copies = SERVICES * INSTANCES;
  let backends: BenchBackends | undefined;
  let client: TestGrpcClient | undefined;
  let counter: CopyCounter | undefined;
  let queue: QueueSampler | undefined;
  const started: RegsyncCommand[] = [];
  try {
    backends = await startBackends();
    const { redis, a, b } = backends;
    client = await TestGrpcClient.connect(`127.0.0.1:${a.grpcPort}`);
    const t0 = performance.now();
    await publishServices(client, { services: SERVICES, instances: INSTANCES, concurrency: 32 });
    await publishServices(client, { services: WARM, instances: INSTANCES, concurrency: 8, namespace: WARM_NAMESPACE, ipBase: SERVICES * INSTANCES });
    console.log(`A holds ${SERVICES} services x ${INSTANCES} ephemeral instances (gRPC), published in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

    const api = await startRegsyncCommand({ args: ['api', '--listen', '127.0.0.1:0', '--redis', redis.url], ready: API_READY, name: 'heap-api', logDir: dir, logLevel: 'warn' });
    started.push(api);
    const worker = await startRegsyncCommand({
      args: ['worker', '--redis', redis.url, '--shards', '8', '--replicas', '1', '--worker-id', 'heap-w1'],
      ready: WORKER_READY,
      name: 'heap-worker',
      logDir: dir,
      logLevel: 'warn',
      nodeFlags: ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${dir}`, '--report-on-signal', '--report-signal=SIGURG', `--report-directory=${dir}`],
    });
    started.push(worker);
    const pid = worker.proc.pid as number;
    const url = api.ready;
    for (const [id, r] of [['a', a], ['b', b]] as const) {
      await callApi(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [r.endpoint], options: { apiVersion: 'grpc', grpcPort: r.grpcPort } }, 201);
    }
    for (;;) {
      const v = (await callApi(url, 'GET', '/api/v1/shards', undefined, 200)) as { items: Array<{ leader: string | null }> };
      if (v.items.length === 8 && v.items.every((s) => s.leader === 'heap-w1')) break;
      await delay(100);
    }
    // Warm-up: a task of its own over a few services, so that lazily loaded code and caches are in
    // the baseline and the difference holds only what the measured service syncs cost.
    // Tasks of one service each: a second `*` task on the same source is what the measured one must
    // not wait behind.
    const warm = new CopyCounter(b, WARM * INSTANCES, WARM_NAMESPACE);
    for (let s = 0; s < WARM; s += 1) {
      await callApi(url, 'POST', '/api/v1/tasks', { id: `heap-warm-${s}`, source: 'a', destination: 'b', service: serviceName(s), namespace: WARM_NAMESPACE }, 201);
    }
    const warmed = await warm.reached(performance.now() + 120_000);
    warm.close();
    if (warmed === undefined) throw new Error('warm-up task not converged');
    queue = new QueueSampler(redis.url, 8);
    while ((await queue.depth()) > 0) await delay(200);
    await delay(SETTLE_S * 1000);
    const rssBefore = processRssMiB(pid) ?? 0;
    const heapBefore = await heapReport(pid, dir);
    const fileBefore = flags['rss-only'] ? '' : await snapshotOf(pid, dir);
    console.log(`baseline snapshot ${fileBefore} (worker RSS ${rssBefore.toFixed(1)} MiB)`);

    counter = new CopyCounter(b, copies);
    const t1 = performance.now();
    await callApi(url, 'POST', '/api/v1/tasks', { id: 'heap', source: 'a', destination: 'b', service: '*' }, 201);
    const reached = await counter.reached(performance.now() + 600_000);
    if (reached === undefined) throw new Error(`not converged: ${counter.total} / ${copies} copies`);
    console.log(`converged: ${copies} copies after ${((reached - t1) / 1000).toFixed(1)} s`);
    while ((await queue.depth()) > 0) await delay(200);
    await delay(SETTLE_S * 1000);
    const rssAfter = processRssMiB(pid) ?? 0;
    const heapAfter = await heapReport(pid, dir);
    const fileAfter = flags['rss-only'] ? '' : await snapshotOf(pid, dir);
    console.log(`converged snapshot ${fileAfter} (worker RSS ${rssAfter.toFixed(1)} MiB)`);
    for (const p of started.reverse()) await p.stop();
    started.length = 0;
    const rss = (rssAfter - rssBefore) * 1048576;
    console.log(`worker RSS: ${rssBefore.toFixed(1)} -> ${rssAfter.toFixed(1)} MiB; per service sync: ${kib(rss / SERVICES)} KiB; per copy: ${(rss / copies).toFixed(0)} bytes${flags['rss-only'] ? '' : ' (after the baseline snapshot, which grows RSS by itself: see --rss-only)'}`);
    console.log(`worker V8 heap (diagnostic report): committed ${heapBefore.committedMiB.toFixed(1)} -> ${heapAfter.committedMiB.toFixed(1)} MiB, used ${heapBefore.usedMiB.toFixed(1)} -> ${heapAfter.usedMiB.toFixed(1)} MiB; per service sync: committed ${kib(((heapAfter.committedMiB - heapBefore.committedMiB) * 1048576) / SERVICES)} KiB, used ${kib(((heapAfter.usedMiB - heapBefore.usedMiB) * 1048576) / SERVICES)} KiB`);
    if (flags['rss-only']) {
      if (!flags.keep) rmSync(dir, { recursive: true, force: true });
      return;
    }

    report(readSnapshot(fileBefore), readSnapshot(fileAfter), { services: SERVICES, copies });
    if (!flags.keep) rmSync(dir, { recursive: true, force: true });
  } finally {
    counter?.close();
    await queue?.close();
    for (const p of started.reverse()) await p.stop().catch(() => {});
    client?.close();
    await backends?.close();
  }
}

function report(before: Snapshot, after: Snapshot, m: { services: number; copies: number }): void {
  const heapBefore = totalSize(before);
  const heapAfter = totalSize(after);
  const delta = heapAfter - heapBefore;
  const perSync = (bytes: number) => String(Math.round(bytes / m.services)).padStart(7);
  console.log('');
  console.log(`worker heap (snapshot self sizes): ${(heapBefore / 1048576).toFixed(1)} -> ${(heapAfter / 1048576).toFixed(1)} MiB`);
  console.log(`  per service sync: ${kib(delta / m.services)} KiB; per copy: ${(delta / m.copies).toFixed(0)} bytes`);
  const rows = difference(groups(before), groups(after));
  console.log('');
  console.log('biggest groups of the difference (per service sync: bytes, objects)');
  for (const r of rows.slice(0, TOP)) console.log(`  ${perSync(r.size)} B  ${(r.count / m.services).toFixed(2).padStart(7)}  ${r.key}`);
  const pathsBefore = shortestPaths(before);
  const pathsAfter = shortestPaths(after);
  const owners = difference(byOwner(before, pathsBefore), byOwner(after, pathsAfter));
  console.log('');
  console.log('by owner: the nearest named class on the shortest path from the root, and its property (per service sync: bytes, objects)');
  for (const r of owners.slice(0, TOP)) console.log(`  ${perSync(r.size)} B  ${(r.count / m.services).toFixed(2).padStart(7)}  ${r.key}`);
  const wanted = new Set(rows.slice(0, CHAINS).map((r) => r.key));
  const chainsBefore = retainerChains(before, pathsBefore, wanted, 8);
  const chainsAfter = retainerChains(after, pathsAfter, wanted, 8);
  console.log('');
  console.log('top retainer chains of those groups, difference (bytes per service sync)');
  for (const r of rows.slice(0, CHAINS)) {
    console.log(`  ${r.key}`);
    const diff = difference(chainsBefore.get(r.key) ?? new Map<string, Group>(), chainsAfter.get(r.key) ?? new Map<string, Group>());
    for (const x of diff.slice(0, 4)) console.log(`    ${perSync(x.size)} B  ${x.key}`);
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
