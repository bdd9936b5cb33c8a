import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { ClusterSpec, TaskSpec } from '../model/index.js';
import type { ServiceStatus } from '../store/index.js';
import { apiHarness, expectError, SECRET_MARKER, type ApiHarness } from '../../test/support/api-harness.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';

let server: RedisServer;
let h: ApiHarness;

const SOURCE_PASSWORD = `src-${SECRET_MARKER}-pw`;
const DEST_PASSWORD = `dst-${SECRET_MARKER}-pw`;

function cluster(id: string, extra: Partial<ClusterSpec> = {}): ClusterSpec {
  return { id, kind: 'nacos', endpoints: ['10.0.0.1:8848'], labels: {}, options: {}, ...extra };
}

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  await server?.cleanup();
});

beforeEach(async () => {
  h = await apiHarness(server);
  await h.store.putCluster(cluster('a', { namespace: 'dev', password: SOURCE_PASSWORD }));
  await h.store.putCluster(cluster('b', { password: DEST_PASSWORD }));
  await h.store.putCluster(cluster('c'));
});

afterEach(async () => {
  await h?.close();
});

const post = (payload: unknown) => h.inject({ method: 'POST', url: '/api/v1/tasks', payload: payload as object });
const get = (url: string) => h.inject({ method: 'GET', url });

function status(name: string, extra: Partial<ServiceStatus> = {}): ServiceStatus {
  return {
    service: { namespace: 'dev', group: 'DEFAULT_GROUP', name },
    sourceInstances: 3,
    destinationInstances: 3,
    lastSyncAt: '2024-01-01T00:00:01.000Z',
    lagMs: 40,
    lastError: null,
    ...extra,
  };
}

/** Creates a task through the API and answers its id. */
async function created(body: Record<string, unknown>): Promise<string> {
  const res = await post(body);
  expect(res.statusCode, res.payload).toBe(201);
  return (res.json() as { id: string }).id;
}

