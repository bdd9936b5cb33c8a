import { taskFilterOf, type TaskFilter } from './task-filter.js';

/*
 * Pure helpers of the dashboard: formatting, parsing form input, reading a server-sent event stream.
 * No DOM here, so that the unit tests run them in Node.
 */

const integer = new Intl.NumberFormat('en');

/** `12,345`. */
export function formatCount(n: number): string {
  return integer.format(n);
}

/** A duration for people: `850 ms`, `4.2 s`, `3 min`, `2.5 h`, `3 d`; `-` when unknown. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '-';
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(ms < 10_000 ? 1 : 0)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  if (ms < 86_400_000) return `${(ms / 3_600_000).toFixed(1)} h`;
  return `${Math.round(ms / 86_400_000)} d`;
}

/** How long ago an ISO time was, relative to `now`: `5 s ago`; `-` when there is none. */
export function formatAgo(iso: string | null | undefined, now: number): string {
  if (!iso) return '-';
  const at = Date.parse(iso);
  if (Number.isNaN(at)) return iso;
  const ms = now - at;
  return ms < 1_000 ? 'just now' : `${formatDuration(ms)} ago`;
}

/** `text` cut to `max` characters with an ellipsis (the whole text goes in a tooltip). */
export function truncate(text: string, max: number): string {
  return text.length <= max ? text : `${text.slice(0, Math.max(0, max - 1))}…`;
}

/** Endpoints typed as `host:port` separated by commas, spaces or new lines. */
export function parseEndpoints(text: string): string[] {
  return text
    .split(/[\s,]+/)
    .map((e) => e.trim())
    .filter((e) => e !== '');
}

/**
 * Labels typed as `key=value` pairs separated by commas or new lines; throws with a message naming
 * the pair that has no `=` or no key.
 */
export function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const pair of text.split(/[,\n]+/).map((p) => p.trim()).filter((p) => p !== '')) {
    const eq = pair.indexOf('=');
    if (eq <= 0) throw new Error(`label "${pair}" must be key=value`);
    labels[pair.slice(0, eq).trim()] = pair.slice(eq + 1).trim();
  }
  return labels;
}

/**
 * Reads a `text/event-stream` as it arrives in chunks: {@link push} takes the next chunk (messages
 * may be split anywhere) and returns the data of every message it completed. Comments (`: ping`)
 * and the `event`, `id` and `retry` fields are ignored: the dashboard only needs each message's
 * JSON data.
 */
export class EventStreamParser {
  private buffer = '';
  private data: string[] = [];

  push(chunk: string): string[] {
    this.buffer += chunk;
    const messages: string[] = [];
    for (;;) {
      const end = this.buffer.search(/\r\n|\r|\n/);
      if (end < 0) break;
      const line = this.buffer.slice(0, end);
      // A lone \r at the end of a chunk may be followed by \n in the next one.
      if (this.buffer[end] === '\r' && end + 1 === this.buffer.length) break;
      this.buffer = this.buffer.slice(end + (this.buffer.startsWith('\r\n', end) ? 2 : 1));
      if (line === '') {
        if (this.data.length > 0) messages.push(this.data.join('\n'));
        this.data = [];
      } else if (line.startsWith('data:')) {
        this.data.push(line.slice(line[5] === ' ' ? 6 : 5));
      }
    }
    return messages;
  }
}

/**
 * The route part of the page's address: `#/tasks/abc` -> `{view: 'task', id: 'abc'}`;
 * `#/tasks?q=orders&state=failing` -> the task list with that filter.
 */
export type Route =
  | { view: 'tasks'; filter: TaskFilter }
  | { view: 'task'; id: string }
  | { view: 'clusters'; id?: string }
  | { view: 'deployment' }
  | { view: 'cmdb' };

/** Parses `location.hash`; anything unknown is the unfiltered task list. A query (`?...`) is read by the task list only. */
export function parseRoute(hash: string): Route {
  const path = hash.replace(/^#\/?/, '');
  const q = path.indexOf('?');
  const parts = (q < 0 ? path : path.slice(0, q)).split('/').filter((p) => p !== '');
  const everyTask: Route = { view: 'tasks', filter: { search: '', state: '' } };
  switch (parts[0]) {
    case 'tasks':
      if (parts[1]) return { view: 'task', id: decodeURIComponent(parts[1]) };
      return { view: 'tasks', filter: taskFilterOf(new URLSearchParams(q < 0 ? '' : path.slice(q + 1))) };
    case 'clusters':
      return parts[1] ? { view: 'clusters', id: decodeURIComponent(parts[1]) } : { view: 'clusters' };
    case 'shards':
      return { view: 'deployment' };
    case 'cmdb':
      return { view: 'cmdb' };
    default:
      return everyTask;
  }
}

/** The hash of a task's page. */
export function taskHref(id: string): string {
  return `#/tasks/${encodeURIComponent(id)}`;
}
