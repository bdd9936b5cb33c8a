import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { apiHarness, expectError, type ApiHarness } from '../../test/support/api-harness.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { DeploymentView } from '../coord/deployment-view.js';
import { listRoutes } from './auth.js';
import type { ApiToken } from './auth-tokens.js';

const READ: ApiToken = { name: 'dash', scope: 'read', token: 'read-token-0123456789abcdef' };

interface Operation {
  tags?: string[];
  summary?: string;
  security?: unknown[];
  parameters?: { name: string; in: string }[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { description: string; content?: Record<string, { schema: Schema }> }>;
}
interface Schema {
  type?: unknown;
  required?: string[];
  properties?: Record<string, Schema>;
  $ref?: string;
}
interface OpenApiDocument {
  openapi: string;
  info: { title: string; version: string };
  security: Record<string, string[]>[];
  tags: { name: string }[];
  components: { securitySchemes: Record<string, { type: string; scheme: string }>; schemas: Record<string, Schema> };
  paths: Record<string, Record<string, Operation>>;
}

const AREAS = ['clusters', 'tasks', 'shards', 'cmdb', 'dns', 'nacos-sync', 'health', 'auth', 'docs', 'metrics', 'events'];

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

async function documentOf(headers: Record<string, string> = {}): Promise<OpenApiDocument> {
  const res = await h.inject({ method: 'GET', url: '/api/v1/openapi.json', headers });
  expect(res.statusCode, res.payload).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  return JSON.parse(res.payload) as OpenApiDocument;
}

const jsonSchema = (op: Operation | undefined, status: string): Schema | undefined => op?.responses[status]?.content?.['application/json']?.schema;

describe('GET /api/v1/openapi.json', () => {
  it('is an OpenAPI 3 document of every API route, with schemas, tags and bearer auth', async () => {
    const redis = new Redis(server.url, { lazyConnect: true });
    const deployment = new DeploymentView(redis, 'openapi', async () => ({ shards: 1, replicas: 1, createdAt: '' }), async () => 0, async () => new Map());
    h = await apiHarness(server, { deployment });
    const doc = await documentOf();
    expect(doc.openapi).toMatch(/^3\.\d+\.\d+$/);
    expect(doc.info.title).toBe('regsync REST API');
    expect(doc.info.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.security).toEqual([{ bearerAuth: [] }]);
    expect(doc.tags.map((t) => t.name)).toEqual(expect.arrayContaining(['clusters', 'tasks', 'shards', 'cmdb', 'nacos-sync', 'health']));

    // The main operations, with the schemas the routes validate with.
    const createCluster = doc.paths['/api/v1/clusters']?.post;
    const body = createCluster?.requestBody?.content['application/json']?.schema;
    expect(body?.required).toEqual(['id', 'kind', 'endpoints']);
    expect(Object.keys(body?.properties ?? {})).toEqual(expect.arrayContaining(['id', 'kind', 'endpoints', 'password', 'labels']));
    const shown = jsonSchema(createCluster, '201');
    expect(Object.keys(shown?.properties ?? {})).toContain('hasPassword');
    expect(Object.keys(shown?.properties ?? {})).not.toContain('password');
    expect(jsonSchema(doc.paths['/api/v1/clusters']?.get, '200')?.properties?.items).toBeDefined();
    expect(doc.paths['/api/v1/clusters/{id}']?.put?.parameters).toEqual(expect.arrayContaining([expect.objectContaining({ name: 'id', in: 'path' })]));
    expect(jsonSchema(doc.paths['/api/v1/tasks/{id}']?.get, '200')?.properties?.status).toBeDefined();
    expect(doc.paths['/api/v1/tasks']?.post?.requestBody?.content['application/json']?.schema.required).toEqual(['source', 'destination', 'service']);
    expect(doc.paths['/api/v1/tasks:batch']?.post?.requestBody).toBeDefined();
    expect(doc.paths['/v1/cluster/add']?.post?.requestBody?.content['application/json']?.schema.properties?.clusterName).toBeDefined();
    expect(doc.paths['/v1/cluster/list']?.get?.parameters?.map((p) => p.name)).toEqual(expect.arrayContaining(['pageNum', 'pageSize', 'clusterName']));

    // Every operation: an area tag, described answers, the auth and limit answers where they apply.
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(item)) {
        const what = `${method.toUpperCase()} ${path}`;
        expect(op.tags?.length, what).toBe(1);
        expect(AREAS, what).toContain(op.tags?.[0]);
        for (const [status, response] of Object.entries(op.responses)) expect(response.description.length, `${what} ${status}`).toBeGreaterThan(1);
        if (path === '/healthz' || path === '/readyz') {
          expect(op.security, what).toEqual([]);
          expect(op.tags).toEqual(['health']);
          continue;
        }
        expect(op.security, what).toBeUndefined();
        expect(op.responses['401'], what).toBeDefined();
        expect(op.responses['429'], what).toBeDefined();
        // Every change needs an admin token; of the POSTs that change nothing, comparing a cluster may carry a password.
        expect(op.responses['403'] !== undefined, what).toBe(method !== 'get' && path !== '/api/v1/tasks/{id}/compare');
        const failure = jsonSchema(op, '401')?.$ref;
        expect(failure, what).toBe(path.startsWith('/v1/') ? '#/components/schemas/NacosSyncFailure' : '#/components/schemas/ApiError');
      }
    }
    expect(doc.components.schemas.ApiError?.properties?.error).toBeDefined();

    // Routes without a response schema are still described.
    const shards = jsonSchema(doc.paths['/api/v1/shards']?.get, '200');
    expect(Object.keys(shards?.properties ?? {})).toEqual(['shards', 'replicas', 'items']);
    expect(doc.paths['/api/v1/workers']?.get?.tags).toEqual(['shards']);
    expect(doc.paths['/api/v1/cmdb']?.get?.tags).toEqual(['cmdb']);
    expect(doc.paths['/api/v1/tasks/{id}']?.delete?.responses['204']?.description).toMatch(/gone/);

    // The document and the app agree: every API route is in it, nothing else is.
    const served = listRoutes(h.app)
      .filter((r) => r.method !== 'HEAD' && /^\/(api\/|v1\/|healthz$|readyz$|metrics$)/.test(r.url) && !r.url.startsWith('/api/v1/docs'))
      .map((r) => `${r.method.toLowerCase()} ${r.url.replace(/::/g, '~colon~').replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/~colon~/g, ':')}`)
      .sort();
    const documented = Object.entries(doc.paths).flatMap(([path, item]) => Object.keys(item).map((m) => `${m} ${path}`)).sort();
    expect(documented).toEqual(served);
    expect(served).toEqual(expect.arrayContaining(['get /api/v1/shards', 'post /api/v1/tasks:batch', 'delete /v1/task/deleteInBatch', 'get /readyz']));
    redis.disconnect();
  });

