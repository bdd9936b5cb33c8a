import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { EngineObserver, TaskEvent, TaskEventInput, TaskEventKind } from '../engine/observer.js';
import { maskSecretsInText } from '../log.js';
import { evalScript } from '../util/redis-script.js';
import { redisKeys } from '../util/redis-keys.js';

/** Options of {@link TaskEventLog}. */
export interface TaskEventLogOptions {
  /** Connection for writes and range reads (shared; never blocked). */
  redis: Redis;
  /** Key prefix of the deployment (as the store's). */
  prefix: string;
  logger: Logger;
  /**
   * Opens the dedicated connection that {@link TaskEventLog.subscribe} blocks on (XREAD BLOCK), on
   * the first subscription; closed by {@link TaskEventLog.close}. Without it, subscribing throws.
   */
  connect?: (() => Redis) | undefined;
  /** Entries kept in the deployment's stream (approximately, `MAXLEN ~`). Default 1000. */
  maxLen?: number;
  /** Entries kept in each task's stream (approximately). Default 200. */
  taskMaxLen?: number;
  /** A task's stream expires this long after its last event (a deleted task's history goes). Default 7 days. */
  taskTtlMs?: number;
  /** How long one XREAD blocks before it is sent again. Default 5000 ms. */
  blockMs?: number;
}

/** A live subscription to the events of the deployment. */
export interface TaskEventSubscription {
  /** Resolves once events recorded from now on are delivered (the reader knows where the stream ends). */
  ready: Promise<void>;
  unsubscribe(): void;
}

/**
 * Adds an event to the deployment's stream and, with the same id, to its task's stream, trimming
 * both, so that a busy task cannot push another task's history out of its own list.
 * KEYS: deployment stream [, task stream]. ARGV: max length, task max length, task TTL ms, fields...
 */
const ADD_EVENT = `
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 4))
if KEYS[2] then
  redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[2], id, unpack(ARGV, 4))
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return id
`;

/**
 * Many events in one call (what the engine reports during a burst): KEYS[1] the deployment's
 * stream, KEYS[2..] task streams; ARGV[4] a JSON array of `[task key index or 0, field, value, ...]`.
 */
const ADD_EVENTS = `
local events = cjson.decode(ARGV[4])
for _, e in ipairs(events) do
  local k = e[1]
  table.remove(e, 1)
  local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(e))
  if k > 0 then
    redis.call('XADD', KEYS[k], 'MAXLEN', '~', ARGV[2], id, unpack(e))
    redis.call('PEXPIRE', KEYS[k], ARGV[3])
  end
end
return #events
`;

/** Most events written by one call of {@link ADD_EVENTS}. */
const BATCH = 256;

/** A cluster's reachability events: at most this many within {@link FLAP_WINDOW_MS} per process (a partly failing cluster flips at every reconcile). */
const FLAP_EVENTS = 4;
const FLAP_WINDOW_MS = 5 * 60_000;

/** How long the observer collects events before writing them (ms): a moment on a dashboard, one call instead of hundreds. */
const FLUSH_MS = 50;

const KINDS = new Set<TaskEventKind>(['reconciled', 'held', 'released', 'error', 'removed', 'task', 'cluster']);

/**
 * The task event log: capped Redis streams of what happened to tasks, for the dashboard.
 *
 * Layout, under the prefix: `<p>:events`, every event of the deployment (about 1000 kept), and
 * `<p>:events:task:<task id>`, the events of one task (about 200 kept, gone 7 days after its last
 * event). An entry's fields are `kind`, `message` and, when set, `task`, `service`, `cluster`;
 * its time is the entry id's.
 *
 * Writers are the reconcilers of every worker (through {@link observer}: only events worth an
 * operator's eye, never one per reconcile that changed nothing) and the REST API (task and cluster
 * changes). Readers list a task's events newest first, or follow the deployment's stream: each API
 * process runs one XREAD BLOCK loop on a connection of its own and fans every entry out to all of
 * its subscribers (SSE clients), so a thousand dashboards cost Redis one blocked reader.
 *
 * Recording never fails its caller: a lost event is logged (events are for people; the status in
 * the store stays the truth).
 */
export class TaskEventLog {
  readonly streamKey: string;
  private readonly opts: Required<Pick<TaskEventLogOptions, 'maxLen' | 'taskMaxLen' | 'taskTtlMs' | 'blockMs'>> & TaskEventLogOptions;
  private readonly log: Logger;
  private readonly listeners = new Set<(event: TaskEvent) => void>();
  private reader: { redis: Redis; positioned: Promise<void>; done: Promise<void> } | undefined;
  private closed = false;
  private readonly stopWaiting = new AbortController();

  constructor(options: TaskEventLogOptions) {
    this.opts = { maxLen: 1000, taskMaxLen: 200, taskTtlMs: 7 * 24 * 3600_000, blockMs: 5_000, ...options };
    this.streamKey = redisKeys.events(options.prefix);
    this.log = options.logger.child({ component: 'task-events' });
  }

