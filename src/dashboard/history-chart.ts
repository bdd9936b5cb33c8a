/// <reference lib="dom" />
import { h } from './dom.js';
import { formatCount, formatDuration, truncate } from './format.js';

/** One sample of `GET /api/v1/tasks/:id/history`. */
export interface HistorySample {
  at: string;
  copies: number;
  maxLagMs: number | null;
  failing: number;
  held: number;
}

/** An event of `GET /api/v1/tasks/:id/events`, as far as the chart marks it. */
export interface ChartEvent {
  at: string;
  kind: string;
  message: string;
}

/** The span the chart shows, ending now. */
export const HISTORY_WINDOW_MS = 60 * 60 * 1000;

const SVG_NS = 'http://www.w3.org/2000/svg';
/** Drawing size of one chart (it scales to the page width; the text scales with it). */
const WIDTH = 640;
const HEIGHT = 120;
/** Room for the value labels on the left and the time labels below. */
const LEFT = 64;
const RIGHT = 8;
const TOP = 10;
const BOTTOM = 22;
/** Events closer than this (drawing units) share one mark: a dense hour stays readable. */
const MARK_SLOT = 8;
/** Lines of a shared mark's title before it says how many more. */
const MARK_TITLE_LINES = 8;
/** Which kind a shared mark shows, the most telling first. */
const KIND_ORDER = ['error', 'held', 'released', 'removed', 'cluster', 'task', 'reconciled'];

/** The plotted points of one series and the top of its scale. */
export interface ChartSeries {
  /** `x,y` pairs in drawing units, oldest first; samples without a value are left out. */
  points: string;
  /** The value at the top of the scale (at least 1, so a flat zero line sits at the bottom). */
  max: number;
}

/**
 * The points of one series over the last hour before `now`: time maps to x across the plot (older
 * samples than the hour are left out), the value to y from 0 at the bottom to the largest value
 * at the top. Pure, so it is tested without a browser.
 */
export function seriesPoints<T extends { at: string } = HistorySample>(samples: readonly NoInfer<T>[], value: (s: T) => number | null, now: number): ChartSeries {
  const start = now - HISTORY_WINDOW_MS;
  const shown = samples.flatMap((s) => {
    const t = Date.parse(s.at);
    const v = value(s);
    return Number.isFinite(t) && t >= start && t <= now && v !== null && Number.isFinite(v) ? [{ t, v }] : [];
  });
  const max = Math.max(1, ...shown.map((p) => p.v));
  const plotW = WIDTH - LEFT - RIGHT;
  const plotH = HEIGHT - TOP - BOTTOM;
  const points = shown
    .map(({ t, v }) => `${(LEFT + ((t - start) / HISTORY_WINDOW_MS) * plotW).toFixed(1)},${(TOP + plotH - (v / max) * plotH).toFixed(1)}`)
    .join(' ');
  return { points, max };
}

/** One mark on the time axis: an event, or the events that fell in one slot. */
export interface EventMark {
  /** Where it sits across the plot, in drawing units (always inside the plot). */
  x: number;
  /** The kind it is coloured by: the most telling of its events (see {@link KIND_ORDER}). */
  kind: string;
  /** How many events it stands for. */
  count: number;
  /** Time, kind and message of each of its events (the first few), for its `<title>`. */
  title: string;
}

/**
 * The marks of the events of the last hour before `now` on the charts' time axis, oldest first:
 * one per event, or one per slot of {@link MARK_SLOT} drawing units where they are dense (so the
 * number of marks is bounded by the width, whatever the number of events). Events outside the
 * hour are left out. Pure.
 */
export function eventMarks(events: readonly ChartEvent[], now: number): EventMark[] {
  const start = now - HISTORY_WINDOW_MS;
  const plotW = WIDTH - LEFT - RIGHT;
  const slots = new Map<number, Array<{ t: number; e: ChartEvent }>>();
  for (const e of events) {
    const t = Date.parse(e.at);
    if (!Number.isFinite(t) || t < start || t > now) continue;
    const slot = Math.min(Math.floor((((t - start) / HISTORY_WINDOW_MS) * plotW) / MARK_SLOT), Math.floor(plotW / MARK_SLOT));
    const list = slots.get(slot) ?? [];
    list.push({ t, e });
    slots.set(slot, list);
  }
  return [...slots.entries()]
    .sort(([a], [b]) => a - b)
    .map(([, list]) => {
      list.sort((a, b) => a.t - b.t);
      const mean = list.reduce((n, p) => n + p.t, 0) / list.length;
      const kind = list.map((p) => p.e.kind).sort((a, b) => rank(a) - rank(b))[0] as string;
      const lines = list.slice(0, MARK_TITLE_LINES).map(({ e }) => `${e.at.slice(11, 19)}Z ${e.kind}: ${truncate(e.message, 160)}`);
      if (list.length > MARK_TITLE_LINES) lines.push(`… and ${list.length - MARK_TITLE_LINES} more`);
      const x = Math.min(WIDTH - RIGHT, Math.max(LEFT, LEFT + ((mean - start) / HISTORY_WINDOW_MS) * plotW));
      return { x: Number(x.toFixed(1)), kind, count: list.length, title: list.length > 1 ? `${list.length} events\n${lines.join('\n')}` : (lines[0] as string) };
    });
}

