import { InvalidArgumentError, type Command } from 'commander';
import { parseServerUrl } from './options.js';

import { buildTopology, formatLag, type ClusterInput, type ClusterStatusInput, type EdgeTone, type NodeHealth, type TaskInput, type Topology } from '../dashboard/topology-model.js';

/*
 * `regsync status`: the dashboard's topology as text or Graphviz DOT, read from the REST API. The
 * graph model is the dashboard's own (src/dashboard/topology-model.ts, no DOM: the Node build
 * keeps it, see src/dashboard/copy-static.mjs), so both draw the same picture.
 */

export { buildTopology, formatLag, type TaskInput } from '../dashboard/topology-model.js';

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
