import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fastify, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import type { ClusterSpec, Problem, TaskSpec } from '../model/index.js';
import type { ServiceStatus } from '../store/index.js';
import { apiHarness, expectError, SECRET_MARKER, type ApiHarness } from '../../test/support/api-harness.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { makeTempDir, removeTempDir } from '../../test/support/server-process.js';
import { clusterStatuses, pageOfServices, registerDashboardRoutes, taskSummary } from './dashboard-routes.js';
import { installErrorHandling } from './error-handler.js';

const PASSWORD = `pw-${SECRET_MARKER}`;

function task(id: string, extra: Partial<TaskSpec> = {}): TaskSpec {
  return {
    id,
    source: 'a',
    destination: 'b',
    service: '*',
    group: 'DEFAULT_GROUP',
    namespace: 'public',
    options: {},
    state: 'running',
    createdAt: '2024-01-01T00:00:00.000Z',
    ...extra,
  };
}

function cluster(id: string, extra: Partial<ClusterSpec> = {}): ClusterSpec {
  return { id, kind: 'nacos', endpoints: ['h:1'], labels: {}, options: {}, ...extra };
}

function status(name: string, extra: Partial<ServiceStatus> = {}): ServiceStatus {
  return {
    service: { namespace: 'public', group: 'DEFAULT_GROUP', name },
    sourceInstances: 2,
    destinationInstances: 2,
    lastSyncAt: '2024-01-01T00:00:10.000Z',
    lagMs: 20,
    lastError: null,
    ...extra,
  };
}

/** The fields of a status whose last reconcile met one problem. */
function failedWith(code: Problem['code'], side: Problem['side'], cluster: string, message: string): Partial<ServiceStatus> {
  return { lastError: message, problems: [{ code, side, cluster, message }] };
}

const held = { removes: 9, copies: 10, since: '2024-01-01T00:00:05.000Z', confirm: 'operator' as const };

/** 250 services `svc-000`..`svc-249`; every 10th failed, every 50th holds a deletion. */
const many = Array.from({ length: 250 }, (_, i) =>
  status(`svc-${String(i).padStart(3, '0')}`, {
    lagMs: i,
    ...(i % 10 === 0 ? failedWith('destination_unwritable', 'destination', 'b', `cannot write destination b: refused (${PASSWORD})`) : {}),
    ...(i % 50 === 0 ? { held } : {}),
  }),
);

describe('pageOfServices', () => {
  it('pages in store order, searches names and mapped destinations case-insensitively, filters errors and held deletions', () => {
    expect(pageOfServices(many, { offset: 0, limit: 100 }).items.map((s) => s.service.name).slice(0, 2)).toEqual(['svc-000', 'svc-001']);
    expect(pageOfServices(many, { offset: 200, limit: 100 })).toMatchObject({ total: 250, items: { length: 50 } });
    expect(pageOfServices(many, { offset: 300, limit: 100 })).toEqual({ total: 250, items: [] });
    expect(pageOfServices(many, { offset: 0, limit: 100, q: ' SVC-01 ' }).items.map((s) => s.service.name)).toEqual(
      Array.from({ length: 10 }, (_, i) => `svc-01${i}`),
    );
    expect(pageOfServices(many, { offset: 0, limit: 100, q: 'public/default_group/svc-249' }).total).toBe(1);
    expect(pageOfServices(many, { offset: 0, limit: 10, only: 'error' })).toMatchObject({ total: 25, items: { length: 10 } });
    expect(pageOfServices(many, { offset: 0, limit: 100, only: 'held' }).items.map((s) => s.service.name)).toEqual(['svc-000', 'svc-050', 'svc-100', 'svc-150', 'svc-200']);
    expect(pageOfServices(many, { offset: 0, limit: 100, only: 'held', q: 'svc-1' }).total).toBe(2);
    const mapped = [status('orders'), status('users')];
    const mapping = { namespaces: { public: 'prod' }, groups: { DEFAULT_GROUP: 'SHOP' }, rename: { orders: 'sh-orders' } };
    expect(pageOfServices(mapped, { offset: 0, limit: 100, q: 'prod/shop/sh-' }, mapping).items.map((s) => s.service.name)).toEqual(['orders']);
    expect(pageOfServices(mapped, { offset: 0, limit: 100, q: 'prod/shop/sh-' }).total).toBe(0);
  });
});

