import { readFileSync } from 'node:fs';
import { fastifySwagger, type SwaggerOptions } from '@fastify/swagger';
import { fastifySwaggerUi, type FastifySwaggerUiOptions } from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { DOCS_PREFIX, routeAccess, WHOAMI_PATH } from './auth.js';
import { API_ERRORS } from './errors.js';

/** `GET /api/v1/openapi.json`: the OpenAPI document of the running API. */
export const OPENAPI_PATH = '/api/v1/openapi.json';

/** Where the docs page keeps a token typed into it (`sessionStorage`, also read from `localStorage`). */
export const DOCS_TOKEN_STORAGE_KEY = 'regsync.apiToken';

/** The areas of the API, one tag each, in the order the docs page shows them. */
const TAGS = [
  { name: 'clusters', description: 'Registries to sync between, and the kinds they can be. Passwords go in, never out (`hasPassword`).' },
  { name: 'tasks', description: 'What is synced from where to where, with per-service status.' },
  { name: 'shards', description: 'Shards, their leaders and replicas, and the live workers.' },
  { name: 'cmdb', description: 'The CMDB of each worker, as of its last heartbeat.' },
  { name: 'dns', description: "The DNS interface this process runs: zone, clusters served (fresh or stale), index size, collisions, query counters." },
  { name: 'nacos-sync', description: "nacos-sync's console API (`/v1/cluster/*`, `/v1/task/*`), answering in nacos-sync's shapes." },
  { name: 'auth', description: 'Which token a request carries.' },
  { name: 'health', description: 'Liveness and readiness probes; always open.' },
  { name: 'docs', description: 'This document.' },
] as const;

/** One-line summaries of the known operations, by `METHOD url` as routes are registered. */
const SUMMARIES: Readonly<Record<string, string>> = {
  'POST /api/v1/clusters': 'Create a cluster',
  'GET /api/v1/clusters': 'List the clusters',
  'GET /api/v1/clusters/:id': 'Show a cluster',
  'PUT /api/v1/clusters/:id': 'Create or replace a cluster (an omitted password keeps the stored one)',
  'DELETE /api/v1/clusters/:id': 'Delete a cluster no task uses',
  'GET /api/v1/kinds': 'The registry kinds this build serves, with their options',
  'POST /api/v1/clusters/:id/compare': 'Whether PUT of this body would change the cluster, and which fields (what `regsync apply` asks first)',
  'POST /api/v1/tasks': 'Create a task',
  'GET /api/v1/tasks': 'List the tasks',
  'GET /api/v1/tasks/:id': 'Show a task with the status of its services',
  'PUT /api/v1/tasks/:id': 'Create or replace a task (what `regsync apply` uses)',
  'DELETE /api/v1/tasks/:id': "Remove the task's copies from the destination, then the task",
  'POST /api/v1/tasks/:id/compare': 'Whether PUT of this body would change the task, and which fields (what `regsync apply` asks first)',
  'POST /api/v1/tasks/:id/pause': 'Pause a task: stop its watches and beats',
  'POST /api/v1/tasks/:id/resume': 'Resume a paused task',
  'POST /api/v1/tasks/:id/resync': 'Reconcile every service of a task now',
  'POST /api/v1/tasks/:id/release': 'Apply the mass deletions held for a task (all, or the services listed)',
  'GET /api/v1/clusters/:id/history': 'Failed requests to a cluster over the last hour, per minute and error code (oldest first)',
  'GET /api/v1/tasks/:id/history': 'Copies, max lag, failing and held services of a task over the last hour (oldest first)',
  'POST /api/v1/tasks::batch': 'Create, pause, resume or delete many tasks at once (all or nothing)',
  'GET /api/v1/shards': 'Shards: leader, fencing token, lease, replicas, queue depth, service syncs',
  'GET /api/v1/workers': 'Live workers with the shards they lead and serve',
  'GET /api/v1/cmdb': 'The CMDB of every worker',
  'GET /api/v1/dns': "This process's DNS server: clusters served and whether stale, names, collisions, counters",
  [`GET ${WHOAMI_PATH}`]: 'The name and scope of the token sent',
  [`GET ${OPENAPI_PATH}`]: 'This OpenAPI document',
  'GET /healthz': 'Liveness: the process serves HTTP',
  'GET /readyz': 'Readiness: the process reaches Redis',
  'POST /v1/cluster/add': 'nacos-sync: add a cluster',
  'GET /v1/cluster/list': 'nacos-sync: list clusters (paged)',
  'GET /v1/cluster/detail': 'nacos-sync: show a cluster',
  'DELETE /v1/cluster/delete': 'nacos-sync: delete a cluster no task uses',
  'GET /v1/cluster/types': 'nacos-sync: the cluster types served',
  'POST /v1/task/add': 'nacos-sync: add a task',
  'POST /v1/task/addAll': 'nacos-sync: one task for every service of every group',
  'GET /v1/task/list': 'nacos-sync: list tasks (paged)',
  'GET /v1/task/detail': 'nacos-sync: show a task',
  'POST /v1/task/update': 'nacos-sync: run (SYNC) or delete (DELETE) a task',
  'DELETE /v1/task/delete': "nacos-sync: remove a task's copies, then the task",
  'DELETE /v1/task/deleteInBatch': "nacos-sync: remove the copies of several tasks, then the tasks",
};