function rank(kind: string): number {
  const i = KIND_ORDER.indexOf(kind);
  return i === -1 ? KIND_ORDER.length : i;
}

/** A safe class name part for an event kind (kinds come from the server). */
function kindClass(kind: string): string {
  return KIND_ORDER.includes(kind) ? kind : 'other';
}

function svg(tag: string, attrs: Record<string, string | number>, ...children: Array<Node | string>): SVGElement {
  const el = document.createElementNS(SVG_NS, tag) as SVGElement;
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  el.append(...children);
  return el;
}

/**
 * One small chart: a framed plot, the scale's top and zero on the left, the hour below, one line
 * of `series` (a class name: its colour), and the events' marks on the same time axis. Exported
 * for the other charts of the last hour (a cluster's request errors), so there is one drawing.
 */
export function lineChart<T extends { at: string }>(
  series: string,
  title: string,
  samples: readonly T[],
  value: (s: T) => number | null,
  format: (n: number) => string,
  now: number,
  marks: readonly EventMark[] = [],
): SVGElement {
  const { points, max } = seriesPoints(samples, value, now);
  const bottom = HEIGHT - BOTTOM;
  const text = (x: number, y: number, anchor: string, label: string) => svg('text', { x, y, 'text-anchor': anchor, class: 'axis-label' }, label);
  return svg(
    'svg',
    { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: 'history-chart', 'data-series': series, role: 'img', 'aria-label': `${title} over the last hour` },
    svg('title', {}, `${title} over the last hour`),
    svg('rect', { x: LEFT, y: TOP, width: WIDTH - LEFT - RIGHT, height: bottom - TOP, class: 'plot' }),
    text(LEFT - 6, TOP + 10, 'end', format(max)),
    text(LEFT - 6, bottom, 'end', format(0)),
    text(LEFT, HEIGHT - 6, 'start', '60 min ago'),
    text(LEFT + (WIDTH - LEFT - RIGHT) / 2, HEIGHT - 6, 'middle', '30 min ago'),
    text(WIDTH - RIGHT, HEIGHT - 6, 'end', 'now'),
    text(LEFT + 6, TOP + 12, 'start', title),
    svg('polyline', { points, class: `series series-${series}` }),
    // The latest value as a dot, so that a single sample shows too.
    ...lastPoint(points).map(([cx, cy]) => svg('circle', { cx, cy, r: 3, class: `series-dot series-${series}` })),
    ...marks.map((m) =>
      svg(
        'g',
        { class: `event-mark event-${kindClass(m.kind)}`, 'data-kind': m.kind, 'data-count': m.count },
        svg('title', {}, m.title),
        svg('line', { x1: m.x, y1: TOP, x2: m.x, y2: bottom }),
        svg('circle', { cx: m.x, cy: TOP + 4, r: m.count > 1 ? 4 : 3 }),
      ),
    ),
  );
}

function lastPoint(points: string): Array<[string, string]> {
  const last = points.split(' ').at(-1)?.split(',');
  return last && last.length === 2 ? [[last[0] as string, last[1] as string]] : [];
}

/**
 * A task's copies and max lag over the last hour as two small inline SVG charts (no library),
 * each scaled to the page width, with the task's `events` marked on both (coloured by kind, the
 * details in each mark's title); a sentence instead while no sample was taken.
 */
export function historyCharts(samples: readonly HistorySample[], now: number, events: readonly ChartEvent[] = []): HTMLElement {
  if (samples.length === 0) return h('p', { class: 'muted' }, 'No samples yet: the API samples each running task periodically (every 30 s by default).');
  const marks = eventMarks(events, now);
  return h(
    'div',
    { class: 'history', id: 'history' },
    lineChart('copies', 'Copies', samples, (s) => s.copies, formatCount, now, marks),
    lineChart('lag', 'Max lag', samples, (s) => s.maxLagMs, formatDuration, now, marks),
  );
}
