import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/*
 * Where a CPU profile (`node --cpu-prof`, a .cpuprofile file) says the time went: by category
 * (regsync's code, each npm package, Node internals, GC, idle), by function (self time), and by
 * regsync function including what it calls. Runs on its own too:
 *
 *   node dist/bench/profile-summary.js <file.cpuprofile | directory>
 */

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface TimeShare {
  name: string;
  ms: number;
  share: number;
}

export interface ProfileSummary {
  file: string;
  totalMs: number;
  /** Time not idle: what the process was busy with. */
  busyMs: number;
  categories: TimeShare[];
  /** Self time of single functions, busiest first. */
  selfTop: TimeShare[];
  /** regsync's own functions including their callees, busiest first. */
  inclusiveTop: TimeShare[];
  /**
   * The longest stretches without an idle sample: while one lasts, the event loop answers nothing
   * else (no push, no reconcile step). With what filled each one.
   */
  longestBusy: Array<{ atMs: number; ms: number; top: TimeShare[] }>;
}

/** `node_modules/<pkg>`, `regsync:<dir>`, `node:<internal>`, or a V8 pseudo-frame such as `(garbage collector)`. */
function categoryOf(frame: CallFrame): string {
  const { url, functionName } = frame;
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  const nm = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (nm) return nm[1] as string;
  if (url.startsWith('node:')) return 'node internals';
  const own = /\/dist\/((?:src|adapters)\/[^/]+)\//.exec(url);
  if (own) return `regsync ${own[1] as string}`;
  return url.replace(/^file:\/\//, '');
}

function isOwn(frame: CallFrame): boolean {
  return /\/dist\/(src|adapters)\//.test(frame.url) && !frame.url.includes('node_modules');
}

function labelOf(frame: CallFrame): string {
  const file = frame.url.replace(/^file:\/\/.*?\/(dist\/|node_modules\/)/, '$1').replace(/^node:/, 'node:');
  return `${frame.functionName || '(anonymous)'} ${file}:${frame.lineNumber + 1}`;
}

function top(map: Map<string, number>, totalMs: number, n: number): TimeShare[] {
  return [...map.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([name, us]) => ({ name, ms: us / 1000, share: us / 1000 / Math.max(totalMs, 1e-9) }));
}

/** Summarizes one .cpuprofile file. */
export function summarizeProfile(file: string, topN = 20): ProfileSummary {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map<number, ProfileNode>();
  const parent = new Map<number, number>();
  for (const node of profile.nodes) {
    byId.set(node.id, node);
    for (const child of node.children ?? []) parent.set(child, node.id);
  }
  // Self time per node in microseconds: each sample's delta belongs to the node it hit.
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));

  const categories = new Map<string, number>();
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    totalUs += us;
    const frame = node.callFrame;
    if (frame.functionName === '(idle)') idleUs += us;
    const category = categoryOf(frame);
    categories.set(category, (categories.get(category) ?? 0) + us);
    if (frame.functionName !== '(idle)' && frame.functionName !== '(program)') self.set(labelOf(frame), (self.get(labelOf(frame)) ?? 0) + us);
    // Every regsync function on the stack gets the time once (recursion counted once).
    const seen = new Set<string>();
    for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
      const f = byId.get(cur)?.callFrame;
      if (!f || !isOwn(f)) continue;
      const label = labelOf(f);
      if (seen.has(label)) continue;
      seen.add(label);
      inclusive.set(label, (inclusive.get(label) ?? 0) + us);
    }
  }
  const totalMs = totalUs / 1000;

  // Busy stretches: runs of samples none of which is (idle).
  const stretches: Array<{ startUs: number; us: number; nodes: Map<number, number> }> = [];
  let clock = 0;
  let current: { startUs: number; us: number; nodes: Map<number, number> } | undefined;
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i] ?? 0;
    clock += dt;
    const idle = byId.get(id)?.callFrame.functionName === '(idle)';
    if (idle) {
      if (current) stretches.push(current);
      current = undefined;
      return;
    }
    current ??= { startUs: clock, us: 0, nodes: new Map() };
    current.us += dt;
    current.nodes.set(id, (current.nodes.get(id) ?? 0) + dt);
  });
  if (current) stretches.push(current);
  const longestBusy = stretches
    .sort((x, y) => y.us - x.us)
    .slice(0, 5)
    .map((st) => {
      const fns = new Map<string, number>();
      for (const [id, us] of st.nodes) {
        const f = byId.get(id)?.callFrame;
        if (f) fns.set(labelOf(f), (fns.get(labelOf(f)) ?? 0) + us);
      }
      return { atMs: st.startUs / 1000, ms: st.us / 1000, top: top(fns, st.us / 1000, 5) };
    });
  return {
    file,
    totalMs,
    busyMs: (totalUs - idleUs) / 1000,
    categories: top(categories, totalMs, topN),
    selfTop: top(self, totalMs, topN),
    inclusiveTop: top(inclusive, totalMs, topN),
    longestBusy,
  };
}

/** The .cpuprofile files of a directory (or the file itself). */
export function profileFiles(path: string): string[] {
  if (path.endsWith('.cpuprofile')) return [path];
  return readdirSync(path)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => join(path, f));
}

/** A readable report of a summary. */
export function formatProfileSummary(s: ProfileSummary): string {
  const pct = (x: number) => `${(x * 100).toFixed(1).padStart(5)}%`;
  const rows = (items: TimeShare[]) => items.map((t) => `  ${pct(t.share)}  ${String(Math.round(t.ms)).padStart(7)} ms  ${t.name}`);
  return [
    `CPU profile ${s.file}`,
    `  ${Math.round(s.totalMs)} ms sampled, ${Math.round(s.busyMs)} ms busy (${pct(s.busyMs / Math.max(s.totalMs, 1e-9)).trim()})`,
    'by category (self time):',
    ...rows(s.categories),
    'by function (self time):',
    ...rows(s.selfTop),
    'regsync functions including their callees:',
    ...rows(s.inclusiveTop),
    'longest stretches without idle time (the event loop serves nothing else meanwhile):',
    ...s.longestBusy.flatMap((b) => [`  ${Math.round(b.ms)} ms from ${(b.atMs / 1000).toFixed(2)} s after the process started:`, ...rows(b.top).map((r) => `  ${r}`)]),
  ].join('\n');
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const target = process.argv[2];
  if (!target) {
    console.error('usage: node dist/bench/profile-summary.js <file.cpuprofile | directory>');
    process.exitCode = 2;
  } else {
    for (const file of profileFiles(target)) console.log(formatProfileSummary(summarizeProfile(file, 30)));
  }
}
