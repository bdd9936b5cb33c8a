/// <reference lib="dom" />
import type { ApiClient } from './api-client.js';
import { EventStreamParser } from './format.js';
import type { SyncEvent } from './types.js';

/** A stream that sent nothing (not even a keep-alive) for this long is taken for dead. */
const SILENCE_MS = 45_000;

/** How the page learns about changes: the event stream, or polling while the stream is unavailable. */
export type LiveMode = 'connecting' | 'live' | 'polling';

/** Options of {@link LiveUpdates}. */
export interface LiveUpdatesOptions {
  api: ApiClient;
  /** An event arrived. */
  onEvent: (event: SyncEvent) => void;
  /** Time to re-read everything: the stream (re)opened, or a poll is due. */
  onRefresh: () => void;
  onMode: (mode: LiveMode) => void;
  /** Poll period while the stream is unavailable (default 3 s). */
  pollMs?: number;
  /** How long to wait before trying the stream again (default 15 s). */
  retryMs?: number;
}

/**
 * Follows `GET /api/v1/events` (server-sent events) with `fetch()`, not `EventSource`, because
 * `EventSource` cannot send the `Authorization` header. While the stream is unavailable (a server
 * without the route, a proxy that cuts it, a restart) the page polls, and the stream is tried again
 * every `retryMs`; when it opens, one refresh catches up on what happened in between.
 */
export class LiveUpdates {
  private abort: AbortController | undefined;
  private pollTimer: ReturnType<typeof setInterval> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;
  private stopped = true;
  private current: LiveMode = 'connecting';

  constructor(private readonly opts: LiveUpdatesOptions) {}

  get mode(): LiveMode {
    return this.current;
  }

  start(): void {
    this.stop();
    this.stopped = false;
    void this.connect();
  }

  stop(): void {
    this.stopped = true;
    this.abort?.abort();
    this.abort = undefined;
    if (this.pollTimer !== undefined) clearInterval(this.pollTimer);
    if (this.retryTimer !== undefined) clearTimeout(this.retryTimer);
    this.pollTimer = undefined;
    this.retryTimer = undefined;
  }

  private setMode(mode: LiveMode): void {
    this.current = mode;
    this.opts.onMode(mode);
  }

  private async connect(): Promise<void> {
    const abort = new AbortController();
    this.abort = abort;
    let watchdog: ReturnType<typeof setInterval> | undefined;
    try {
      const res = await fetch(this.opts.api.url('events'), {
        headers: { accept: 'text/event-stream', ...this.opts.api.headers() },
        cache: 'no-store',
        signal: abort.signal,
      });
      if (!res.ok || !res.body) {
        await res.body?.cancel().catch(() => undefined);
        throw new Error(`events: HTTP ${res.status}`);
      }
      if (this.pollTimer !== undefined) clearInterval(this.pollTimer);
      this.pollTimer = undefined;
      this.setMode('live');
      this.opts.onRefresh();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      const parser = new EventStreamParser();
      // The server writes a keep-alive comment every 15 s: a stream silent for much longer is dead
      // (a connection lost without a close), so give it up and poll.
      let heard = Date.now();
      watchdog = setInterval(() => {
        if (Date.now() - heard > SILENCE_MS) abort.abort();
      }, SILENCE_MS / 3);
      for (;;) {
        const { value, done } = await reader.read();
        heard = Date.now();
        if (done) break;
        for (const data of parser.push(value)) {
          let event: SyncEvent;
          try {
            event = JSON.parse(data) as SyncEvent;
          } catch {
            continue;
          }
          this.opts.onEvent(event);
        }
      }
    } catch {
      // Not available now: poll instead (below).
    } finally {
      if (watchdog !== undefined) clearInterval(watchdog);
    }
    // Stopped, or replaced by a newer connection: nothing to do. Ended, failed or silent: poll.
    if (this.stopped || this.abort !== abort) return;
    this.fallBack();
  }

  private fallBack(): void {
    this.setMode('polling');
    if (this.pollTimer === undefined) {
      this.opts.onRefresh();
      this.pollTimer = setInterval(() => this.opts.onRefresh(), this.opts.pollMs ?? 3_000);
    }
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      if (!this.stopped) void this.connect();
    }, this.opts.retryMs ?? 15_000);
  }
}
