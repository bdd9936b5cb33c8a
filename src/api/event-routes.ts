import { PassThrough } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { TaskEvent } from '../engine/observer.js';
import { compareIds, isStreamId, type TaskEventSubscription } from '../metrics/task-events.js';
import type { TaskSpec } from '../model/types.js';
import { ApiError } from './api-error.js';
import { lookupParams } from './schemas.js';

/** Where the event routes read events (the node's `TaskEventLog`). */
export interface TaskEventSource {
  /** The newest `limit` events of a task, newest first. */
  forTask(taskId: string, limit: number): Promise<TaskEvent[]>;
  /** Up to `limit` events recorded after `afterId`, oldest first. */
  after(afterId: string, limit: number): Promise<TaskEvent[]>;
  /** Every event recorded from now on, by any process. */
  subscribe(listener: (event: TaskEvent) => void): TaskEventSubscription;
}

/** Options of {@link registerEventRoutes}. */
export interface EventRoutesOptions {
  /** Comment line sent to each stream this often, so that proxies and clients see it alive. Default 15 s. */
  keepAliveMs?: number;
}

/** Events `GET /api/v1/tasks/:id/events` answers when no `limit` is given, and at most. */
export const DEFAULT_EVENTS_LIMIT = 50;
export const MAX_EVENTS_LIMIT = 1000;
/** Events a stream replays after `Last-Event-ID` at most. */
const MAX_REPLAY = 1000;
/** How long a new stream waits for the event reader to find the stream's end (Redis slow or away). */
const READY_WAIT_MS = 5_000;

const limitQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { limit: { type: 'string', pattern: '^[0-9]{1,4}$' } },
} as const;

const streamQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { task: { type: 'string', minLength: 1, maxLength: 253 } },
} as const;

/**
 * Task events for the dashboard (see `TaskEventLog` for what is recorded and where).
 *
 * `GET /api/v1/tasks/:id/events?limit=N` answers `{items: [event...]}`, newest first (default 50,
 * at most 1000); 404 `task_not_found` for a task that does not exist.
 *
 * `GET /api/v1/events[?task=<id>]` is a server-sent event stream (`text/event-stream`) of every
 * event recorded in the deployment from the moment of the request (only one task's with `task`):
 *
 * ```
 * retry: 3000
 * : connected                      <- sent once the stream is live: anything recorded after it arrives
 *
 * id: 1719830400123-0
 * data: {"id":"1719830400123-0","at":"2024-07-01T10:40:00.123Z","kind":"reconciled","taskId":"orders-sh-to-bj","service":"public/DEFAULT_GROUP/orders","message":"..."}
 *
 * : keep-alive                     <- a comment every 15 s
 * ```
 *
 * Each event is one `data:` line of JSON, `{id, at, kind, message, taskId?, service?, clusterId?}`
 * (`kind`: `reconciled|held|released|error|removed|task|cluster`), preceded by an `id:` line, and
 * followed by a blank line. Lines starting with `:` are comments to skip. A client that reconnects
 * with the header `Last-Event-ID: <id of the last event it got>` first gets what it missed (up to
 * 1000 events, as far as the capped stream still holds them). It works with `EventSource` and with
 * `fetch()` reading `response.body` (which can send an `Authorization` header); the response is
 * `Connection: close`, so a stream ends with its connection.
 *
 * Streams end when the app closes (a `preClose` hook), so `app.close()` never waits for clients.
 */
export function registerEventRoutes(
  app: FastifyInstance,
  events: TaskEventSource,
  store: { getTask(id: string): Promise<TaskSpec | undefined> },
  options: EventRoutesOptions = {},
): void {
  const keepAliveMs = options.keepAliveMs ?? 15_000;
  const open = new Set<() => void>();
  app.addHook('preClose', async () => {
    for (const end of [...open]) end();
  });

  app.get<{ Params: { id: string }; Querystring: { limit?: string } }>(
    '/api/v1/tasks/:id/events',
    { schema: { params: lookupParams, querystring: limitQuery } },
    async (request) => {
      const limit = request.query.limit === undefined ? DEFAULT_EVENTS_LIMIT : Number(request.query.limit);
      if (limit < 1 || limit > MAX_EVENTS_LIMIT) throw new ApiError('invalid_request', `querystring/limit must be between 1 and ${MAX_EVENTS_LIMIT}`);
      const { id } = request.params;
      if ((await store.getTask(id)) === undefined) throw new ApiError('task_not_found', `no task ${id}`);
      return { items: await events.forTask(id, limit) };
    },
  );

  app.get<{ Querystring: { task?: string } }>('/api/v1/events', { schema: { querystring: streamQuery } }, async (request, reply) => {
    const only = request.query.task;
    const stream = new PassThrough();
    let lastSent: string | undefined;
    let replaying = true;
    const held: TaskEvent[] = [];
    const send = (event: TaskEvent): void => {
      if (only !== undefined && event.taskId !== only) return;
      if (lastSent !== undefined && compareIds(event.id, lastSent) <= 0) return;
      lastSent = event.id;
      stream.write(`id: ${event.id}\ndata: ${JSON.stringify(event)}\n\n`);
    };
    const subscription = events.subscribe((event) => (replaying ? held.push(event) : send(event)));
    const keepAlive = setInterval(() => stream.write(': keep-alive\n\n'), keepAliveMs);
    keepAlive.unref();
    let ended = false;
    const end = (): void => {
      if (ended) return;
      ended = true;
      clearInterval(keepAlive);
      subscription.unsubscribe();
      open.delete(end);
      stream.end();
    };
    open.add(end);
    reply.raw.on('close', end);

    await waitAtMost(subscription.ready, READY_WAIT_MS);
    stream.write('retry: 3000\n: connected\n\n');
    const resumeFrom = request.headers['last-event-id'];
    if (typeof resumeFrom === 'string' && isStreamId(resumeFrom.trim())) {
      lastSent = resumeFrom.trim();
      try {
        for (const event of await events.after(lastSent, MAX_REPLAY)) send(event);
      } catch (err) {
        request.log.warn({ err }, 'cannot replay task events after Last-Event-ID');
      }
    }
    replaying = false;
    for (const event of held.splice(0)) send(event);
    return reply
      .header('content-type', 'text/event-stream; charset=utf-8')
      .header('cache-control', 'no-cache, no-transform')
      .header('x-accel-buffering', 'no')
      .header('connection', 'close')
      .send(stream);
  });
}

async function waitAtMost(work: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