  private pending: TaskEventInput[] = [];
  private flushing: Promise<void> | undefined;

  /**
   * The observer that records the engine's events here, in the background: the events of
   * {@link FLUSH_MS} (a burst of reconciles finishing: a task starting writes one per service) go
   * to Redis in one call.
   */
  get observer(): EngineObserver {
    return {
      event: (event) => {
        this.pending.push(event);
        this.flushing ??= delay(FLUSH_MS).then(() => this.flush());
      },
      clusterReached: (clusterId, reached, detail) => this.clusterReached(clusterId, reached, detail),
    };
  }

  /** What this process last told Redis of each cluster: only a change costs a round trip. */
  private readonly reach = new Map<string, 'up' | 'down'>();
  /** When this process recorded each cluster's recent events: a cluster that flaps (some services fail, some not) stops adding them. */
  private readonly flips = new Map<string, number[]>();

  /**
   * Turns reconciles reaching a cluster or not into `cluster` events, once per change across every
   * process: the state is swapped in Redis (`SET ... GET`), and only the process that changed it
   * records the event (`cluster b cannot be reached: ...`, then `cluster b is reachable again`). A
   * cluster first seen reachable records nothing.
   */
  private clusterReached(clusterId: string, reached: boolean, detail: { taskId: string; reason?: string | undefined }): void {
    const state = reached ? 'up' : 'down';
    if (this.reach.get(clusterId) === state) return;
    this.reach.set(clusterId, state);
    const key = redisKeys.clusterReach(this.opts.prefix, clusterId);
    void this.opts.redis
      .set(key, state, 'EX', 7 * 86_400, 'GET')
      .then((before) => {
        if (before === state || (before === null && reached)) return;
        const now = Date.now();
        const recent = (this.flips.get(clusterId) ?? []).filter((at) => now - at < FLAP_WINDOW_MS);
        this.flips.set(clusterId, [...recent, now]);
        if (recent.length >= FLAP_EVENTS) return;
        const message = reached ? `cluster ${clusterId} is reachable again` : `cluster ${clusterId} cannot be reached: ${detail.reason ?? 'no answer'}`;
        this.observer.event?.({ kind: 'cluster', clusterId, taskId: detail.taskId, message });
      })
      .catch((err: unknown) => {
        // Asked again at the next reconcile that sees it.
        this.reach.delete(clusterId);
        this.log.debug({ err, cluster: clusterId }, 'cannot record whether a cluster was reached');
      });
  }

  /** Writes the events the observer collected; resolves once they are in Redis (or logged as lost). */
  async flush(): Promise<void> {
    while (this.pending.length > 0) {
      const batch = this.pending.splice(0, BATCH);
      const keys = [this.streamKey];
      const index = new Map<string, number>();
      const rows = batch.map((event) => {
        let k = 0;
        if (event.taskId !== undefined) {
          const key = this.taskKey(event.taskId);
          k = index.get(key) ?? 0;
          if (k === 0) {
            keys.push(key);
            k = keys.length;
            index.set(key, k);
          }
        }
        return [k, ...fieldsOf(event)];
      });
      try {
        await evalScript(this.opts.redis, ADD_EVENTS, keys.length, ...keys, this.opts.maxLen, this.opts.taskMaxLen, this.opts.taskTtlMs, JSON.stringify(rows));
      } catch (err) {
        this.log.warn({ err, events: batch.length }, 'cannot record task events');
      }
    }
    this.flushing = undefined;
  }

  /** Records one event; resolves to its id, or undefined when Redis did not take it (logged). */
  async record(event: TaskEventInput): Promise<string | undefined> {
    const fields = fieldsOf(event);
    const keys = event.taskId !== undefined ? [this.streamKey, this.taskKey(event.taskId)] : [this.streamKey];
    try {
      const id = await evalScript(this.opts.redis, ADD_EVENT, keys.length, ...keys, this.opts.maxLen, this.opts.taskMaxLen, this.opts.taskTtlMs, ...fields);
      return String(id);
    } catch (err) {
      this.log.warn({ err, kind: event.kind, task: event.taskId }, 'cannot record a task event');
      return undefined;
    }
  }

  /** The newest `limit` events of a task, newest first. */
  async forTask(taskId: string, limit: number): Promise<TaskEvent[]> {
    const entries = await this.opts.redis.xrevrange(this.taskKey(taskId), '+', '-', 'COUNT', limit);
    return entries.flatMap(([id, fields]) => parseEntry(id, fields) ?? []);
  }

  /** Up to `limit` events of the deployment recorded after the one with id `afterId`, oldest first. */
  async after(afterId: string, limit: number): Promise<TaskEvent[]> {
    const entries = await this.opts.redis.xrange(this.streamKey, `(${afterId}`, '+', 'COUNT', limit);
    return entries.flatMap(([id, fields]) => parseEntry(id, fields) ?? []);
  }

