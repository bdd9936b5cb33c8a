import { InvalidArgumentError, type Command } from 'commander';
import { parseServerUrl } from './options.js';

/*
 * `regsync status`: the dashboard's topology as text or Graphviz DOT, read from the REST API.
 *
 * The graph model below is a copy of the dashboard's (src/dashboard/topology-model.ts): the
 * dashboard is built on its own for the browser and its modules are not part of the Node build.
 * status-command.test.ts checks that both build the same picture from the same answers.
 */

/** How reachable a cluster is, as `GET /api/v1/clusters:status` says; null when the API did not say. */
export type NodeHealth = 'ok' | 'partial' | 'failing' | 'unknown' | null;

/**
 * How an edge is drawn: `failing` (red) a task error or a service whose last reconcile failed for
 * another reason than a held deletion; `held` (amber) a service holding back a mass deletion and no
 * other failure; `paused` (grey); `running` (green).
 */
export type EdgeTone = 'running' | 'paused' | 'failing' | 'held';

/** A cluster of the picture. */
export interface TopologyNode {
  id: string;
  /** The cluster's kind; `?` for a cluster a task names that the cluster list lacks. */
  kind: string;
  health: NodeHealth;
}

/** A task of the picture. */
export interface TopologyEdge {
  task: string;
  source: string;
  destination: string;
  /** What the operator set: a task in error is still `running`. */
  state: 'running' | 'paused';
  tone: EdgeTone;
  /** Copies held in the destination, summed over the task's services. */
  copies: number;
  maxLagMs: number | null;
  failing: number;
  held: number;
}

/** Clusters sorted by id; tasks by source, destination and id. */
export interface Topology {
  nodes: TopologyNode[];
  edges: TopologyEdge[];
}

/** What the model reads of a cluster (`GET /api/v1/clusters`). */
export interface ClusterInput {
  id: string;
  kind: string;
}

/** What the model reads of a cluster's status (`GET /api/v1/clusters:status`). */
export interface ClusterStatusInput {
  id: string;
  reachability: 'ok' | 'partial' | 'failing' | 'unknown';
}

/** What the model reads of a task (`GET /api/v1/tasks:summary`). */
export interface TaskInput {
  id: string;
  source: string;
  destination: string;
  state: 'running' | 'paused' | 'error';
  error: string | null;
  destinationInstances: number;
  maxLagMs: number | null;
  failing: number;
  held: number;
}

const byId = (a: { id: string }, b: { id: string }): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

const text = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const byPair = (a: TaskInput, b: TaskInput): number => text(a.source, b.source) || text(a.destination, b.destination) || text(a.id, b.id);

/** The tone of a task: see {@link EdgeTone}. Held deletions count among `failing` in the summary. */
export function edgeTone(task: Pick<TaskInput, 'state' | 'error' | 'failing' | 'held'>): EdgeTone {
  if (task.state === 'paused') return 'paused';
  if (task.error !== null || task.failing > task.held) return 'failing';
  if (task.held > 0) return 'held';
  return task.state === 'error' ? 'failing' : 'running';
}

/**
 * Builds the picture from what the API lists. A task whose cluster is missing from the list (deleted
 * after the task, or listed a moment later) still gets its node, of kind `?`.
 */
export function buildTopology(clusters: readonly ClusterInput[], statuses: readonly ClusterStatusInput[] | undefined, tasks: readonly TaskInput[]): Topology {
  const health = new Map((statuses ?? []).map((s) => [s.id, s.reachability]));
  const nodes = new Map<string, TopologyNode>(clusters.map((c) => [c.id, { id: c.id, kind: c.kind, health: statuses === undefined ? null : (health.get(c.id) ?? 'unknown') }]));
  for (const t of tasks) {
    for (const id of [t.source, t.destination]) if (!nodes.has(id)) nodes.set(id, { id, kind: '?', health: null });
  }
  const edges = [...tasks].sort(byPair).map((t) => ({
    task: t.id,
    source: t.source,
    destination: t.destination,
    state: t.state === 'paused' ? ('paused' as const) : ('running' as const),
    tone: edgeTone(t),
    copies: t.destinationInstances,
    maxLagMs: t.maxLagMs,
    failing: t.failing,
    held: t.held,
  }));
  return { nodes: [...nodes.values()].sort(byId), edges };
}