  it('needs a read token when the API has tokens, as /api/v1/docs/json does', async () => {
    h = await apiHarness(server, { tokens: [READ] });
    expectError(await h.inject({ method: 'GET', url: '/api/v1/openapi.json' }), 401, 'unauthorized');
    expectError(await h.inject({ method: 'GET', url: '/api/v1/docs/json' }), 401, 'unauthorized');
    expectError(await h.inject({ method: 'GET', url: '/api/v1/docs/yaml' }), 401, 'unauthorized');
    const doc = await documentOf({ authorization: `Bearer ${READ.token}` });
    expect(doc.paths['/api/v1/clusters']).toBeDefined();
    const ui = await h.inject({ method: 'GET', url: '/api/v1/docs/json', headers: { authorization: `Bearer ${READ.token}` } });
    expect(JSON.parse(ui.payload)).toEqual(doc);
  });
});

describe('GET /api/v1/docs', () => {
  it('serves a page whose every resource comes from this server, also without a token', async () => {
    h = await apiHarness(server, { tokens: [READ] });
    const page = await h.inject({ method: 'GET', url: '/api/v1/docs' });
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const csp = String(page.headers['content-security-policy']);
    for (const directive of ["default-src 'self'", "script-src 'self'", "connect-src 'self'", "img-src 'self' data:"]) expect(csp).toContain(directive);
    expect(page.payload).not.toMatch(/https?:\/\//);
    const refs = [...page.payload.matchAll(/(?:src|href)\s*=\s*"([^"]*)"/g)].map((m) => m[1] as string);
    expect(refs.length).toBeGreaterThanOrEqual(5);
    for (const ref of refs) {
      expect(ref, ref).toMatch(/^\/api\/v1\/docs\/static\/[A-Za-z0-9._-]+$/);
      const asset = await h.inject({ method: 'GET', url: ref });
      expect(asset.statusCode, ref).toBe(200);
      if (ref.endsWith('.css')) {
        for (const url of asset.payload.matchAll(/url\(\s*["']?([^"')]*)/g)) expect((url[1] as string).startsWith('data:'), `${ref}: ${url[1]}`).toBe(true);
        expect(asset.payload).not.toMatch(/@import/);
      }
      if (ref.endsWith('swagger-initializer.js')) {
        expect(asset.payload).toContain('validatorUrl: null');
        expect(asset.payload).toContain("resolveUrl('./json')");
        // The only address in it is in a comment.
        for (const line of asset.payload.split('\n').filter((l) => /https?:\/\//.test(l))) expect(line.trim().startsWith('//'), line).toBe(true);
        // The page sends the token it keeps, and asks for one when the document answers 401.
        expect(asset.payload).toContain("request.headers.Authorization = 'Bearer ' + token");
        expect(asset.payload).toContain('response.status === 401');
      }
    }
  });
});