describe('POST /api/v1/tasks', () => {
  it('creates a task with defaults, stores it before telling the engine, answers 201', async () => {
    let storedWhenTold: TaskSpec | undefined;
    h.control.onCall = async (call) => {
      storedWhenTold = await h.store.getTask(call.id);
    };
    const before = new Date().toISOString();
    const res = await post({ source: 'a', destination: 'b', service: 'orders' });
    const after = new Date().toISOString();

    expect(res.statusCode, res.payload).toBe(201);
    const body = res.json() as Record<string, unknown> & { createdAt: string };
    // sha256('a|b|dev|DEFAULT_GROUP|orders') = 7f4e5d1ef75f...; namespace comes from cluster a.
    expect(body).toEqual({
      id: 't-7f4e5d1ef75f',
      source: 'a',
      destination: 'b',
      service: 'orders',
      group: 'DEFAULT_GROUP',
      namespace: 'dev',
      options: {},
      state: 'running',
      createdAt: body.createdAt,
    });
    expect(res.headers.location).toBe('/api/v1/tasks/t-7f4e5d1ef75f');
    expect(body.createdAt >= before && body.createdAt <= after).toBe(true);
    expect(new Date(body.createdAt as string).toISOString()).toBe(body.createdAt);

    const stored = await h.store.getTask('t-7f4e5d1ef75f');
    expect(stored).toEqual({ ...body, state: 'running' });
    expect(h.control.calls).toEqual([{ method: 'taskChanged', id: 't-7f4e5d1ef75f' }]);
    expect(storedWhenTold).toEqual(stored);
  });

  it('takes id, group, namespace, options and "*" as given; namespace defaults to public', async () => {
    const res = await post({
      id: 'my-task',
      source: 'b',
      destination: 'a',
      service: '*',
      group: 'PAYMENTS',
      namespace: 'prod',
      options: { fullSyncIntervalMs: 1000 },
    });
    expect(res.statusCode, res.payload).toBe(201);
    expect(res.json()).toMatchObject({ id: 'my-task', service: '*', group: 'PAYMENTS', namespace: 'prod', options: { fullSyncIntervalMs: 1000 } });
    expect(await h.store.getTask('my-task')).toMatchObject({ options: { fullSyncIntervalMs: 1000 } });

    // Cluster b has no namespace: the task's default is public.
    expect((await post({ source: 'b', destination: 'c', service: 'x', options: { fullSyncIntervalMs: 86_400_000 } })).json()).toMatchObject({
      namespace: 'public',
      options: { fullSyncIntervalMs: 86_400_000 },
    });
    expect((await post({ source: 'b', destination: 'c', service: 's'.repeat(255) })).statusCode).toBe(201);
  });

  it('stores the label options and shows them', async () => {
    const options = { labels: ['site', 'zone'], labelsOverride: true };
    const res = await post({ id: 'labelled', source: 'a', destination: 'b', service: 'orders', options });
    expect(res.statusCode, res.payload).toBe(201);
    expect(res.json()).toMatchObject({ options });
    expect(await h.store.getTask('labelled')).toMatchObject({ options });
    expect((await h.inject({ method: 'GET', url: '/api/v1/tasks/labelled' })).json()).toMatchObject({ options });
  });

  it('answers 409 task_exists for the same id, the same selector, or the same task posted twice', async () => {
    await created({ id: 'first', source: 'a', destination: 'b', service: 'orders' });
    h.control.reset();

    expectError(await post({ id: 'first', source: 'a', destination: 'c', service: 'users' }), 409, 'task_exists', /task first already exists/);
    expectError(
      await post({ id: 'second', source: 'a', destination: 'b', service: 'orders', namespace: 'dev' }),
      409,
      'task_exists',
      /task first already syncs dev\/DEFAULT_GROUP\/orders from a to b/,
    );
    expectError(await post({ source: 'a', destination: 'b', service: 'orders' }), 409, 'task_exists', /first/);
    const generated = await created({ source: 'a', destination: 'c', service: 'orders' });
    expectError(await post({ source: 'a', destination: 'c', service: 'orders' }), 409, 'task_exists', new RegExp(generated));

    expect(await h.store.getTask('second')).toBeUndefined();
    expect((await h.store.listTasks()).map((t) => t.id).sort()).toEqual(['first', generated].sort());
    expect(h.control.calls).toEqual([{ method: 'taskChanged', id: generated }]);
  });

  it('answers 400 unknown_cluster or same_cluster and stores nothing', async () => {
    const before = await h.snapshot();
    expectError(await post({ source: 'nope', destination: 'b', service: 'x' }), 400, 'unknown_cluster', /source nope/);
    expectError(await post({ source: 'a', destination: 'gone', service: 'x' }), 400, 'unknown_cluster', /destination gone/);
    expectError(await post({ source: 'x', destination: 'y', service: 'x' }), 400, 'unknown_cluster', /source x and destination y/);
    expectError(await post({ source: 'a', destination: 'a', service: 'x' }), 400, 'same_cluster', /a/);
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });

  it('keeps the task when the engine cannot be told (it is stored; the engine reads it at its next full sync)', async () => {
    h.control.failures.taskChanged = new Error('engine down');
    const res = await post({ id: 't1', source: 'a', destination: 'b', service: 'x' });
    expect(res.statusCode).toBe(201);
    expect(await h.store.getTask('t1')).toBeDefined();
  });

  const base = { source: 'a', destination: 'b', service: 'orders' };
  const invalid: [string, unknown, RegExp][] = [
    ['a missing source', { destination: 'b', service: 'x' }, /body\.source is required/],
    ['a missing destination', { source: 'a', service: 'x' }, /body\.destination is required/],
    ['a missing service', { source: 'a', destination: 'b' }, /body\.service is required/],
    ['a numeric source', { ...base, source: 1 }, /body\.source must be string/],
    ['an empty service', { ...base, service: '' }, /body\.service/],
    ['a service with a space', { ...base, service: 'my service' }, /body\.service must be a service name without whitespace/],
    ['a service with a tab', { ...base, service: 'a\tb' }, /body\.service/],
    ['a glob that is not "*"', { ...base, service: 'order*' }, /body\.service/],
    ['a service of 256 characters', { ...base, service: 's'.repeat(256) }, /body\.service must NOT have more than 255 characters/],
    ['an invalid id', { ...base, id: 'My Task' }, /body\.id must be 1 to 63/],
    ['an empty group', { ...base, group: '' }, /body\.group/],
    ['a namespace with whitespace', { ...base, namespace: 'a b' }, /body\.namespace must not contain whitespace/],
    ['a numeric group', { ...base, group: 7 }, /body\.group must be string/],
    ['options as an array', { ...base, options: [] }, /body\.options must be object/],
    ['an unknown option', { ...base, options: { retries: 3 } }, /body\.options\.retries is not a known field/],
    ['an interval below 1000', { ...base, options: { fullSyncIntervalMs: 999 } }, /body\.options\.fullSyncIntervalMs must be >= 1000/],
    ['an interval above a day', { ...base, options: { fullSyncIntervalMs: 86_400_001 } }, /body\.options\.fullSyncIntervalMs must be <= 86400000/],
    ['a fractional interval', { ...base, options: { fullSyncIntervalMs: 1500.5 } }, /body\.options\.fullSyncIntervalMs must be integer/],
    ['an interval as a string', { ...base, options: { fullSyncIntervalMs: '5000' } }, /body\.options\.fullSyncIntervalMs must be integer/],
    ['labels as a string', { ...base, options: { labels: 'site' } }, /body\.options\.labels must be array/],
    ['an empty label name', { ...base, options: { labels: ['site', ''] } }, /body\.options\.labels\[1\] must NOT have fewer than 1 characters/],
    ['a label named twice', { ...base, options: { labels: ['site', 'site'] } }, /body\.options\.labels must NOT have duplicate items/],
    ['labelsOverride as a string', { ...base, options: { labelsOverride: 'yes' } }, /body\.options\.labelsOverride must be boolean/],
    ['a state (not settable)', { ...base, state: 'paused' }, /body\.state is not a known field/],
    ['an unknown field', { ...base, priority: 1 }, /body\.priority is not a known field/],
    ['a JSON array', [base], /^body must be object/],
    ['a JSON number', 42, /^body must be object/],
  ];
  for (const [what, body, message] of invalid) {
    it(`answers 400 invalid_request for ${what} and stores nothing`, async () => {
      const before = await h.snapshot();
      const res = await h.inject({ method: 'POST', url: '/api/v1/tasks', headers: { 'content-type': 'application/json' }, payload: JSON.stringify(body) });
      expectError(res, 400, 'invalid_request', message);
      expect(await h.snapshot()).toEqual(before);
      expect(h.control.calls).toEqual([]);
    });
  }
});

