import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiHarness, expectError, type ApiHarness } from '../../test/support/api-harness.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { listRoutes, routeAccess, type RouteEntry } from './auth.js';
import type { ApiToken } from './auth-tokens.js';

const ADMIN: ApiToken = { name: 'ops', scope: 'admin', token: 'admin-token-0123456789abcdef' };
const READ: ApiToken = { name: 'dash', scope: 'read', token: 'read-token-0123456789abcdef' };
const WRONG = 'wrong-token-0123456789abcdef';

let server: RedisServer;
let h: ApiHarness;

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  await server?.cleanup();
});

afterEach(async () => {
  await h?.close();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A request to a route pattern: params and wildcards filled in, `::` as the literal colon it means. */
function requestFor(route: RouteEntry, headers: Record<string, string> = {}): InjectOptions {
  const url = route.url
    .replace(/::/g, '~colon~')
    .replace(/:[A-Za-z0-9_]+/g, 'x1')
    .replace(/\*/g, 'x1')
    .replace(/~colon~/g, ':');
  return { method: route.method as InjectOptions['method'], url, headers };
}

/** Asserts a refusal: status, `WWW-Authenticate`, and the body in the shape of the route's API. */
function expectRefused(res: LightMyRequestResponse, route: RouteEntry, status: 401 | 403): void {
  const what = `${route.method} ${route.url}`;
  expect(res.statusCode, `${what}: ${res.payload}`).toBe(status);
  expect(res.headers['www-authenticate'], what).toMatch(/^Bearer realm="regsync"/);
  if (route.method === 'HEAD') return;
  if (route.url.startsWith('/v1/')) {
    expect(res.json(), what).toMatchObject({ success: false, resultCode: 'SYSTEM_ERROR' });
  } else {
    expectError(res, status, status === 401 ? 'unauthorized' : 'forbidden');
  }
}

describe('routeAccess', () => {
  it('guards the API, the nacos-sync API and metrics; leaves probes, docs assets and static pages open', () => {
    expect(routeAccess('GET', '/api/v1/clusters')).toBe('read');
    expect(routeAccess('HEAD', '/api/v1/clusters')).toBe('read');
    expect(routeAccess('POST', '/api/v1/clusters')).toBe('admin');
    expect(routeAccess('POST', '/api/v1/clusters/a/compare')).toBe('read');
    expect(routeAccess('POST', '/api/v1/tasks/:id/compare')).toBe('read');
    expect(routeAccess('POST', '/api/v1/clusters/a/compare/x')).toBe('admin');
    expect(routeAccess('PUT', '/api/v1/clusters/a/compare')).toBe('admin');
    expect(routeAccess('PATCH', '/api/v1/tasks/x')).toBe('admin');
    expect(routeAccess('PROPFIND', '/api/v1/tasks/x')).toBe('admin');
    expect(routeAccess('GET', '/api/v1/events')).toBe('read');
    expect(routeAccess('GET', '/api/v1/openapi.json')).toBe('read');
    expect(routeAccess('GET', '/api/v1/docs/json')).toBe('read');
    expect(routeAccess('GET', '/API/V1/clusters')).toBe('read');
    expect(routeAccess('GET', '/api')).toBe('read');
    expect(routeAccess('GET', '/metrics')).toBe('read');
    expect(routeAccess('DELETE', '/v1/task/delete')).toBe('admin');
    expect(routeAccess('GET', '/v1/cluster/list')).toBe('read');
    for (const open of ['/healthz', '/readyz', '/', '/dashboard/app.js', '/api/v1/docs', '/api/v1/docs/', '/api/v1/docs/static/index.css', '/apix']) {
      expect(routeAccess('GET', open), open).toBe('open');
    }
  });
});

describe('with tokens', () => {
  beforeEach(async () => {
    // No rate limit here: the walk over every route sends hundreds of requests from one address.
    h = await apiHarness(server, { tokens: [ADMIN, READ], rateLimit: false });
    // Routes a caller adds after building the app (as the metrics and event routes may be) are covered too.
    h.app.get('/metrics', async () => 'metrics');
    h.app.get('/api/v1/events', async () => ({ later: true }));
    h.app.post('/v1/cluster/later', async () => ({ later: true }));
  });

  it('refuses every guarded route without a token or with a wrong one, and read tokens on every change', async () => {
    const routes = listRoutes(h.app);
    // The table holds what the app serves, including what was added after it was built.
    for (const expected of ['GET /api/v1/clusters', 'POST /api/v1/tasks::batch', 'DELETE /v1/task/deleteInBatch', 'GET /metrics', 'GET /api/v1/events', 'POST /v1/cluster/later', 'GET /api/v1/openapi.json', 'GET /api/v1/auth/whoami']) {
      expect(routes.map((r) => `${r.method} ${r.url}`), expected).toContain(expected);
    }
    const guarded = routes.filter((r) => r.access !== 'open');
    expect(guarded.length).toBeGreaterThan(30);
    for (const route of guarded) {
      expectRefused(await h.inject(requestFor(route)), route, 401);
      expectRefused(await h.inject(requestFor(route, bearer(WRONG))), route, 401);
      expectRefused(await h.inject(requestFor(route, { authorization: `Basic ${Buffer.from(`x:${ADMIN.token}`).toString('base64')}` })), route, 401);
      if (route.access === 'admin') expectRefused(await h.inject(requestFor(route, bearer(READ.token))), route, 403);
    }
    // Open routes: the probes, the docs page's assets, and the static pages outside the guarded prefixes; nothing else.
    const open = routes.filter((r) => r.access === 'open');
    for (const route of open) {
      const ok = ['/healthz', '/readyz'].includes(route.url) || route.url.startsWith('/api/v1/docs') || !/^\/(api|v1|metrics)(\/|$)/i.test(route.url);
      expect(ok, `${route.method} ${route.url} is open`).toBe(true);
      if (route.url.startsWith('/api/v1/docs')) expect(route.url).not.toMatch(/\/(json|yaml)$/);
      const res = await h.inject(requestFor(route));
      expect(res.statusCode, `${route.method} ${route.url}`).not.toBe(401);
    }
  });

  it('lets a read token read and an admin token read and change', async () => {
    const cluster = { id: 'east', kind: 'nacos', endpoints: ['127.0.0.1:8848'] };
    expect((await h.inject({ method: 'POST', url: '/api/v1/clusters', payload: cluster, headers: bearer(ADMIN.token) })).statusCode).toBe(201);
    expectError(await h.inject({ method: 'POST', url: '/api/v1/clusters', payload: { ...cluster, id: 'west' }, headers: bearer(READ.token) }), 403, 'forbidden', /needs an admin token/);
    expect(await h.store.getCluster('west')).toBeUndefined();
    for (const token of [READ, ADMIN]) {
      const list = await h.inject({ method: 'GET', url: '/api/v1/clusters', headers: bearer(token.token) });
      expect(list.statusCode).toBe(200);
      expect((list.json() as { items: { id: string }[] }).items.map((c) => c.id)).toEqual(['east']);
      expect((await h.inject({ method: 'GET', url: '/v1/cluster/list', headers: bearer(token.token) })).json()).toMatchObject({ success: true, totalSize: 1 });
      expect((await h.inject({ method: 'GET', url: '/metrics', headers: bearer(token.token) })).statusCode).toBe(200);
      const whoami = await h.inject({ method: 'GET', url: '/api/v1/auth/whoami', headers: bearer(token.token) });
      expect(whoami.json()).toEqual({ name: token.name, scope: token.scope });
    }
    // The scheme is case-insensitive, as RFC 7235 says.
    expect((await h.inject({ method: 'GET', url: '/api/v1/clusters', headers: { authorization: `bearer ${READ.token}` } })).statusCode).toBe(200);
    // nacos-sync routes keep their shape, with the auth status.
    const refused = await h.inject({ method: 'POST', url: '/v1/cluster/add', payload: { clusterName: 'x', clusterType: 'NACOS', connectKeyList: ['h:1'] }, headers: bearer(READ.token) });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({ success: false, resultCode: 'SYSTEM_ERROR', resultMessage: 'token dash has scope read: POST needs an admin token' });
    expect((await h.inject({ method: 'DELETE', url: `/api/v1/clusters/east`, headers: bearer(ADMIN.token) })).statusCode).toBe(204);
  });

  it('lets a read token compare a body with what is stored, but not a password', async () => {
    const cluster = { id: 'east', kind: 'nacos', endpoints: ['127.0.0.1:8848'], password: 'stored-secret' };
    expect((await h.inject({ method: 'PUT', url: '/api/v1/clusters/east', payload: cluster, headers: bearer(ADMIN.token) })).statusCode).toBe(201);
    const { password: _password, ...withoutPassword } = cluster;
    const compare = (payload: Record<string, unknown>, token: ApiToken) => h.inject({ method: 'POST', url: '/api/v1/clusters/east/compare', payload, headers: bearer(token.token) });
    expect((await compare(withoutPassword, READ)).json()).toMatchObject({ exists: true, differs: false });
    // A read token must not learn whether a guess is the stored password.
    expectError(await compare({ ...cluster, password: 'guess' }, READ), 403, 'forbidden', /comparing a password needs an admin token/);
    expect((await compare({ ...cluster, password: 'guess' }, ADMIN)).json()).toMatchObject({ exists: true, differs: true });
  });

  it('cannot be walked around with escapes, case or absolute URLs', async () => {
    for (const url of ['/%61pi/v1/clusters', '/api/v1/%63lusters', '/API/v1/clusters', 'http://example.test/api/v1/clusters', '/api/v1/docs/../clusters']) {
      const res = await h.inject({ method: 'GET', url });
      expect([401, 404], `${url}: ${res.statusCode} ${res.payload}`).toContain(res.statusCode);
      expect(res.payload).not.toContain('"items"');
    }
  });

  it('keeps the probes and the docs page open', async () => {
    expect((await h.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    expect((await h.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    expect((await h.inject({ method: 'GET', url: '/api/v1/docs' })).statusCode).toBe(200);
    expectError(await h.inject({ method: 'GET', url: '/api/v1/openapi.json' }), 401, 'unauthorized');
    expect((await h.inject({ method: 'GET', url: '/api/v1/openapi.json', headers: bearer(READ.token) })).statusCode).toBe(200);
  });

  it('says why a token was refused', async () => {
    const missing = await h.inject({ method: 'GET', url: '/api/v1/tasks' });
    expectError(missing, 401, 'unauthorized', /send Authorization: Bearer <token>/);
    expect(missing.headers['www-authenticate']).toBe('Bearer realm="regsync"');
    const wrong = await h.inject({ method: 'GET', url: '/api/v1/tasks', headers: bearer(WRONG) });
    expectError(wrong, 401, 'unauthorized', /the token is not valid/);
    expect(wrong.headers['www-authenticate']).toBe('Bearer realm="regsync", error="invalid_token"');
    const scope = await h.inject({ method: 'DELETE', url: '/api/v1/tasks/x', headers: bearer(READ.token) });
    expect(scope.headers['www-authenticate']).toBe('Bearer realm="regsync", error="insufficient_scope", scope="admin"');
    // Unknown API paths ask for a token before saying there is nothing: no route discovery without one.
    expectError(await h.inject({ method: 'GET', url: '/api/v1/nothing-here' }), 401, 'unauthorized');
    expectError(await h.inject({ method: 'GET', url: '/api/v1/nothing-here', headers: bearer(READ.token) }), 404, 'not_found');
  });
});

describe('without tokens', () => {
  beforeEach(async () => {
    h = await apiHarness(server);
  });

  it('stays open, and whoami says so', async () => {
    expect((await h.inject({ method: 'GET', url: '/api/v1/auth/whoami' })).json()).toEqual({ scope: 'open' });
    expect((await h.inject({ method: 'GET', url: '/api/v1/auth/whoami', headers: bearer(WRONG) })).json()).toEqual({ scope: 'open' });
    expect((await h.inject({ method: 'POST', url: '/api/v1/clusters', payload: { id: 'a', kind: 'nacos', endpoints: ['h:1'] } })).statusCode).toBe(201);
    expect((await h.inject({ method: 'GET', url: '/api/v1/openapi.json' })).statusCode).toBe(200);
  });
});