/** `1.2 s`, `850 ms`, `3 min`; `-` when unknown. */
export function formatLag(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return '-';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** How `regsync status` prints. */
export type StatusFormat = 'text' | 'dot';

const HEALTH_WORDS: Record<Exclude<NodeHealth, null>, string> = { ok: 'reachable', partial: 'partly-unreachable', failing: 'unreachable', unknown: 'unknown' };

/** Reads clusters, their reachability and the task summaries from the API at `server`. */
export async function readTopology(server: string, token?: string): Promise<Topology> {
  const [clusters, statuses, tasks] = await Promise.all([
    getList<ClusterInput>(server, token, '/api/v1/clusters'),
    // An older server without the dashboard routes: the picture without reachability.
    getList<ClusterStatusInput>(server, token, '/api/v1/clusters:status').catch(() => undefined),
    getList<TaskInput>(server, token, '/api/v1/tasks:summary'),
  ]);
  return buildTopology(clusters, statuses, tasks);
}

async function getList<T>(server: string, token: string | undefined, path: string): Promise<T[]> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (token !== undefined && token !== '') headers.authorization = `Bearer ${token}`;
  let res: Response;
  try {
    res = await fetch(`${server.replace(/\/$/, '')}${path}`, { headers });
  } catch (err) {
    throw new Error(`cannot reach the regsync API at ${server} (${err instanceof Error ? err.message : String(err)}); is \`regsync up\` running? (--server)`, { cause: err });
  }
  const text = await res.text();
  let body: unknown;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (!res.ok) {
    const error = (body as { error?: { code?: string; message?: string } } | undefined)?.error;
    const hint = res.status === 401 ? ' (the API wants a token: set REGSYNC_API_TOKEN)' : '';
    throw new Error(`GET ${path}: ${res.status} ${error?.code ?? ''} ${error?.message ?? text.slice(0, 200)}`.replace(/\s+/g, ' ').trim() + hint);
  }
  const items = (body as { items?: unknown } | undefined)?.items;
  if (!Array.isArray(items)) throw new Error(`GET ${path}: the answer has no items list`);
  return items as T[];
}

/** The words after a task's state: `failing`, `held`, or nothing. */
function marks(tone: EdgeTone): string {
  return tone === 'failing' || tone === 'held' ? `  ${tone}` : '';
}

/**
 * One line per cluster (`cluster  <id>  <kind>  <health>`), then one per task
 * (`<a> -> <b>  <task>  running|paused  copies N  lag X  [failing|held]`), columns aligned.
 */
export function formatStatusText(topology: Topology): string {
  const lines: string[] = [];
  const idWidth = Math.max(0, ...topology.nodes.map((n) => n.id.length));
  const kindWidth = Math.max(0, ...topology.nodes.map((n) => n.kind.length));
  for (const n of topology.nodes) {
    const health = n.health === null ? '' : `  ${HEALTH_WORDS[n.health]}`;
    lines.push(`cluster  ${n.id.padEnd(idWidth)}  ${n.kind.padEnd(kindWidth)}${health}`.trimEnd());
  }
  if (topology.nodes.length === 0) lines.push('no clusters');
  const pairs = topology.edges.map((e) => `${e.source} -> ${e.destination}`);
  const pairWidth = Math.max(0, ...pairs.map((p) => p.length));
  const taskWidth = Math.max(0, ...topology.edges.map((e) => e.task.length));
  topology.edges.forEach((e, i) => {
    const lag = e.maxLagMs === null ? '-' : formatLag(e.maxLagMs).replace(' ', '');
    lines.push(`${(pairs[i] as string).padEnd(pairWidth)}  ${e.task.padEnd(taskWidth)}  ${e.state.padEnd(7)}  copies ${e.copies}  lag ${lag}${marks(e.tone)}`);
  });
  if (topology.edges.length === 0) lines.push('no tasks');
  return `${lines.join('\n')}\n`;
}