describe('PUT /api/v1/tasks/:id', () => {
  const put = (id: string, payload: unknown) => h.inject({ method: 'PUT', url: `/api/v1/tasks/${id}`, payload: payload as object });

  it('creates a task (201) with the defaults of POST and the id of the path', async () => {
    const res = await put('orders-a-b', { source: 'a', destination: 'b', service: 'orders' });
    expect(res.statusCode, res.payload).toBe(201);
    expect(res.headers.location).toBe('/api/v1/tasks/orders-a-b');
    expect(res.json()).toMatchObject({ id: 'orders-a-b', group: 'DEFAULT_GROUP', namespace: 'dev', state: 'running', options: {} });
    expect(await h.store.getTask('orders-a-b')).toMatchObject({ service: 'orders', state: 'running' });
    expect(h.control.calls).toEqual([{ method: 'taskChanged', id: 'orders-a-b' }]);
  });

  it('replaces options in place (200), keeping state and creation time, without removing copies', async () => {
    await put('t1', { id: 't1', source: 'a', destination: 'b', service: 'orders' });
    await h.inject({ method: 'POST', url: '/api/v1/tasks/t1/pause' });
    const createdAt = (await h.store.getTask('t1'))?.createdAt;
    h.control.reset();

    const res = await put('t1', { source: 'a', destination: 'b', service: 'orders', options: { fullSyncIntervalMs: 5000 } });
    expect(res.statusCode, res.payload).toBe(200);
    expect(res.json()).toMatchObject({ id: 't1', state: 'paused', options: { fullSyncIntervalMs: 5000 }, createdAt });
    expect(await h.store.getTask('t1')).toMatchObject({ state: 'paused', createdAt, options: { fullSyncIntervalMs: 5000 } });
    expect(h.control.calls).toEqual([{ method: 'taskChanged', id: 't1' }]);
  });

  it('removes the old copies first when what the task copies changes', async () => {
    await put('t1', { source: 'a', destination: 'b', service: 'orders' });
    h.control.reset();
    let storedDuringRemove: TaskSpec | undefined;
    h.control.onCall = async (call) => {
      if (call.method === 'removeTask') storedDuringRemove = await h.store.getTask(call.id);
    };
    const res = await put('t1', { source: 'a', destination: 'c', service: 'orders' });
    expect(res.statusCode, res.payload).toBe(200);
    expect(h.control.calls).toEqual([
      { method: 'removeTask', id: 't1' },
      { method: 'taskChanged', id: 't1' },
    ]);
    expect(storedDuringRemove?.destination).toBe('b');
    expect(await h.store.getTask('t1')).toMatchObject({ destination: 'c' });
    // The old selector is free again.
    expect((await post({ id: 't2', source: 'a', destination: 'b', service: 'orders' })).statusCode).toBe(201);
  });

  it('answers 502 cleanup_failed and keeps the task unchanged when the old copies cannot be removed', async () => {
    await put('t1', { source: 'a', destination: 'b', service: 'orders' });
    const before = await h.snapshot();
    h.control.failures.removeTask = new Error('destination unreachable');
    expectError(await put('t1', { source: 'a', destination: 'b', service: 'users' }), 502, 'cleanup_failed', /destination unreachable/);
    expect(await h.snapshot()).toEqual(before);
  });

  it('answers 409 task_exists when another task has the selector, and changes nothing', async () => {
    await put('t1', { source: 'a', destination: 'b', service: 'orders' });
    await put('t2', { source: 'a', destination: 'b', service: 'users' });
    h.control.reset();
    const before = await h.snapshot();
    expectError(await put('t2', { source: 'a', destination: 'b', service: 'orders' }), 409, 'task_exists', /task t1 already syncs dev\/DEFAULT_GROUP\/orders/);
    expectError(await put('t3', { source: 'a', destination: 'b', service: 'orders' }), 409, 'task_exists', /task t1/);
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });

  it('answers 400 for a mismatching id, an invalid id, unknown or same clusters, and stores nothing', async () => {
    const before = await h.snapshot();
    expectError(await put('t1', { id: 't2', source: 'a', destination: 'b', service: 'x' }), 400, 'id_mismatch', /t2.*t1/);
    expectError(await put('T_1', { source: 'a', destination: 'b', service: 'x' }), 400, 'invalid_request', /params\.id/);
    expectError(await put('t1', { source: 'a', destination: 'zz', service: 'x' }), 400, 'unknown_cluster', /destination zz/);
    expectError(await put('t1', { source: 'b', destination: 'b', service: 'x' }), 400, 'same_cluster');
    expectError(await put('t1', { source: 'a', destination: 'b', service: 'x', state: 'paused' }), 400, 'invalid_request', /body\.state/);
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });
});