  /**
   * Calls `listener` with every event recorded in the deployment from now on (by any process), in
   * stream order, until unsubscribed or {@link close}d. The first subscription starts this
   * process's reader; it runs until {@link close}.
   */
  subscribe(listener: (event: TaskEvent) => void): TaskEventSubscription {
    if (this.closed) throw new Error('the task event log is closed');
    this.listeners.add(listener);
    const reader = this.startReader();
    return { ready: reader.positioned, unsubscribe: () => this.listeners.delete(listener) };
  }

  /** Stops the reader (its connection is cut, which ends a blocked XREAD at once) and drops every subscriber. */
  async close(): Promise<void> {
    if (this.closed) return;
    await this.flushing;
    this.closed = true;
    this.listeners.clear();
    this.stopWaiting.abort();
    const reader = this.reader;
    if (!reader) return;
    reader.redis.disconnect();
    await reader.done;
  }

  private taskKey(taskId: string): string {
    return redisKeys.taskEvents(this.opts.prefix, taskId);
  }

  private startReader(): NonNullable<TaskEventLog['reader']> {
    if (this.reader) return this.reader;
    if (!this.opts.connect) throw new Error('this task event log cannot follow the stream (no connection factory)');
    const redis = this.opts.connect();
    let positioned!: () => void;
    const ready = new Promise<void>((resolve) => (positioned = resolve));
    const reader = { redis, positioned: ready, done: this.follow(redis, positioned) };
    this.reader = reader;
    return reader;
  }

  /** The XREAD BLOCK loop: from the stream's end as of the start, every entry to every listener. */
  private async follow(redis: Redis, positioned: () => void): Promise<void> {
    let last: string | undefined;
    while (!this.closed) {
      try {
        if (last === undefined) {
          last = await lastId(redis, this.streamKey);
          positioned();
        }
        const answer = await redis.xread('COUNT', 100, 'BLOCK', this.opts.blockMs, 'STREAMS', this.streamKey, last);
        if (!answer) {
          // Idle: a stream that lost its data (Redis restarted empty) would never pass `last` again.
          const end = await lastId(redis, this.streamKey);
          if (compareIds(end, last) < 0) last = end;
          continue;
        }
        for (const [, entries] of answer) {
          for (const [id, fields] of entries) {
            last = id;
            const event = parseEntry(id, fields);
            if (event) this.fanOut(event);
          }
        }
      } catch (err) {
        if (this.closed) break;
        this.log.warn({ err }, 'reading the task event stream failed; retrying');
        await delay(1_000, undefined, { signal: this.stopWaiting.signal }).catch(() => undefined);
      }
    }
    positioned();
  }

  private fanOut(event: TaskEvent): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(event);
      } catch (err) {
        this.log.warn({ err }, 'a task event subscriber threw');
      }
    }
  }
}

async function lastId(redis: Redis, key: string): Promise<string> {
  const [newest] = await redis.xrevrange(key, '+', '-', 'COUNT', 1);
  return newest?.[0] ?? '0-0';
}

/** Orders two stream ids (`<ms>-<seq>`). */
export function compareIds(a: string, b: string): number {
  const [am = 0n, as = 0n] = a.split('-').map((p) => BigInt(p));
  const [bm = 0n, bs = 0n] = b.split('-').map((p) => BigInt(p));
  if (am !== bm) return am < bm ? -1 : 1;
  if (as !== bs) return as < bs ? -1 : 1;
  return 0;
}

/** Whether `value` is a stream id (`<ms>-<seq>`), as a client may send in `Last-Event-ID`. */
export function isStreamId(value: string): boolean {
  return /^\d{1,20}-\d{1,20}$/.test(value);
}

/** One stream entry as an event; undefined for an entry that is not one (written by something else). */
export function parseEntry(id: string, fields: readonly string[]): TaskEvent | undefined {
  const f = new Map<string, string>();
  for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i] as string, fields[i + 1] as string);
  const kind = f.get('kind') as TaskEventKind | undefined;
  const message = f.get('message');
  if (kind === undefined || !KINDS.has(kind) || message === undefined) return undefined;
  const ms = Number(id.split('-')[0]);
  const event: TaskEvent = { id, at: new Date(ms).toISOString(), kind, message };
  const task = f.get('task');
  const service = f.get('service');
  const cluster = f.get('cluster');
  if (task !== undefined) event.taskId = task;
  if (service !== undefined) event.service = service;
  if (cluster !== undefined) event.clusterId = cluster;
  return event;
}

/** An event's stream fields: `kind`, `message` (masked: it may quote what a registry said), and `task`, `service`, `cluster` when set. */
function fieldsOf(event: TaskEventInput): string[] {
  const fields: string[] = ['kind', event.kind, 'message', maskSecretsInText(event.message)];
  if (event.taskId !== undefined) fields.push('task', event.taskId);
  if (event.service !== undefined) fields.push('service', event.service);
  if (event.clusterId !== undefined) fields.push('cluster', event.clusterId);
  return fields;
}