describe('taskSummary', () => {
  it('sums instances, takes the largest lag and the latest sync, counts problems and masks secrets', () => {
    const summary = taskSummary(
      task('t'),
      null,
      [
        status('x', { sourceInstances: 3, destinationInstances: 1, lagMs: 50, lastSyncAt: '2024-01-01T00:00:30.000Z' }),
        status('y', { lagMs: null, lastSyncAt: null, lastError: `cannot read source a: 401 for ${PASSWORD}` }),
        status('z', { held, lastError: 'holding a mass deletion' }),
      ],
      [PASSWORD],
    );
    expect(summary).toMatchObject({
      id: 't',
      state: 'error',
      error: null,
      serviceSyncs: 3,
      sourceInstances: 7,
      destinationInstances: 5,
      maxLagMs: 50,
      lastSyncAt: '2024-01-01T00:00:30.000Z',
      failing: 2,
      held: 1,
      lastError: 'public/DEFAULT_GROUP/y: cannot read source a: 401 for ********',
    });
    const empty = taskSummary(task('e', { state: 'paused' }), 'cannot list services: timeout', [], []);
    expect(empty).toMatchObject({ state: 'paused', serviceSyncs: 0, maxLagMs: null, lastSyncAt: null, failing: 0, held: 0, error: 'cannot list services: timeout', lastError: 'cannot list services: timeout' });
  });
});

describe('clusterStatuses', () => {
  const clusters = [cluster('a', { password: PASSWORD }), cluster('b'), cluster('c'), cluster('d')];

  it('blames the destination, not the source, for a destination that cannot be used, and credits neither side', () => {
    const views = clusterStatuses(clusters, [
      {
        spec: task('t1'),
        taskProblem: null,
        statuses: [status('unusable', { lastSyncAt: null, ...failedWith('cluster_unavailable', 'destination', 'b', 'cannot use destination b: cluster b does not exist') })],
      },
    ]);
    const byId = Object.fromEntries(views.map((v) => [v.id, v]));
    expect(byId.a).toMatchObject({ reachability: 'unknown', reached: 0, unreached: 0 });
    expect(byId.b).toMatchObject({ reachability: 'failing', reached: 0, unreached: 1, lastError: 't1 public/DEFAULT_GROUP/unusable: cannot use destination b: cluster b does not exist' });
  });

  it('blames the side a reconcile could not reach, credits what it reached, and knows nothing of unused clusters', () => {
    const views = clusterStatuses(clusters, [
      {
        spec: task('t1'),
        taskProblem: null,
        statuses: [
          status('ok'),
          status('dest-down', failedWith('destination_unwritable', 'destination', 'b', 'cannot write destination b: ECONNREFUSED')),
          status('never-synced', { lastSyncAt: null, lastError: null }),
        ],
      },
      { spec: task('t2', { source: 'c', destination: 'a' }), taskProblem: null, statuses: [status('src-down', failedWith('source_unreadable', 'source', 'c', `cannot read source c: 401 (${PASSWORD})`))] },
      { spec: task('t3', { source: 'd', destination: 'a', state: 'paused' }), taskProblem: null, statuses: [] },
    ]);
    const byId = Object.fromEntries(views.map((v) => [v.id, v]));
    // a: read by t1's synced service and by the one failing at b (t2 failed before reaching it)...
    expect(byId.a).toMatchObject({ reachability: 'ok', reached: 2, unreached: 0, tasks: ['t1', 't2', 't3'] });
    // ...b: written once, refused once; c: never reached; d: only a paused task uses it.
    expect(byId.b).toMatchObject({ reachability: 'partial', reached: 1, unreached: 1, lastError: 't1 public/DEFAULT_GROUP/dest-down: cannot write destination b: ECONNREFUSED' });
    expect(byId.c).toMatchObject({ reachability: 'failing', reached: 0, unreached: 1, lastError: 't2 public/DEFAULT_GROUP/src-down: cannot read source c: 401 (********)' });
    expect(byId.d).toMatchObject({ reachability: 'unknown', reached: 0, unreached: 0, tasks: ['t3'] });
  });

  it("counts a wildcard task's failed service list against its source", () => {
    const [a] = clusterStatuses([cluster('a')], [{ spec: task('t'), taskProblem: { code: 'source_unlisted', cluster: 'a', message: 'cannot list services: ETIMEDOUT' }, statuses: [] }]);
    expect(a).toMatchObject({ reachability: 'failing', unreached: 1, lastError: 't: cannot list services: ETIMEDOUT' });
  });
});