describe('GET /api/v1/tasks', () => {
  it('lists tasks sorted by id with their state: running, paused, or error when something failed', async () => {
    expect((await get('/api/v1/tasks')).json()).toEqual({ items: [] });
    await created({ id: 't4-ok', source: 'a', destination: 'b', service: 'ok' });
    await created({ id: 't1-task-error', source: 'a', destination: 'b', service: 'x1' });
    await created({ id: 't2-service-error', source: 'a', destination: 'b', service: 'x2' });
    await created({ id: 't3-paused', source: 'a', destination: 'b', service: 'x3' });
    await h.store.putServiceStatus('t4-ok', status('ok'));
    await h.store.setTaskError('t1-task-error', { code: 'source_unlisted', cluster: 'a', message: 'source unreachable' });
    await h.store.putServiceStatus('t2-service-error', status('x2'));
    await h.store.putServiceStatus('t2-service-error', status('x2b', { lastError: 'write refused' }));
    await h.store.setTaskState('t3-paused', 'paused');
    await h.store.setTaskError('t3-paused', { code: 'source_unlisted', cluster: 'a', message: 'old failure' });

    const res = await get('/api/v1/tasks');
    expect(res.statusCode).toBe(200);
    const items = (res.json() as { items: Record<string, unknown>[] }).items;
    expect(items.map((t) => [t.id, t.state])).toEqual([
      ['t1-task-error', 'error'],
      ['t2-service-error', 'error'],
      ['t3-paused', 'paused'],
      ['t4-ok', 'running'],
    ]);
    expect(Object.keys(items[0] ?? {}).sort()).toEqual(
      ['createdAt', 'destination', 'group', 'id', 'namespace', 'options', 'service', 'source', 'state'],
    );
  });
});

describe('GET /api/v1/tasks/:id', () => {
  it('shows the task with its task error and per-service status, sorted by service', async () => {
    await created({ id: 't1', source: 'a', destination: 'b', service: '*' });
    let res = await get('/api/v1/tasks/t1');
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ id: 't1', state: 'running', status: { error: null, services: [] } });

    await h.store.putServiceStatus('t1', status('users'));
    await h.store.putServiceStatus('t1', status('orders', { lastError: 'refused', lastSyncAt: null, lagMs: null, destinationInstances: 0 }));
    res = await get('/api/v1/tasks/t1');
    expect(res.json()).toEqual({
      id: 't1',
      source: 'a',
      destination: 'b',
      service: '*',
      group: 'DEFAULT_GROUP',
      namespace: 'dev',
      options: {},
      state: 'error',
      createdAt: (res.json() as { createdAt: string }).createdAt,
      status: {
        error: null,
        services: [
          { service: 'dev/DEFAULT_GROUP/orders', sourceInstances: 3, destinationInstances: 0, lastSyncAt: null, lagMs: null, lastError: 'refused', problems: [], held: null },
          { service: 'dev/DEFAULT_GROUP/users', sourceInstances: 3, destinationInstances: 3, lastSyncAt: '2024-01-01T00:00:01.000Z', lagMs: 40, lastError: null, problems: [], held: null },
        ],
      },
    });
  });

  it('masks the passwords of its clusters in error messages from the engine', async () => {
    await created({ id: 't1', source: 'a', destination: 'b', service: 'orders' });
    await h.store.setTaskError('t1', { code: 'source_unlisted', cluster: 'a', message: `login as nacos/${SOURCE_PASSWORD} refused` });
    const message = `POST ?password=${DEST_PASSWORD}: 403`;
    await h.store.putServiceStatus('t1', status('orders', { lastError: message, problems: [{ code: 'destination_unwritable', side: 'destination', cluster: 'b', message }] }));
    const res = await get('/api/v1/tasks/t1');
    expect(res.json()).toMatchObject({
      status: {
        error: 'login as nacos/******** refused',
        services: [
          {
            lastError: 'POST ?password=********: 403',
            problems: [{ code: 'destination_unwritable', side: 'destination', cluster: 'b', message: 'POST ?password=********: 403' }],
          },
        ],
      },
    });
  });

  it('answers 404 task_not_found for an unknown id', async () => {
    expectError(await get('/api/v1/tasks/nope'), 404, 'task_not_found', /nope/);
  });
});