const integer = { type: 'integer' } as const;
const string = { type: 'string' } as const;
const strings = { type: 'array', items: string } as const;
const nullable = (type: string) => ({ type: [type, 'null'] }) as const;

const ERROR_SCHEMA = {
  type: 'object' as const,
  required: ['error'],
  properties: {
    error: {
      type: 'object' as const,
      required: ['code', 'message'],
      properties: {
        code: { type: 'string' as const, enum: Object.keys(API_ERRORS), description: 'Stable; branch on it. See the catalogue in src/api/errors.ts.' },
        message: { type: 'string' as const, description: 'For a human; never contains a secret.' },
      },
    },
  },
};

/**
 * Responses of routes that declare no response schema (their bodies are built elsewhere), for the
 * document only: nothing here validates or filters an answer.
 */
const DOC_RESPONSES: Readonly<Record<string, Record<string, object>>> = {
  'GET /api/v1/shards': {
    200: {
      description: 'The shards of the deployment, read from Redis at every request.',
      type: 'object',
      properties: {
        shards: integer,
        replicas: integer,
        items: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              shard: integer,
              leader: nullable('string'),
              token: nullable('integer'),
              leaseTtlLeftMs: nullable('integer'),
              leaseAgeMs: nullable('integer'),
              replicas: strings,
              queueDepth: integer,
              serviceSyncs: integer,
            },
          },
        },
      },
    },
  },
  'GET /api/v1/workers': {
    200: {
      description: 'The live workers, read from Redis at every request.',
      type: 'object',
      properties: {
        items: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              id: string,
              host: string,
              pid: integer,
              startedAt: string,
              roles: strings,
              leads: { type: 'array', items: integer },
              serves: { type: 'array', items: integer },
              status: { type: 'object', description: 'How its parts were doing at its last heartbeat (`cmdb` when it runs one).' },
            },
          },
        },
      },
    },
  },
  'GET /api/v1/cmdb': {
    200: {
      description: 'The CMDB of each worker, as of its last heartbeat.',
      type: 'object',
      properties: {
        items: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              worker: string,
              provider: string,
              ok: { type: 'boolean' },
              lastError: nullable('string'),
              lastRefreshAt: nullable('string'),
              lastEventPollAt: nullable('string'),
              entities: integer,
            },
          },
        },
      },
    },
  },
  'POST /api/v1/tasks::batch': {
    200: {
      description: 'Every item was done; the result of each.',
      type: 'object',
      properties: {
        action: { type: 'string', enum: ['create', 'pause', 'resume', 'delete'] },
        results: {
          type: 'array',
          items: { type: 'object', properties: { id: string, result: { type: 'string', enum: ['created', 'paused', 'resumed', 'deleted'] } } },
        },
      },
    },
  },
  'POST /api/v1/tasks/:id/resync': {
    202: { description: 'The engine accepted the resync.', type: 'object', properties: { accepted: { type: 'boolean' } } },
  },
  'POST /api/v1/tasks/:id/release': {
    202: { description: 'The held deletions released (`namespace/group/name` of each service).', type: 'object', properties: { released: strings } },
  },
  'DELETE /api/v1/tasks/:id': { 204: { description: 'The copies and the task are gone.', type: 'null' } },
  'DELETE /api/v1/clusters/:id': { 204: { description: 'The cluster is gone.', type: 'null' } },
  [`GET ${OPENAPI_PATH}`]: { 200: { description: 'The OpenAPI 3.1 document of this API.', type: 'object' } },
  'GET /healthz': { 200: { description: 'The process serves HTTP.', type: 'object', properties: { status: { const: 'ok' } } } },
  'GET /readyz': {
    200: { description: 'Redis answers: the API can serve.', type: 'object', properties: { status: { const: 'ready' } } },
    503: { description: 'Redis does not answer (`not_ready`).', ...ERROR_SCHEMA },
  },
};

