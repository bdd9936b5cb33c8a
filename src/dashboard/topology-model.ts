/*
 * The topology as data: clusters as nodes, tasks as edges with the tone they are drawn in, edges of
 * one direction between one pair bundled, and a circle layout. No DOM here: the dashboard draws it
 * as SVG, `regsync status` prints it as text or Graphviz DOT, and the unit tests run it in Node.
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

/** Worst first: the tone a bundle is drawn in. */
const SEVERITY: Record<EdgeTone, number> = { failing: 3, held: 2, running: 1, paused: 0 };

/** The tasks of one direction between one pair of clusters, drawn as one arrow. */
export interface EdgeBundle {
  source: string;
  destination: string;
  /** Worst first (failing, held, running, paused), then by task id. */
  edges: TopologyEdge[];
  /** The worst tone of its tasks. */
  tone: EdgeTone;
}

/** Groups edges by (source, destination); the bundles in order of their first task. */
export function bundleEdges(edges: readonly TopologyEdge[]): EdgeBundle[] {
  const bundles = new Map<string, EdgeBundle>();
  for (const e of edges) {
    const key = JSON.stringify([e.source, e.destination]);
    let bundle = bundles.get(key);
    if (bundle === undefined) {
      bundle = { source: e.source, destination: e.destination, edges: [], tone: e.tone };
      bundles.set(key, bundle);
    }
    bundle.edges.push(e);
    if (SEVERITY[e.tone] > SEVERITY[bundle.tone]) bundle.tone = e.tone;
  }
  for (const b of bundles.values()) b.edges.sort((x, y) => SEVERITY[y.tone] - SEVERITY[x.tone] || (x.task < y.task ? -1 : x.task > y.task ? 1 : 0));
  return [...bundles.values()];
}