describe('POST /api/v1/tasks/:id/pause and /resume', () => {
  it('sets the state, tells the engine and answers the task', async () => {
    await created({ id: 't1', source: 'a', destination: 'b', service: 'orders' });
    h.control.reset();

    const paused = await h.inject({ method: 'POST', url: '/api/v1/tasks/t1/pause' });
    expect(paused.statusCode, paused.payload).toBe(200);
    expect(paused.json()).toMatchObject({ id: 't1', state: 'paused' });
    expect(await h.store.getTask('t1')).toMatchObject({ state: 'paused' });

    // An empty JSON object is accepted as a body too.
    const resumed = await h.inject({ method: 'POST', url: '/api/v1/tasks/t1/resume', payload: {} });
    expect(resumed.statusCode, resumed.payload).toBe(200);
    expect(resumed.json()).toMatchObject({ id: 't1', state: 'running' });
    expect(await h.store.getTask('t1')).toMatchObject({ state: 'running' });

    await h.store.setTaskError('t1', { code: 'source_unlisted', cluster: 'a', message: 'boom' });
    expect((await h.inject({ method: 'POST', url: '/api/v1/tasks/t1/resume' })).json()).toMatchObject({ state: 'error' });

    expect(h.control.calls).toEqual([
      { method: 'taskChanged', id: 't1' },
      { method: 'taskChanged', id: 't1' },
      { method: 'taskChanged', id: 't1' },
    ]);
  });

  for (const action of ['pause', 'resume']) {
    it(`${action}: 404 task_not_found for an unknown id, 400 for a body with fields`, async () => {
      await created({ id: 't1', source: 'a', destination: 'b', service: 'orders' });
      h.control.reset();
      const before = await h.snapshot();
      expectError(await h.inject({ method: 'POST', url: `/api/v1/tasks/nope/${action}` }), 404, 'task_not_found');
      expectError(await h.inject({ method: 'POST', url: `/api/v1/tasks/t1/${action}`, payload: { state: 'paused' } }), 400, 'invalid_request', /body\.state is not a known field/);
      expect(await h.snapshot()).toEqual(before);
      expect(h.control.calls).toEqual([]);
    });
  }
});

describe('POST /api/v1/tasks/:id/resync', () => {
  it('asks the engine and answers 202', async () => {
    await created({ id: 't1', source: 'a', destination: 'b', service: 'orders' });
    h.control.reset();
    const res = await h.inject({ method: 'POST', url: '/api/v1/tasks/t1/resync' });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ accepted: true });
    expect(h.control.calls).toEqual([{ method: 'resync', id: 't1' }]);
  });

  it('answers 404 for an unknown task, 409 task_paused for a paused one, 502 when the engine refuses', async () => {
    await created({ id: 't1', source: 'a', destination: 'b', service: 'orders' });
    expectError(await h.inject({ method: 'POST', url: '/api/v1/tasks/nope/resync' }), 404, 'task_not_found');
    h.control.failures.resync = new Error(`queue unavailable (auth ${DEST_PASSWORD})`);
    expectError(await h.inject({ method: 'POST', url: '/api/v1/tasks/t1/resync' }), 502, 'resync_failed', /queue unavailable \(auth \*{8}\)/);
    await h.inject({ method: 'POST', url: '/api/v1/tasks/t1/pause' });
    h.control.reset();
    expectError(await h.inject({ method: 'POST', url: '/api/v1/tasks/t1/resync' }), 409, 'task_paused');
    expect(h.control.calls).toEqual([]);
  });
});