/** What a status means, for responses whose schema says nothing. */
const STATUS_TEXT: Readonly<Record<string, string>> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No content',
};


const NACOS_SYNC_FAILURE_SCHEMA = {
  type: 'object' as const,
  required: ['success', 'resultCode', 'resultMessage'],
  properties: { success: { const: false }, resultCode: { type: 'string' as const }, resultMessage: { type: 'string' as const } },
};

/**
 * Generates the OpenAPI 3.1 document from the route schemas (`@fastify/swagger`, which collects
 * routes as they are registered: call this before any route) and serves it at
 * {@link OPENAPI_PATH}, with a docs page (Swagger UI from `@fastify/swagger-ui`, every asset served
 * from this process: nothing is loaded from elsewhere) at {@link DOCS_PREFIX}.
 *
 * The document declares bearer authentication for every operation except the health probes, tags
 * each operation with its area, adds summaries, the 401/403/429 answers of the auth and rate-limit
 * hooks, and response descriptions for routes that declare no response schema. Routes outside the
 * API (the dashboard's static files) are left out.
 *
 * The docs page's HTML and assets are open (they hold no data); the document itself needs a read
 * token when tokens are configured. The page adds the token kept under
 * {@link DOCS_TOKEN_STORAGE_KEY} (the dashboard can share it) to its requests and asks for one when
 * the document answers 401.
 *
 * Deliberately left out: a YAML route of its own (`/api/v1/docs/yaml` serves it), and validating the
 * document at start (the test suite checks its shape).
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  const swaggerOptions: SwaggerOptions = {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'regsync REST API',
        version: regsyncVersion(),
        description:
          'Clusters, tasks and their status, shards and workers, and the nacos-sync compatible console API. ' +
          'When the server has API tokens, send `Authorization: Bearer <token>`: a read token may GET, changes need an admin token. ' +
          'Errors are `{"error": {"code", "message"}}` (nacos-sync routes: `{success: false, resultCode, resultMessage}`).',
      },
      tags: [...TAGS],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            description: 'An API token (`REGSYNC_API_TOKENS` or `--api-tokens-file`) of scope read or admin. Not needed when the server has none.',
          },
        },
        schemas: { ApiError: ERROR_SCHEMA, NacosSyncFailure: NACOS_SYNC_FAILURE_SCHEMA },
      },
      security: [{ bearerAuth: [] }],
    },
    transform: ({ schema, url, route }) => {
      const method = Array.isArray(route.method) ? String(route.method[0]) : String(route.method);
      if (schema?.hide === true || !isApiPath(url)) return { schema: { ...schema, hide: true }, url };
      const key = `${method} ${url}`;
      const responses: Record<string, object> = { ...(DOC_RESPONSES[key] ?? {}) };
      for (const [status, response] of Object.entries((schema?.response ?? {}) as Record<string, object>)) {
        responses[status] = { description: (response as { description?: string }).description ?? STATUS_TEXT[status] ?? 'Answer', ...response };
      }
      const documented: Record<string, unknown> = { ...schema, tags: [tagOf(url)], response: responses };
      if (Object.keys(responses).length === 0) documented.response = { 200: { description: 'OK' } };
      const summary = SUMMARIES[key];
      if (summary !== undefined) documented.summary = summary;
      if (routeAccess(method, url) === 'open') documented.security = [];
      return { schema: documented, url };
    },
    transformObject: (documentObject) => {
      if (!('openapiObject' in documentObject)) return documentObject.swaggerObject;
      const { openapiObject } = documentObject;
      for (const [path, item] of Object.entries(openapiObject.paths ?? {})) {
        for (const [method, operation] of Object.entries(item as Record<string, { responses?: Record<string, unknown> }>)) {
          const access = routeAccess(method, path);
          if (access === 'open') continue;
          const failure = { $ref: `#/components/schemas/${path.startsWith('/v1/') ? 'NacosSyncFailure' : 'ApiError'}` };
          const content = { 'application/json': { schema: failure } };
          const responses = (operation.responses ??= {});
          responses['401'] ??= { description: 'No token, or not a valid one (`unauthorized`; `WWW-Authenticate: Bearer`).', content };
          if (access === 'admin') responses['403'] ??= { description: 'A read token cannot change anything (`forbidden`).', content };
          else if (method === 'post' && path === '/api/v1/clusters/{id}/compare') {
            responses['403'] ??= { description: 'A read token cannot compare a password (`forbidden`).', content };
          }
          responses['429'] ??= { description: 'Too many requests from this address (`rate_limited`; `Retry-After`).', content };
        }
      }
      return openapiObject;
    },
  };
  await app.register(fastifySwagger, swaggerOptions);

  const uiOptions: FastifySwaggerUiOptions = {
    routePrefix: DOCS_PREFIX,
    theme: { title: 'regsync REST API' },
    // The default validator badge fetches from the internet; nothing on this page may.
    validatorUrl: false,
    uiConfig: {
      deepLinking: true,
      requestInterceptor: browserFunction(REQUEST_INTERCEPTOR),
      responseInterceptor: browserFunction(RESPONSE_INTERCEPTOR),
    },
    // The browser itself refuses to load anything from elsewhere.
    staticCSP:
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; " +
      "connect-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'self'",
  };
  await app.register(fastifySwaggerUi, uiOptions);

  app.get(OPENAPI_PATH, async () => app.swagger());
}

/** Adds the kept token to the page's requests, unless the "Authorize" dialog already set one. */
const REQUEST_INTERCEPTOR = `function (request) {
  var token = null;
  try { token = window.sessionStorage.getItem('${DOCS_TOKEN_STORAGE_KEY}') || window.localStorage.getItem('${DOCS_TOKEN_STORAGE_KEY}'); } catch (e) {}
  if (token && !request.headers.Authorization && !request.headers.authorization) request.headers.Authorization = 'Bearer ' + token;
  return request;
}`;

