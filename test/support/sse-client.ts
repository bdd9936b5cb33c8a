import { Agent, fetch } from 'undici';

/** A server-sent event stream read with `fetch()` (as the dashboard reads it, so headers can be sent). */
export interface SseClient {
  status: number;
  headers: Headers;
  /** `data:` payloads parsed as JSON, in order. */
  events: Array<Record<string, unknown>>;
  /** `id:` of each event, in order. */
  ids: string[];
  /** Comment lines (without the leading `:` and space), in order. */
  comments: string[];
  /** Resolves when the server ended the stream (or `close()` aborted it). */
  ended: Promise<void>;
  /** Whether the stream has ended. */
  readonly done: boolean;
  close(): void;
}

/**
 * Opens `url` and parses the `text/event-stream` as it arrives. Each client has a connection pool
 * of its own, destroyed by `close()`: an aborted fetch makes a shared pool open a spare
 * connection, which would keep the server's `close()` waiting for the client's keep-alive timeout.
 */
export async function openSse(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
  const abort = new AbortController();
  const dispatcher = new Agent();
  const res = await fetch(url, { headers: { accept: 'text/event-stream', ...headers }, signal: abort.signal, dispatcher });
  if (!res.body) throw new Error(`GET ${url} answered ${res.status} without a body`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let done = false;
  const client: SseClient = {
    status: res.status,
    headers: res.headers,
    events: [],
    ids: [],
    comments: [],
    ended: Promise.resolve(),
    get done() {
      return done;
    },
    close: () => {
      abort.abort();
      void dispatcher.destroy().catch(() => undefined);
    },
  };
  const block = (text: string) => {
    const data: string[] = [];
    for (const line of text.split('\n')) {
      if (line.startsWith(':')) client.comments.push(line.slice(1).trim());
      else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
      else if (line.startsWith('id:')) client.ids.push(line.slice(3).trim());
    }
    if (data.length > 0) client.events.push(JSON.parse(data.join('\n')) as Record<string, unknown>);
  };
  client.ended = (async () => {
    try {
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value, { stream: true });
        for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
          block(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch {
      // Aborted by close(), or the connection was cut.
    } finally {
      done = true;
      void dispatcher.close().catch(() => undefined);
    }
  })();
  return client;
}