describe('DELETE /api/v1/tasks/:id', () => {
  it('removes the copies first, then the task with its status, and answers 204', async () => {
    await created({ id: 't1', source: 'a', destination: 'b', service: 'orders' });
    await h.store.putServiceStatus('t1', status('orders'));
    await h.store.setTaskError('t1', { code: 'source_unlisted', cluster: 'a', message: 'x' });
    h.control.reset();
    let storedDuringRemove: TaskSpec | undefined;
    h.control.onCall = async (call) => {
      storedDuringRemove = await h.store.getTask(call.id);
    };

    const res = await h.inject({ method: 'DELETE', url: '/api/v1/tasks/t1' });
    expect(res.statusCode).toBe(204);
    expect(res.payload).toBe('');
    expect(h.control.calls).toEqual([{ method: 'removeTask', id: 't1' }]);
    expect(storedDuringRemove?.id).toBe('t1');
    expect(await h.store.getTask('t1')).toBeUndefined();
    expect(await h.store.listServiceStatus('t1')).toEqual([]);
    expect(Object.keys(await h.snapshot()).filter((k) => k.includes('t1'))).toEqual([]);
    expectError(await h.inject({ method: 'DELETE', url: '/api/v1/tasks/t1' }), 404, 'task_not_found');
    // The selector is free again.
    expect((await post({ id: 't2', source: 'a', destination: 'b', service: 'orders' })).statusCode).toBe(201);
  });

  it('answers 502 cleanup_failed with the reason, passwords masked, and keeps the task', async () => {
    await created({ id: 't1', source: 'a', destination: 'b', service: 'orders' });
    await h.store.putServiceStatus('t1', status('orders'));
    const before = await h.snapshot();
    h.control.failures.removeTask = new Error(`deregister on b failed: user nacos password ${DEST_PASSWORD} rejected`);
    const res = await h.inject({ method: 'DELETE', url: '/api/v1/tasks/t1' });
    expectError(res, 502, 'cleanup_failed', /deregister on b failed: user nacos password \*{8} rejected.*retry/);
    expect(await h.snapshot()).toEqual(before);

    delete h.control.failures.removeTask;
    expect((await h.inject({ method: 'DELETE', url: '/api/v1/tasks/t1' })).statusCode).toBe(204);
  });

  it('answers 404 task_not_found for an unknown id without asking the engine', async () => {
    expectError(await h.inject({ method: 'DELETE', url: '/api/v1/tasks/nope' }), 404, 'task_not_found');
    expect(h.control.calls).toEqual([]);
  });
});

describe('task rules', () => {
  it('accepts wildcard groups and namespaces, filters and mapping rules, and shows them', async () => {
    const options = {
      include: ['orders-*'],
      exclude: ['*-canary'],
      mapping: { namespaces: { dev: 'prod', prod: 'dev' }, groups: { A: 'B', B: 'A' }, prefix: 'bj-', metadataDeny: ['secret*'] },
      maxServices: 100,
      maxInstances: 50,
      massDeletionPercent: 30,
      massDeletionMinCopies: 2,
      massDeletionConfirm: 'operator',
    };
    const id = await created({ id: 'all', source: 'a', destination: 'b', service: '*', group: '*', namespace: '*', options });
    expect((await get(`/api/v1/tasks/${id}`)).json()).toMatchObject({ group: '*', namespace: '*', options });
    expect(await h.store.getTask(id)).toMatchObject({ options });
  });

  it('answers 400 invalid_rules, storing nothing, for rules that would make two services one', async () => {
    const before = await h.snapshot();
    for (const [body, message] of [
      [{ service: '*', options: { mapping: { rename: { a: 'x', b: 'x' } } } }, /rename maps both "a" and "b" to "x"/],
      [{ service: '*', namespace: '*', options: { mapping: { namespaces: { dev: 'public' } } } }, /maps "dev" to "public", whose own services are synced as they are/],
      [{ service: 'orders', group: '*' }, /group "\*" and namespace "\*" need service "\*"/],
      [{ service: 'orders', options: { include: ['o*'] } }, /apply to service "\*" only/],
    ] as const) {
      const res = await post({ source: 'a', destination: 'b', ...body });
      expectError(res, 400, 'invalid_rules', message);
    }
    expect(await h.snapshot()).toEqual(before);
  });

  it('answers 400 for malformed rules', async () => {
    for (const [options, message] of [
      [{ mapping: { rename: { a: '' } } }, /body\.options\.mapping\.rename\.a must NOT have fewer than 1 characters/],
      [{ mapping: { other: 1 } }, /body\.options\.mapping\.other is not a known field/],
      [{ massDeletionPercent: 0 }, /body\.options\.massDeletionPercent must be >= 1/],
      [{ massDeletionConfirm: 'never' }, /body\.options\.massDeletionConfirm must be one of read, operator/],
      [{ include: 'orders-*' }, /body\.options\.include must be array/],
    ] as const) {
      expectError(await post({ source: 'a', destination: 'b', service: '*', options }), 400, 'invalid_request', message);
    }
  });
});

