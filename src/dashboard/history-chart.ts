/// <reference lib="dom" />
import { h } from './dom.js';
import { formatCount, formatDuration } from './format.js';

/** One sample of `GET /api/v1/tasks/:id/history`. */
export interface HistorySample {
  at: string;
  copies: number;
  maxLagMs: number | null;
  failing: number;
  held: number;
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
export function seriesPoints(samples: readonly HistorySample[], value: (s: HistorySample) => number | null, now: number): ChartSeries {
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

function svg(tag: string, attrs: Record<string, string | number>, ...children: Array<Node | string>): SVGElement {
  const el = document.createElementNS(SVG_NS, tag) as SVGElement;
  for (const [name, value] of Object.entries(attrs)) el.setAttribute(name, String(value));
  el.append(...children);
  return el;
}

/** One small chart: a framed plot, the scale's top and zero on the left, the hour below, one line. */
function chart(series: string, title: string, samples: readonly HistorySample[], value: (s: HistorySample) => number | null, format: (n: number) => string, now: number): Element {
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
  );
}

function lastPoint(points: string): Array<[string, string]> {
  const last = points.split(' ').at(-1)?.split(',');
  return last && last.length === 2 ? [[last[0] as string, last[1] as string]] : [];
}

/**
 * A task's copies and max lag over the last hour as two small inline SVG charts (no library),
 * each scaled to the page width; a sentence instead while no sample was taken.
 */
export function historyCharts(samples: readonly HistorySample[], now: number): HTMLElement {
  if (samples.length === 0) return h('p', { class: 'muted' }, 'No samples yet: the API samples each running task periodically (every 30 s by default).');
  return h(
    'div',
    { class: 'history', id: 'history' },
    chart('copies', 'Copies', samples, (s) => s.copies, formatCount, now),
    chart('lag', 'Max lag', samples, (s) => s.maxLagMs, formatDuration, now),
  );
}
