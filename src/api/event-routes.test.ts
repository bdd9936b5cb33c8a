import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import { TaskEventLog } from '../metrics/task-events.js';
import type { TaskSpec } from '../model/index.js';
import { RegsyncStore } from '../store/index.js';
import { RecordingTaskControl } from '../../test/support/recording-task-control.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { openSse, type SseClient } from '../../test/support/sse-client.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { buildApiApp } from './api-app.js';

let server: RedisServer;
let redis: Redis;
let events: TaskEventLog;
let store: RegsyncStore;
let app: FastifyInstance;
let url: string;
const clients: SseClient[] = [];
const readers: Redis[] = [];

function task(id: string): TaskSpec {
  return {
    id,
    source: 'a',
    destination: 'b',
    service: 'orders',
    group: 'DEFAULT_GROUP',
    namespace: 'public',
    options: {},
    state: 'running',
    createdAt: new Date().toISOString(),
  } as TaskSpec;
}

beforeAll(async () => {
  server = await startRedis();
});
afterAll(async () => {
  await server?.cleanup();
});

beforeEach(async () => {
  redis = new Redis(server.url, { maxRetriesPerRequest: 0 });
  redis.on('error', () => undefined);
  const prefix = `sse-${randomUUID().slice(0, 8)}`;
  store = new RegsyncStore(redis, prefix);
  const connect = () => {
    const r = new Redis(server.url, { maxRetriesPerRequest: null });
    r.on('error', () => undefined);
    readers.push(r);
    return r;
  };
  events = new TaskEventLog({ redis, prefix, logger: silentLogger(), connect });
  app = await buildApiApp({ store, control: new RecordingTaskControl(), redis, events, eventRoutes: { keepAliveMs: 100 } });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  url = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
});

afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  await app.close();
  await events.close();
  for (const r of readers.splice(0)) r.disconnect();
  redis.disconnect();
});

async function connectSse(path = '/api/v1/events', headers: Record<string, string> = {}): Promise<SseClient> {
  const client = await openSse(`${url}${path}`, headers);
  clients.push(client);
  return client;
}

describe('GET /api/v1/tasks/:id/events', () => {
  it('lists the task\'s events newest first, limited', async () => {
    await store.createTask(task('t1'));
    await events.record({ kind: 'task', taskId: 't1', message: 'one' });
    await events.record({ kind: 'reconciled', taskId: 't1', service: 'public/DEFAULT_GROUP/orders', message: 'two' });
    await events.record({ kind: 'task', taskId: 'other', message: 'not this task' });
    const res = await app.inject({ method: 'GET', url: '/api/v1/tasks/t1/events' });
    expect(res.statusCode).toBe(200);
    const body = res.json() as { items: Array<Record<string, unknown>> };
    expect(body.items.map((e) => e.message)).toEqual(['two', 'one']);
    expect(body.items[0]).toMatchObject({ kind: 'reconciled', taskId: 't1', service: 'public/DEFAULT_GROUP/orders', id: expect.stringMatching(/^\d+-\d+$/) });
    const one = await app.inject({ method: 'GET', url: '/api/v1/tasks/t1/events?limit=1' });
    expect((one.json() as { items: unknown[] }).items).toHaveLength(1);
  });

  it('answers 404 for an unknown task and 400 for a bad limit', async () => {
    await store.createTask(task('t1'));
    const missing = await app.inject({ method: 'GET', url: '/api/v1/tasks/nope/events' });
    expect(missing.statusCode).toBe(404);
    expect(missing.json()).toMatchObject({ error: { code: 'task_not_found' } });
    for (const limit of ['0', '1001', 'abc', '-1']) {
      const res = await app.inject({ method: 'GET', url: `/api/v1/tasks/t1/events?limit=${limit}` });
      expect(res.statusCode, limit).toBe(400);
      expect(res.json()).toMatchObject({ error: { code: 'invalid_request' } });
    }
  });
});

describe('GET /api/v1/events (server-sent events)', () => {
  it('streams every event recorded after it connected, with keep-alive comments', async () => {
    await events.record({ kind: 'task', taskId: 'old', message: 'before the client came' });
    const client = await connectSse();
    expect(client.status).toBe(200);
    expect(client.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    expect(client.headers.get('cache-control')).toContain('no-cache');
    await waitUntil(() => client.comments.includes('connected'), { message: 'the stream is live' });
    const id = await events.record({ kind: 'held', taskId: 't1', service: 'public/DEFAULT_GROUP/orders', message: 'holding a mass deletion' });
    await waitUntil(() => client.events.length === 1, { message: 'the event arrived' });
    expect(client.events[0]).toEqual({ id, at: expect.any(String), kind: 'held', taskId: 't1', service: 'public/DEFAULT_GROUP/orders', message: 'holding a mass deletion' });
    expect(client.ids).toEqual([id]);
    await waitUntil(() => client.comments.includes('keep-alive'), { message: 'a keep-alive comment' });
  });

  it('fans out to several clients, filters by task, and resumes after Last-Event-ID', async () => {
    const all = await connectSse();
    const one = await connectSse('/api/v1/events?task=t2');
    await waitUntil(() => all.comments.includes('connected') && one.comments.includes('connected'), { message: 'both live' });
    const first = await events.record({ kind: 'task', taskId: 't1', message: 'a' });
    await events.record({ kind: 'task', taskId: 't2', message: 'b' });
    await events.record({ kind: 'cluster', clusterId: 'c', message: 'c' });
    await waitUntil(() => all.events.length === 3 && one.events.length === 1, { message: 'every client got its events' });
    expect(all.events.map((e) => e.message)).toEqual(['a', 'b', 'c']);
    expect(one.events.map((e) => e.message)).toEqual(['b']);

    const resumed = await connectSse('/api/v1/events', { 'last-event-id': first as string });
    await waitUntil(() => resumed.events.length === 2, { message: 'missed events replayed' });
    expect(resumed.events.map((e) => e.message)).toEqual(['b', 'c']);
    await events.record({ kind: 'task', taskId: 't1', message: 'd' });
    await waitUntil(() => resumed.events.length === 3, { message: 'then live events' });
    expect(resumed.events.map((e) => e.message)).toEqual(['b', 'c', 'd']);
  });

  it('ends every stream when the app closes, without waiting for the clients', async () => {
    const client = await connectSse();
    await waitUntil(() => client.comments.includes('connected'), { message: 'the stream is live' });
    const started = Date.now();
    await app.close();
    expect(Date.now() - started).toBeLessThan(3_000);
    await client.ended;
    expect(client.done).toBe(true);
  });

  it('stops writing to a client that went away', async () => {
    const client = await connectSse();
    await waitUntil(() => client.comments.includes('connected'), { message: 'the stream is live' });
    const listeners = () => (events as unknown as { listeners: Set<unknown> }).listeners.size;
    expect(listeners()).toBe(1);
    client.close();
    await waitUntil(() => listeners() === 0, { message: 'the subscription ended with the connection' });
  });
});