describe('POST /api/v1/tasks:batch', () => {
  const batch = (payload: unknown) => h.inject({ method: 'POST', url: '/api/v1/tasks:batch', payload: payload as object });

  it('creates many tasks, then pauses, resumes and deletes them', async () => {
    const tasks = ['orders', 'users', 'payments'].map((service) => ({ id: service, source: 'a', destination: 'b', service }));
    let res = await batch({ action: 'create', tasks });
    expect(res.statusCode, res.payload).toBe(200);
    expect(res.json()).toEqual({ action: 'create', results: tasks.map((t) => ({ id: t.id, result: 'created' })) });
    expect((await h.store.listTasks()).map((t) => [t.id, t.state])).toEqual([
      ['orders', 'running'],
      ['payments', 'running'],
      ['users', 'running'],
    ]);

    res = await batch({ action: 'pause', tasks: ['orders', 'users'] });
    expect(res.json()).toEqual({ action: 'pause', results: [{ id: 'orders', result: 'paused' }, { id: 'users', result: 'paused' }] });
    expect((await h.store.getTask('users'))?.state).toBe('paused');
    expect((await batch({ action: 'resume', tasks: ['users'] })).json()).toEqual({ action: 'resume', results: [{ id: 'users', result: 'resumed' }] });
    expect((await h.store.getTask('users'))?.state).toBe('running');

    res = await batch({ action: 'delete', tasks: ['orders', 'payments'] });
    expect(res.json()).toEqual({ action: 'delete', results: [{ id: 'orders', result: 'deleted' }, { id: 'payments', result: 'deleted' }] });
    expect((await h.store.listTasks()).map((t) => t.id)).toEqual(['users']);
    expect(h.control.calls.filter((c) => c.method === 'removeTask').map((c) => c.id)).toEqual(['orders', 'payments']);
  });

  it('does nothing at all when any item is wrong, and says which', async () => {
    await created({ id: 'taken', source: 'a', destination: 'b', service: 'orders' });
    const before = await h.snapshot();
    const res = await batch({
      action: 'create',
      tasks: [
        { id: 'fine', source: 'a', destination: 'b', service: 'users' },
        { id: 'nope', source: 'a', destination: 'zzz', service: 'x' },
        { id: 'again', source: 'a', destination: 'b', service: 'users' },
        { source: 'a', destination: 'b', service: 'orders' },
      ],
    });
    expectError(res, 400, 'invalid_batch', /nothing created: tasks\[1\]: no cluster for destination zzz; tasks\[2\]: syncs the same service as tasks\[0\]; tasks\[3\]: task taken already syncs/);
    expect(await h.snapshot()).toEqual(before);

    expectError(await batch({ action: 'delete', tasks: ['taken', 'ghost', 'taken'] }), 400, 'invalid_batch', /nothing done: tasks\[1\]: no task ghost; named more than once: taken/);
    expect(await h.snapshot()).toEqual(before);
    expectError(await batch({ action: 'create', tasks: ['taken'] }), 400, 'invalid_request', /body\.tasks\[0\] must be object/);
    expectError(await batch({ action: 'explode', tasks: ['taken'] }), 400, 'invalid_request', /body\.action/);
  });
});

describe('POST /api/v1/tasks/:id/release', () => {
  it('releases the held mass deletions of the task, or of the services named', async () => {
    await created({ id: 't1', source: 'a', destination: 'b', service: '*' });
    const held = { removes: 9, copies: 10, since: '2024-01-01T00:00:00.000Z', confirm: 'operator' as const };
    await h.store.putServiceStatus('t1', status('orders', { held }));
    await h.store.putServiceStatus('t1', status('users', { held }));
    await h.store.putServiceStatus('t1', status('quiet'));
    expect((await get('/api/v1/tasks/t1')).json()).toMatchObject({ status: { services: [{ service: 'dev/DEFAULT_GROUP/orders', held }, { held: null }, { held }] } });

    let res = await h.inject({ method: 'POST', url: '/api/v1/tasks/t1/release', payload: { services: ['users'] } });
    expect(res.statusCode, res.payload).toBe(202);
    expect(res.json()).toEqual({ released: ['dev/DEFAULT_GROUP/users'] });
    expect(await h.store.takeRelease('t1', { namespace: 'dev', group: 'DEFAULT_GROUP', name: 'users' })).toBe(true);
    expect(await h.store.takeRelease('t1', { namespace: 'dev', group: 'DEFAULT_GROUP', name: 'orders' })).toBe(false);
    expect(h.control.calls.filter((c) => c.method === 'resync').map((c) => c.id)).toEqual(['t1']);

    res = await h.inject({ method: 'POST', url: '/api/v1/tasks/t1/release' });
    expect(res.json()).toEqual({ released: ['dev/DEFAULT_GROUP/orders', 'dev/DEFAULT_GROUP/users'] });
    expectError(await h.inject({ method: 'POST', url: '/api/v1/tasks/ghost/release' }), 404, 'task_not_found', /no task ghost/);
  });
});