describe('dashboard routes', () => {
  let server: RedisServer;
  let h: ApiHarness;

  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server?.cleanup();
  });
  beforeEach(async () => {
    h = await apiHarness(server);
    await h.store.putCluster(cluster('a', { password: PASSWORD }));
    await h.store.putCluster(cluster('b'));
    await h.store.createTask(task('big'));
    for (const s of many) await h.store.putServiceStatus('big', s);
    await h.store.createTask(task('quiet', { service: 'orders', state: 'paused' }));
  });
  afterEach(async () => {
    await h?.close();
  });

  const get = (url: string) => h.inject({ method: 'GET', url });

  it('GET /api/v1/tasks/:id/services answers one page of the filtered services, with the detail route\'s fields', async () => {
    const first = await get('/api/v1/tasks/big/services');
    expect(first.statusCode).toBe(200);
    const body = first.json() as { total: number; items: Array<Record<string, unknown>> };
    expect(body.total).toBe(250);
    expect(body.items).toHaveLength(100);
    expect(body.items[0]).toEqual({
      service: 'public/DEFAULT_GROUP/svc-000',
      sourceInstances: 2,
      destinationInstances: 2,
      lastSyncAt: '2024-01-01T00:00:10.000Z',
      lagMs: 0,
      lastError: 'cannot write destination b: refused (********)',
      problems: [{ code: 'destination_unwritable', side: 'destination', cluster: 'b', message: 'cannot write destination b: refused (********)' }],
      held,
    });
    const errors = (await get('/api/v1/tasks/big/services?offset=20&limit=2&only=error&q=SVC')).json() as { total: number; items: Array<{ service: string }> };
    expect(errors.total).toBe(25);
    expect(errors.items.map((s) => s.service)).toEqual(['public/DEFAULT_GROUP/svc-200', 'public/DEFAULT_GROUP/svc-210']);
    expect((await get('/api/v1/tasks/big/services?limit=1000')).json().items).toHaveLength(250);
    expect((await get('/api/v1/tasks/quiet/services')).json()).toEqual({ total: 0, items: [] });
  });

  it('refuses a query outside the schema, and unknown tasks', async () => {
    for (const query of ['limit=0', 'limit=1001', 'limit=ten', 'offset=-1', 'only=failed', 'page=2', `q=${'x'.repeat(256)}`]) {
      expectError(await get(`/api/v1/tasks/big/services?${query}`), 400, 'invalid_request');
    }
    expectError(await get('/api/v1/tasks/big/services?only=failed'), 400, 'invalid_request', /querystring\.only must be one of error, held/);
    expectError(await get('/api/v1/tasks/big/services?page=2'), 400, 'invalid_request', /page is not a known field/);
    expectError(await get('/api/v1/tasks/nope/services'), 404, 'task_not_found', /no task nope/);
    expectError(await get('/api/v1/tasks/nope/summary'), 404, 'task_not_found');
  });

  it('GET /api/v1/tasks:summary and /api/v1/tasks/:id/summary sum every task up', async () => {
    const res = await get('/api/v1/tasks:summary');
    expect(res.statusCode).toBe(200);
    const items = (res.json() as { items: Array<Record<string, unknown>> }).items.sort((x, y) => String(x.id).localeCompare(String(y.id)));
    expect(items.map((t) => [t.id, t.state, t.serviceSyncs, t.sourceInstances, t.failing, t.held, t.maxLagMs])).toEqual([
      ['big', 'error', 250, 500, 25, 5, 249],
      ['quiet', 'paused', 0, 0, 0, 0, null],
    ]);
    expect(items[0]?.lastError).toBe('public/DEFAULT_GROUP/svc-000: cannot write destination b: refused (********)');
    const one = await get('/api/v1/tasks/big/summary');
    expect(one.json()).toEqual(items[0]);
  });

  it('GET /api/v1/clusters:status tells which clusters the running tasks reach', async () => {
    const res = await get('/api/v1/clusters:status');
    expect(res.statusCode).toBe(200);
    expect((res.json() as { items: unknown[] }).items).toEqual([
      { id: 'a', reachability: 'ok', tasks: ['big', 'quiet'], reached: 250, unreached: 0, lastError: null, failure: null },
      {
        id: 'b',
        reachability: 'partial',
        tasks: ['big', 'quiet'],
        reached: 225,
        unreached: 25,
        lastError: 'big public/DEFAULT_GROUP/svc-000: cannot write destination b: refused (********)',
        failure: 'error',
      },
    ]);
  });

  it('says how to build the dashboard when it is not built', async () => {
    const app = await bareApp(h, ['/nonexistent/dashboard']);
    try {
      const res = await app.inject({ method: 'GET', url: '/' });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual({ error: { code: 'not_found', message: 'the dashboard is not built: run npm run build (it writes dist/dashboard/)' } });
    } finally {
      await app.close();
    }
  });

  describe('static files', () => {
    let dir: string;
    let app: FastifyInstance;

    beforeEach(async () => {
      dir = makeTempDir('regsync-dashboard-');
      mkdirSync(join(dir, 'sub'));
      writeFileSync(join(dir, 'index.html'), '<!doctype html><title>regsync</title>');
      writeFileSync(join(dir, 'main.js'), 'console.log(1);');
      writeFileSync(join(dir, 'style.css'), 'body {}');
      writeFileSync(join(dir, '.secret.js'), 'nope');
      writeFileSync(join(dir, 'sub', 'x.js'), 'nope');
      app = await bareApp(h, [join(dir, 'missing'), dir]);
    });
    afterEach(async () => {
      await app.close();
      removeTempDir(dir);
    });

    it('serves the page with a strict content security policy, and its scripts and style sheet', async () => {
      const page = await app.inject({ method: 'GET', url: '/' });
      expect(page.statusCode).toBe(200);
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(page.headers['content-security-policy']).toContain("default-src 'none'; script-src 'self'");
      expect(page.headers['x-content-type-options']).toBe('nosniff');
      expect(page.body).toContain('<title>regsync</title>');
      const script = await app.inject({ method: 'GET', url: '/dashboard/main.js' });
      expect([script.statusCode, script.headers['content-type'], script.body]).toEqual([200, 'text/javascript; charset=utf-8', 'console.log(1);']);
      expect((await app.inject({ method: 'GET', url: '/dashboard/style.css' })).headers['content-type']).toBe('text/css; charset=utf-8');
    });

    it('answers 304 to a matching ETag and serves a changed file anew', async () => {
      const first = await app.inject({ method: 'GET', url: '/dashboard/main.js' });
      const etag = String(first.headers.etag);
      expect(first.headers['cache-control']).toBe('no-cache');
      const again = await app.inject({ method: 'GET', url: '/dashboard/main.js', headers: { 'if-none-match': etag } });
      expect([again.statusCode, again.body]).toEqual([304, '']);
      writeFileSync(join(dir, 'main.js'), 'console.log(2); // longer');
      const changed = await app.inject({ method: 'GET', url: '/dashboard/main.js', headers: { 'if-none-match': etag } });
      expect([changed.statusCode, changed.body]).toEqual([200, 'console.log(2); // longer']);
      expect(changed.headers.etag).not.toBe(etag);
    });

    it('serves nothing but the dashboard files', async () => {
      for (const url of ['/dashboard/.secret.js', '/dashboard/sub/x.js', '/dashboard/..%2Fpackage.json', '/dashboard/%2e%2e%2fx.js', '/dashboard/index.html', '/dashboard/nope.js', '/dashboard/main.ts']) {
        const res = await app.inject({ method: 'GET', url });
        expect(res.statusCode, url).toBe(404);
        expect((res.json() as { error: { code: string } }).error.code, url).toBe('not_found');
      }
    });
  });
});

/** A bare app with only the dashboard routes, serving the files of `assetDirs`. */
async function bareApp(h: ApiHarness, assetDirs: string[]): Promise<FastifyInstance> {
  const log = silentLogger();
  const app = fastify({ loggerInstance: log as FastifyBaseLogger });
  installErrorHandling(app, log, 1024);
  registerDashboardRoutes(app, { store: h.store, control: h.control, redis: h.redis, log }, { assetDirs });
  await app.ready();
  return app;
}
