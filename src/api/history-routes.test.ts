import type { FastifyInstance } from 'fastify';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { TaskSpec } from '../model/index.js';
import { RegsyncStore } from '../store/index.js';
import { TaskHistory } from '../store/task-history.js';
import { RecordingTaskControl } from '../../test/support/recording-task-control.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { buildApiApp } from './api-app.js';

const redisServer = redisPerTest();
let store: RegsyncStore;
let history: TaskHistory;
let app: FastifyInstance;

const task: TaskSpec = { id: 'orders', source: 'a', destination: 'b', service: 'orders', group: 'DEFAULT_GROUP', namespace: 'public', options: {}, state: 'running', createdAt: new Date(0).toISOString() } as TaskSpec;

beforeEach(async () => {
  store = new RegsyncStore(redisServer.redis, redisServer.prefix);
  history = new TaskHistory(redisServer.redis, redisServer.prefix, 1_000);
  app = await buildApiApp({ store, control: new RecordingTaskControl(), redis: redisServer.redis, history });
});
afterEach(async () => {
  await app.close();
});

describe('GET /api/v1/tasks/:id/history', () => {
  it("answers the task's samples oldest first", async () => {
    await store.createTask(task);
    const empty = await app.inject({ method: 'GET', url: '/api/v1/tasks/orders/history' });
    expect(empty.statusCode).toBe(200);
    expect(empty.json()).toEqual({ items: [] });

    const status = { service: { namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' }, sourceInstances: 2, destinationInstances: 2, lastSyncAt: null, lagMs: 40, lastError: null };
    await store.putServiceStatus('orders', status);
    await history.recordPeriod(store, new Date(10_000));
    await store.putServiceStatus('orders', { ...status, destinationInstances: 3, lagMs: null, lastError: 'refused' });
    await history.recordPeriod(store, new Date(11_000));

    const res = await app.inject({ method: 'GET', url: '/api/v1/tasks/orders/history' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      items: [
        { at: new Date(10_000).toISOString(), copies: 2, maxLagMs: 40, failing: 0, held: 0 },
        { at: new Date(11_000).toISOString(), copies: 3, maxLagMs: null, failing: 1, held: 0 },
      ],
    });
  });

  it('leaves out the samples of an earlier task of the same id', async () => {
    const key = `${redisServer.prefix}:history:orders`;
    await redisServer.redis.rpush(key, JSON.stringify({ at: '2020-01-01T00:00:00.000Z', copies: 9, maxLagMs: 1, failing: 0, held: 0 }));
    await store.createTask({ ...task, createdAt: '2026-01-01T00:00:00.000Z' });
    await redisServer.redis.rpush(key, JSON.stringify({ at: '2026-01-01T00:00:30.000Z', copies: 1, maxLagMs: 1, failing: 0, held: 0 }));
    const res = await app.inject({ method: 'GET', url: '/api/v1/tasks/orders/history' });
    expect(res.json().items.map((s: { copies: number }) => s.copies)).toEqual([1]);
  });

  it('answers task_not_found for an unknown task', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/tasks/nope/history' });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('task_not_found');
  });

  it('is in the OpenAPI document with its summary and response schema', async () => {
    const doc = (await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })).json();
    const op = doc.paths['/api/v1/tasks/{id}/history'].get;
    expect(op.summary).toContain('last hour');
    expect(Object.keys(op.responses['200'].content['application/json'].schema.properties.items.items.properties).sort()).toEqual(['at', 'copies', 'failing', 'held', 'maxLagMs']);
  });
});
