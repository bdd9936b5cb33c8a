/// <reference lib="dom" />
import { h, replace } from './dom.js';
import { formatCount } from './format.js';
import { badge } from './ui.js';
import { arrowPath, bundleEdges, bundleLabel, circleLayout, findHub, formatLag, NODE_SIZE, type EdgeBundle, type EdgeTone, type NodeHealth, type Topology } from './topology-model.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
const TONES: EdgeTone[] = ['running', 'paused', 'failing', 'held'];
const HEALTH: Record<Exclude<NodeHealth, null>, string> = { ok: 'reachable', partial: 'partly unreachable', failing: 'unreachable', unknown: 'unknown' };

/** An SVG element; text goes in as text nodes, as in {@link h}. */
function svg(tag: string, attrs: Record<string, string | number>, ...children: Array<Node | string>): SVGElement {
  const el = document.createElementNS(SVG_NS, tag) as SVGElement;
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  el.append(...children);
  return el;
}

/** The page a cluster's node links to. */
export function clusterHref(id: string): string {
  return `#/clusters/${encodeURIComponent(id)}`;
}

/** One line per task of a bundle, for its tooltip. */
function bundleTitle(bundle: EdgeBundle): string {
  return bundle.edges
    .map((e) => `${e.task}: ${e.source} → ${e.destination}, ${e.tone}, copies ${formatCount(e.copies)}, max lag ${formatLag(e.maxLagMs)}${e.failing > 0 ? `, ${e.failing} failing` : ''}${e.held > 0 ? `, ${e.held} held` : ''}`)
    .join('\n');
}

/**
 * Draws a {@link Topology} as inline SVG: clusters as boxes on a circle (id, kind, reachability),
 * tasks as curved arrows coloured by tone, the tasks of one direction between one pair bundled into
 * one arrow with a count. A node links to its cluster, an arrow to its task (the worst of a bundle;
 * the tooltip lists them all). The drawing scales to the width of the page, never wider.
 */
export function topologySvg(topology: Topology): Element {
  if (topology.nodes.length === 0) return h('p', { class: 'muted' }, 'No clusters yet.');
  const layout = circleLayout(topology.nodes.map((n) => n.id), 960, findHub(topology));
  const markers = svg(
    'defs',
    {},
    ...TONES.map((tone) =>
      svg('marker', { id: `arrow-${tone}`, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 8, markerHeight: 8, orient: 'auto-start-reverse', class: `tone-${tone}` }, svg('path', { d: 'M 0 0 L 10 5 L 0 10 z' })),
    ),
  );
  const bundles = bundleEdges(topology.edges);
  const pairs = new Set(bundles.map((b) => JSON.stringify([b.source, b.destination])));
  const middle = { x: layout.width / 2, y: layout.height / 2 };
  const edges = bundles.map((bundle) => {
    const from = layout.positions.get(bundle.source);
    const to = layout.positions.get(bundle.destination);
    if (from === undefined || to === undefined) return undefined;
    const reversed = pairs.has(JSON.stringify([bundle.destination, bundle.source]));
    const path = arrowPath(from, to, reversed ? undefined : middle);
    const first = bundle.edges[0];
    const attrs: Record<string, string | number> = {
      class: `edge tone-${bundle.tone}`,
      href: first === undefined ? '#/tasks' : `#/tasks/${encodeURIComponent(first.task)}`,
      'data-edge': `${bundle.source}->${bundle.destination}`,
      'data-tone': bundle.tone,
      'data-tasks': bundle.edges.map((e) => e.task).join(' '),
    };
    return svg(
      'a',
      attrs,
      svg('title', {}, bundleTitle(bundle)),
      svg('path', { d: path.d, class: 'edge-line', 'marker-end': `url(#arrow-${bundle.tone})` }),
      // A wide invisible stroke along the line: a thin curve is hard to hit with a pointer.
      svg('path', { d: path.d, class: 'edge-hit' }),
      svg('text', { x: path.label.x, y: path.label.y, class: 'edge-label', 'text-anchor': path.anchor, 'dominant-baseline': 'middle' }, bundleLabel(bundle)),
    );
  });
  const nodes = topology.nodes.map((node) => {
    const p = layout.positions.get(node.id) as { x: number; y: number };
    const health = node.health === null ? '' : HEALTH[node.health];
    return svg(
      'a',
      { class: `node health-${node.health ?? 'none'}`, href: clusterHref(node.id), 'data-node': node.id },
      svg('title', {}, `${node.id} (${node.kind})${health === '' ? '' : `: ${health}`}`),
      svg('rect', { x: p.x - NODE_SIZE.width / 2, y: p.y - NODE_SIZE.height / 2, width: NODE_SIZE.width, height: NODE_SIZE.height, rx: 6 }),
      svg('text', { x: p.x, y: p.y - 5, class: 'node-id', 'text-anchor': 'middle' }, clip(node.id, 22)),
      svg('text', { x: p.x, y: p.y + 12, class: 'node-kind', 'text-anchor': 'middle' }, health === '' ? node.kind : `${node.kind} · ${health}`),
    );
  });
  return svg(
    'svg',
    { id: 'topology', viewBox: `0 0 ${layout.width} ${layout.height}`, role: 'img', 'aria-label': `${topology.nodes.length} clusters, ${topology.edges.length} tasks` },
    markers,
    ...edges.filter((e): e is SVGElement => e !== undefined),
    ...nodes,
  );
}

function clip(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/** The topology section of the first page, redrawn with every refresh of it. */
export class TopologyPanel {
  readonly el = h('div', { class: 'topology', 'aria-live': 'off' }, h('p', { class: 'loading' }, 'Loading…'));

  render(topology: Topology): void {
    const legend = h(
      'p',
      { class: 'legend' },
      badge('running', 'ok'),
      badge('paused', 'idle'),
      badge('failing', 'bad'),
      badge('held deletion', 'warn'),
      'arrows: source → destination; a box links to its cluster, an arrow to its task',
    );
    replace(this.el, topologySvg(topology), topology.nodes.length === 0 ? null : legend);
  }
}