/** `1.2 s`, `850 ms`, `3 min`; `-` when unknown. */
export function formatLag(ms: number | null): string {
  if (ms === null || !Number.isFinite(ms)) return '-';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${(ms / 3_600_000).toFixed(1)} h`;
}

/** The short label of an arrow: `copies 2 · lag 1.2 s` for one task, `3 tasks · 1 failing` for a bundle. */
export function bundleLabel(bundle: EdgeBundle): string {
  const [first] = bundle.edges;
  if (bundle.edges.length === 1 && first !== undefined) {
    const lag = first.maxLagMs === null ? '' : ` · lag ${formatLag(first.maxLagMs)}`;
    return `copies ${first.copies}${lag}${first.tone === 'running' ? '' : ` · ${first.tone}`}`;
  }
  const counts = (['failing', 'held', 'paused'] as const)
    .map((tone) => [tone, bundle.edges.filter((e) => e.tone === tone).length] as const)
    .filter(([, n]) => n > 0)
    .map(([tone, n]) => ` · ${n} ${tone}`);
  return `${bundle.edges.length} tasks${counts.join('')}`;
}

/** A point of the drawing. */
export interface Point {
  x: number;
  y: number;
}

/** Where the nodes go and how big the drawing is. */
export interface Layout {
  width: number;
  height: number;
  positions: Map<string, Point>;
}

/** Width and height of a node's box in the drawing. */
export const NODE_SIZE = { width: 176, height: 42 } as const;

/**
 * The hub of a star: the node tied by tasks (either way) to most of the others, when there are at
 * least four nodes and it is tied to at least three of them and to 60% of the others; undefined
 * otherwise (rings and meshes stay on the circle).
 */
export function findHub(topology: Topology): string | undefined {
  const n = topology.nodes.length;
  if (n < 4) return undefined;
  const neighbours = new Map<string, Set<string>>();
  const tie = (a: string, b: string) => {
    if (a === b) return;
    let set = neighbours.get(a);
    if (set === undefined) neighbours.set(a, (set = new Set()));
    set.add(b);
  };
  for (const e of topology.edges) {
    tie(e.source, e.destination);
    tie(e.destination, e.source);
  }
  let best: string | undefined;
  let most = 0;
  for (const node of topology.nodes) {
    const count = neighbours.get(node.id)?.size ?? 0;
    if (count > most) [best, most] = [node.id, count];
  }
  return most >= 3 && most >= 0.6 * (n - 1) ? best : undefined;
}

/**
 * Nodes on a circle, in id order, the first at the top: a ring reads as a ring and no two nodes
 * share a spot. A `hub` (see {@link findHub}) goes in the middle, the others around it, so that a
 * star reads as a star. The circle grows with the number of nodes so that neighbouring boxes do not
 * touch; the drawing is `width` wide (scaled to its container) and as high as the circle needs.
 */
export function circleLayout(allIds: readonly string[], width = 960, hub?: string): Layout {
  const ids = hub !== undefined && allIds.includes(hub) ? allIds.filter((id) => id !== hub) : allIds;
  const withHub = (layout: Layout): Layout => {
    if (ids !== allIds && hub !== undefined) layout.positions.set(hub, { x: width / 2, y: layout.height / 2 });
    return layout;
  };
  return withHub(ringLayout(ids, width));
}

function ringLayout(ids: readonly string[], width: number): Layout {
  const n = ids.length;
  const positions = new Map<string, Point>();
  if (n === 0) return { width, height: 80, positions };
  if (n === 1) {
    positions.set(ids[0] as string, { x: width / 2, y: 60 });
    return { width, height: 120, positions };
  }
  // Neighbours at least a box's width (plus room for a label) apart along the circle...
  const radius = Math.max(130, ((NODE_SIZE.width + 40) * n) / (2 * Math.PI));
  const rx = Math.min(radius * 2.2, width / 2 - NODE_SIZE.width / 2 - 10);
  // ...and where the width runs out, a taller ellipse until no two neighbouring boxes touch.
  const place = (ry: number, i: number): Point => {
    const angle = -Math.PI / 2 + (2 * Math.PI * i) / n;
    return { x: width / 2 + rx * Math.cos(angle), y: ry + NODE_SIZE.height / 2 + 25 + ry * Math.sin(angle) };
  };
  const touch = (p: Point, q: Point): boolean => Math.abs(p.x - q.x) < NODE_SIZE.width + 8 && Math.abs(p.y - q.y) < NODE_SIZE.height + 8;
  let ry = radius;
  for (let tries = 0; tries < 60 && ids.some((_, i) => touch(place(ry, i), place(ry, (i + 1) % n))); tries++) ry *= 1.08;
  ids.forEach((id, i) => positions.set(id, place(ry, i)));
  const height = 2 * ry + NODE_SIZE.height + 50;
  return { width, height, positions };
}

/** The geometry of one arrow: a quadratic curve from `start` through `control` to `end`, its label at `label`. */
export interface ArrowPath {
  start: Point;
  control: Point;
  end: Point;
  label: Point;
  /** How the label's text hangs from `label`: away from the curve, on the side it bends to. */
  anchor: 'start' | 'middle' | 'end';
  /** `M x y Q cx cy x y` for an SVG path. */
  d: string;
}

const round = (v: number): number => Math.round(v * 10) / 10;

/**
 * An arrow from one box to another, bent to its right: the arrows of the two directions between a
 * pair bend to opposite sides and never overlap. An arrow alone between its pair bends instead away
 * from `away` (the middle of the drawing), so that the labels of a ring sit outside it rather than
 * crowd its centre. An arrow from a box to itself is a loop above it.
 */
export function arrowPath(from: Point, to: Point, away?: Point): ArrowPath {
  if (from.x === to.x && from.y === to.y) {
    const top = from.y - NODE_SIZE.height / 2;
    const start = { x: from.x - 20, y: top - 2 };
    const end = { x: from.x + 20, y: top - 2 };
    const control = { x: from.x, y: top - 70 };
    return { start, control, end, label: { x: from.x, y: top - 40 }, anchor: 'middle', d: `M ${start.x} ${start.y} Q ${control.x} ${control.y} ${end.x} ${end.y}` };
  }
  const dx = to.x - from.x;
  const dy = to.y - from.y;
  const len = Math.hypot(dx, dy);
  const mid = { x: (from.x + to.x) / 2, y: (from.y + to.y) / 2 };
  // The right-hand normal of the direction (y grows downwards in SVG)...
  let nx = -dy / len;
  let ny = dx / len;
  // ...or the one pointing away from `away`.
  if (away !== undefined && nx * (mid.x - away.x) + ny * (mid.y - away.y) < 0) {
    nx = -nx;
    ny = -ny;
  }
  const bend = Math.max(28, len * 0.16);
  const control = { x: mid.x + nx * bend, y: mid.y + ny * bend };
  const start = exitTowards(from, control, 3);
  const end = exitTowards(to, control, 7);
  // The curve's middle, a little beyond it on the side it bends to.
  const label = { x: 0.25 * start.x + 0.5 * control.x + 0.25 * end.x + nx * 6, y: 0.25 * start.y + 0.5 * control.y + 0.25 * end.y + ny * 6 };
  const anchor = nx > 0.4 ? 'start' : nx < -0.4 ? 'end' : 'middle';
  const r = { start: pt(start), control: pt(control), end: pt(end), label: pt(label), anchor } as const;
  return { ...r, d: `M ${r.start.x} ${r.start.y} Q ${r.control.x} ${r.control.y} ${r.end.x} ${r.end.y}` };
}

const pt = (p: Point): Point => ({ x: round(p.x), y: round(p.y) });

/** Where the ray from a box's centre towards `towards` crosses the box's edge, `gap` beyond it. */
function exitTowards(center: Point, towards: Point, gap: number): Point {
  const dx = towards.x - center.x;
  const dy = towards.y - center.y;
  const hw = NODE_SIZE.width / 2 + gap;
  const hh = NODE_SIZE.height / 2 + gap;
  const tx = dx === 0 ? Infinity : hw / Math.abs(dx);
  const ty = dy === 0 ? Infinity : hh / Math.abs(dy);
  const t = Math.min(tx, ty, 1);
  return { x: center.x + dx * t, y: center.y + dy * t };
}