describe('task commands under concurrency and failure', () => {
  const put = (id: string, payload: unknown) => h.inject({ method: 'PUT', url: `/api/v1/tasks/${id}`, payload: payload as object });
  const batch = (payload: unknown) => h.inject({ method: 'POST', url: '/api/v1/tasks:batch', payload: payload as object });

  it('answers 201 to exactly one of many concurrent PUTs of a new id, 200 to the others, keeping the first creation', async () => {
    for (let round = 0; round < 5; round += 1) {
      const id = `race-${round}`;
      const answers = await Promise.all(Array.from({ length: 8 }, () => put(id, { source: 'a', destination: 'b', service: `orders-${round}` })));
      expect(answers.map((r) => r.statusCode).sort(), answers.map((r) => r.payload).join('\n')).toEqual([200, 200, 200, 200, 200, 200, 200, 201]);
      const stored = await h.store.getTask(id);
      const created = answers.find((r) => r.statusCode === 201)?.json() as { createdAt: string };
      expect(stored?.createdAt).toBe(created.createdAt);
      expect(h.control.calls.filter((c) => c.id === id)).toEqual([{ method: 'taskChanged', id }]);
    }
  });

  it('creates a racing batch whole or not at all', async () => {
    for (let round = 0; round < 10; round += 1) {
      const shared = { id: `shared-${round}`, source: 'a', destination: 'b', service: `shared-${round}` };
      const items = (side: string) => [1, 2, 3].map((n) => ({ id: `${side}${n}-${round}`, source: 'a', destination: 'b', service: `${side}${n}-${round}` }));
      const [left, right] = await Promise.all([batch({ action: 'create', tasks: [...items('l'), shared] }), batch({ action: 'create', tasks: [...items('r'), shared] })]);
      expect([left.statusCode, right.statusCode].sort(), `${left.payload}\n${right.payload}`).toEqual([200, 400]);
      const ids = new Set((await h.store.listTasks()).map((t) => t.id));
      for (const [side, res] of [['l', left], ['r', right]] as const) {
        const present = items(side).map((t) => ids.has(t.id));
        expect(present, `${side}: ${res.payload}`).toEqual(res.statusCode === 200 ? [true, true, true] : [false, false, false]);
        if (res.statusCode === 400) expectError(res, 400, 'invalid_batch', new RegExp(`nothing created: tasks\\[3\\]: task shared-${round} already exists`));
      }
    }
  });

  it('writes nothing and tells nobody for a PUT that changes nothing, whatever the order of its options', async () => {
    const body = { source: 'a', destination: 'b', service: '*', options: { include: ['x*'], fullSyncIntervalMs: 5000, mapping: { prefix: 'p-', suffix: '-s' } } };
    expect((await put('t1', body)).statusCode).toBe(201);
    h.control.reset();
    const before = await h.snapshot();
    const res = await put('t1', { options: { mapping: { suffix: '-s', prefix: 'p-' }, fullSyncIntervalMs: 5000, include: ['x*'] }, service: '*', destination: 'b', source: 'a' });
    expect(res.statusCode, res.payload).toBe(200);
    expect(res.json()).toMatchObject({ id: 't1', options: body.options });
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });

  it('compares a body with the stored task without writing: exists, differs and the fields', async () => {
    const compare = (id: string, payload: unknown) => h.inject({ method: 'POST', url: `/api/v1/tasks/${id}/compare`, payload: payload as object });
    const body = { source: 'a', destination: 'b', service: 'orders', options: { fullSyncIntervalMs: 5000 } };
    expect((await compare('t1', body)).json()).toEqual({ exists: false, differs: true, fields: [] });
    await put('t1', body);
    const before = await h.snapshot();
    h.control.reset();
    expect((await compare('t1', body)).json()).toEqual({ exists: true, differs: false, fields: [] });
    expect((await compare('t1', { ...body, destination: 'c', options: {} })).json()).toEqual({ exists: true, differs: true, fields: ['destination', 'options'] });
    expectError(await compare('t1', { ...body, destination: 'zz' }), 400, 'unknown_cluster');
    expectError(await compare('t1', { ...body, id: 't2' }), 400, 'id_mismatch');
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });

  it('runs the task again when a delete or a replace moving its copies fails to remove them', async () => {
    await put('t1', { source: 'a', destination: 'b', service: 'orders' });
    h.control.reset();
    h.control.failures.removeTask = new Error('destination unreachable');
    expectError(await h.inject({ method: 'DELETE', url: '/api/v1/tasks/t1' }), 502, 'cleanup_failed');
    expectError(await put('t1', { source: 'a', destination: 'c', service: 'orders' }), 502, 'cleanup_failed');
    expectError(await batch({ action: 'delete', tasks: ['t1'] }), 502, 'cleanup_failed');
    const again = [
      { method: 'removeTask', id: 't1' },
      { method: 'taskChanged', id: 't1' },
    ];
    expect(h.control.calls).toEqual([...again, ...again, ...again]);
    expect(await h.store.getTask('t1')).toMatchObject({ destination: 'b', state: 'running' });
  });
});