/** Colours of the DOT output: the dashboard's light palette. */
export const DOT_COLOURS: Record<EdgeTone | 'unknown' | 'partial' | 'ok', string> = {
  running: '#1b7f3b',
  ok: '#1b7f3b',
  paused: '#6b7780',
  unknown: '#6b7780',
  failing: '#b3261e',
  held: '#9a6400',
  partial: '#9a6400',
};

/** A DOT string of lines: quoted, `"` and `\\` escaped, lines joined by DOT's `\\n` (ids come from operators). */
function q(...lines: string[]): string {
  return `"${lines.map((l) => l.replace(/[\\"]/g, (c) => `\\${c}`).replace(/[\r\n]+/g, ' ')).join('\\n')}"`;
}

/**
 * The topology as a Graphviz `digraph`: clusters as boxes (outline coloured by reachability), tasks
 * as edges coloured by tone (paused dashed), labelled with the task id, copies and max lag; each
 * element carries a `tooltip` and the tone in `class`. Render with `dot -Tsvg`.
 */
export function formatStatusDot(topology: Topology): string {
  const lines = ['digraph regsync {', '  rankdir=LR;', '  node [shape=box, style="rounded", fontname="sans-serif"];', '  edge [fontname="sans-serif", fontsize=10];'];
  for (const n of topology.nodes) {
    const health = n.health ?? 'unknown';
    const colour = DOT_COLOURS[health];
    const label = q(n.id, n.health === null ? n.kind : `${n.kind}, ${HEALTH_WORDS[n.health]}`);
    lines.push(`  ${q(n.id)} [label=${label}, color=${q(colour)}, class=${q(`health-${health}`)}];`);
  }
  for (const e of topology.edges) {
    const lag = e.maxLagMs === null ? '' : ` lag ${formatLag(e.maxLagMs)}`;
    const label = q(e.task, `copies ${e.copies}${lag}${e.tone === 'failing' || e.tone === 'held' ? ` ${e.tone}` : ''}`);
    const style = e.tone === 'paused' ? ', style=dashed' : e.tone === 'failing' ? ', penwidth=2' : '';
    lines.push(`  ${q(e.source)} -> ${q(e.destination)} [label=${label}, color=${q(DOT_COLOURS[e.tone])}, fontcolor=${q(DOT_COLOURS[e.tone])}, class=${q(`tone-${e.tone}`)}${style}];`);
  }
  lines.push('}');
  return `${lines.join('\n')}\n`;
}

/** Adds `regsync status [--server URL] [--format text|dot]`. */
export function addStatusCommand(program: Command): void {
  program
    .command('status')
    .description('clusters and tasks as a picture: one line each (text) or a Graphviz digraph (dot)')
    .option('--server <url>', 'the regsync REST API: http(s)://host:port, or host:port for http (also REGSYNC_API)', parseServerUrl, process.env.REGSYNC_API ?? 'http://127.0.0.1:8080')
    .option('--format <format>', 'text or dot', parseFormat, 'text' as StatusFormat)
    .action(async (opts: { server: string; format: StatusFormat }) => {
      // A token comes from the environment only, as for `regsync apply`.
      const topology = await readTopology(parseServerUrl(opts.server), process.env.REGSYNC_API_TOKEN);
      process.stdout.write(opts.format === 'dot' ? formatStatusDot(topology) : formatStatusText(topology));
    });
}

function parseFormat(value: string): StatusFormat {
  if (value === 'text' || value === 'dot') return value;
  throw new InvalidArgumentError('expected text or dot');
}