/** Asks for a token (once per page load) when the document answers 401, keeps it for the session and reloads. */
const RESPONSE_INTERCEPTOR = `function (response) {
  if (response.status === 401 && /\\/docs\\/json(\\?|$)/.test(response.url || '') && !window.regsyncAskedForToken) {
    window.regsyncAskedForToken = true;
    var token = window.prompt('This regsync API needs a token. Enter a read or admin token:');
    if (token) {
      try { window.sessionStorage.setItem('${DOCS_TOKEN_STORAGE_KEY}', token.trim()); } catch (e) {}
      window.location.reload();
    }
  }
  return response;
}`;

/**
 * A function whose source, as `@fastify/swagger-ui` writes it into the page (it serializes
 * functions with `toString()`), is `source`: browser code kept as text, so that no compiler or test
 * transform rewrites it into something the browser cannot run.
 */
function browserFunction<T>(source: string): (value: T) => T {
  const fn = (value: T): T => value;
  Object.defineProperty(fn, 'toString', { value: () => source });
  return fn;
}

/** Routes that belong in the document: the API, the nacos-sync API, metrics and the probes. */
function isApiPath(url: string): boolean {
  return ['/api/', '/v1/'].some((p) => url.startsWith(p)) || ['/metrics', '/healthz', '/readyz'].includes(url);
}

/** The tag of a route: its area. */
function tagOf(url: string): string {
  if (url === '/healthz' || url === '/readyz') return 'health';
  if (url.startsWith('/v1/')) return 'nacos-sync';
  if (url === OPENAPI_PATH) return 'docs';
  if (url === '/api/v1/workers') return 'shards';
  if (url === '/api/v1/kinds') return 'clusters';
  if (url.startsWith('/api/v1/tasks')) return 'tasks';
  const area = /^\/api\/v1\/([A-Za-z0-9_-]+)/.exec(url)?.[1];
  return area ?? url.replace(/^\//, '').split('/')[0] ?? 'other';
}

/** regsync's version, from its package.json (from the sources or the build), for `info.version`. */
function regsyncVersion(): string {
  for (const rel of ['../../package.json', '../../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'regsync' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // not there: try the next
    }
  }
  return '0.0.0';
}
