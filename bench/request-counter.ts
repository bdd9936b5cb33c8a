import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import type { RunningRegistry } from '../src/registry/index.js';
import { percentiles } from './stats.js';

/**
 * Requests of one kind during a window: when the first and last arrived (ms after the window
 * opened), and how long the registry took to answer them (request head parsed -> response
 * finished, ms), which grows when the registry's thread is busy.
 */
export interface RequestWindow {
  count: number;
  firstMs: number;
  lastMs: number;
  answerP50Ms: number;
  answerP99Ms: number;
}

interface Tally {
  count: number;
  firstMs: number;
  lastMs: number;
  answers: number[];
  /** Arrival of each request, ms after the window opened. */
  arrivals: number[];
}

/** Requests one registry received during a window, by kind (see {@link requestKind}). */
export type RequestCounts = Record<string, RequestWindow>;

/**
 * `METHOD /path`, query left out; a v1 instance list with `udpPort` (a watch that subscribes to
 * push; regsync's reconciles read without it) is told apart as `... (subscribe)`.
 */
export function requestKind(method: string | undefined, url: string | undefined): string {
  const u = url ?? '';
  const q = u.indexOf('?');
  const path = q === -1 ? u : u.slice(0, q);
  const subscribe = path.endsWith('/instance/list') && /[?&]udpPort=[1-9]/.test(u) ? ' (subscribe)' : '';
  return `${method ?? '?'} ${path}${subscribe}`;
}

/**
 * Counts the HTTP requests an embedded registry receives, from the Node server's own `request`
 * event (Fastify takes no hooks once it listens), within a window opened by `open()`.
 */
export class RequestCounter {
  private counts = new Map<string, Tally>();
  private openedAt = performance.now();
  private readonly onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const key = requestKind(req.method, req.url);
    const now = performance.now();
    const at = now - this.openedAt;
    let t = this.counts.get(key);
    if (t) {
      t.count += 1;
      t.lastMs = at;
      t.arrivals.push(at);
    } else {
      t = { count: 1, firstMs: at, lastMs: at, answers: [], arrivals: [at] };
      this.counts.set(key, t);
    }
    const tally = t;
    res.once('finish', () => {
      if (this.counts.get(key) === tally) tally.answers.push(performance.now() - now);
    });
  };

  constructor(private readonly registry: RunningRegistry) {
    // First in line, so that the clock starts before Fastify handles the request.
    registry.app.server.prependListener('request', this.onRequest);
  }

  /** Starts a new window now: counts and times restart. */
  open(): void {
    this.counts = new Map();
    this.openedAt = performance.now();
  }

  /** The requests of the window so far. */
  window(): RequestCounts {
    return Object.fromEntries(
      [...this.counts].map(([k, t]) => {
        const p = percentiles(t.answers);
        return [k, { count: t.count, firstMs: t.firstMs, lastMs: t.lastMs, answerP50Ms: p.p50, answerP99Ms: p.p99 }];
      }),
    );
  }

  /** When the window opened (performance.now()), and the arrival times of every request by kind. */
  arrivals(): { openedAt: number; byKind: Record<string, number[]> } {
    return { openedAt: this.openedAt, byKind: Object.fromEntries([...this.counts].map(([k, t]) => [k, [...t.arrivals]])) };
  }

  close(): void {
    this.registry.app.server.off('request', this.onRequest);
  }
}

/** Sum of the counts whose kind matches `pattern`. */
export function countOf(counts: RequestCounts, pattern: RegExp): number {
  return Object.entries(counts).reduce((sum, [key, w]) => (pattern.test(key) ? sum + w.count : sum), 0);
}
