import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { ApiError } from './api-error.js';
import { ApiTokenSet, type ApiPrincipal, type ApiToken } from './auth-tokens.js';
import { failedResult } from '../nacos-sync/nacos-sync-wire.js';

/** What a route needs: nothing, a read token (or admin), or an admin token. */
export type RouteAccess = 'open' | 'read' | 'admin';

/** Where the API documentation page lives; its HTML and assets are open, the document it shows is not. */
export const DOCS_PREFIX = '/api/v1/docs';

/** `GET /api/v1/auth/whoami`. */
export const WHOAMI_PATH = '/api/v1/auth/whoami';

/** Paths that stay open whatever is configured: probes of load balancers and orchestrators. */
const OPEN_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

/** Methods that only read; every other method (POST, PUT, PATCH, DELETE, anything new) needs `admin`. */
const READ_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * POSTs that write nothing: a comparison of a body with what is stored (what `regsync apply` asks
 * before it PUTs). A read token may ask; comparing a password needs an admin token (the route says so).
 */
const READ_POSTS = /^\/api\/v1\/(?:clusters|tasks)\/[^/]+\/compare$/;

const RANK: Record<RouteAccess, number> = { open: 0, read: 1, admin: 2 };

/** The realm named in `WWW-Authenticate`. */
const REALM = 'Bearer realm="regsync"';

/**
 * What a request to `path` with `method` needs when tokens are configured. Protected: everything
 * under `/api/` (the native API, its SSE events, the OpenAPI document), under `/v1/` (the nacos-sync
 * compatible API) and `/metrics`; read methods need a read token, the others an admin token. Open:
 * `/healthz`, `/readyz`, the documentation page's HTML and assets (`/api/v1/docs`, `.../static/*`;
 * they hold no data), and everything outside those prefixes (the dashboard's static files: the page
 * asks for a token and sends it with its API calls).
 *
 * Deliberately a rule on paths rather than a flag on each route: a route added later under a
 * protected prefix is protected without anyone remembering to say so.
 */
export function routeAccess(method: string, path: string): RouteAccess {
  const p = path.toLowerCase();
  if (OPEN_PATHS.has(p)) return 'open';
  if (p === DOCS_PREFIX || p === `${DOCS_PREFIX}/` || p.startsWith(`${DOCS_PREFIX}/static/`)) return 'open';
  const guarded = ['/api', '/v1', '/metrics'].some((prefix) => p === prefix || p.startsWith(`${prefix}/`));
  if (!guarded) return 'open';
  if (READ_METHODS.has(method.toUpperCase())) return 'read';
  return method.toUpperCase() === 'POST' && READ_POSTS.test(p) ? 'read' : 'admin';
}

/**
 * What a request needs: the stricter of what its route's pattern and its own (decoded) path need.
 * The router decodes percent-escapes (`/%61pi/v1/clusters` is served by `/api/v1/clusters`), so the
 * pattern of the matched route is what counts; the path also counts, so that a catch-all route (a
 * static file server on `/*`) cannot open a protected prefix.
 */
export function requestAccess(request: FastifyRequest): RouteAccess {
  const byPath = routeAccess(request.method, pathOf(request.url));
  const pattern = request.routeOptions.url;
  if (pattern === undefined) return byPath;
  const byRoute = routeAccess(request.method, pattern);
  return RANK[byRoute] >= RANK[byPath] ? byRoute : byPath;
}

/** The path of a request URL, percent-decoded where possible (absolute-form URLs included). */
export function pathOf(url: string): string {
  let path: string;
  try {
    path = new URL(url, 'http://localhost').pathname;
  } catch {
    path = url.split('?')[0] ?? url;
  }
  try {
    return decodeURIComponent(path);
  } catch {
    return path;
  }
}

const principals = new WeakMap<FastifyRequest, ApiPrincipal>();

/** Whose token a request carried, once the auth hook accepted it; undefined on open routes or without tokens. */
export function principalOf(request: FastifyRequest): ApiPrincipal | undefined {
  return principals.get(request);
}

/** One route of the app with what it needs once tokens are configured. */
export interface RouteEntry {
  method: string;
  /** The route's pattern, as registered (`/api/v1/clusters/:id`). */
  url: string;
  access: RouteAccess;
}

const routeTables = new WeakMap<FastifyInstance, RouteEntry[]>();

/**
 * Every route registered on `app` after {@link installAuth} (all of them, in `buildApiApp`), with its
 * access class: what the tests walk so that no route, however it was added, escapes the check.
 */
export function listRoutes(app: FastifyInstance): readonly RouteEntry[] {
  return routeTables.get(app) ?? [];
}

/** Settings of {@link installAuth}. */
export interface AuthSettings {
  /** The tokens; none (or an empty list) leaves the API open, as it was before tokens existed. */
  tokens?: readonly ApiToken[] | undefined;
}

/**
 * Checks `Authorization: Bearer <token>` on every request the app serves (an `onRequest` hook on
 * the root, so routes added later, by other modules or by the caller, are covered too) and answers
 * 401 `unauthorized` (with `WWW-Authenticate: Bearer`) without a valid token, 403 `forbidden` when a
 * read token asks for a change. The nacos-sync compatible routes (`/v1/...`) answer the same statuses
 * in nacos-sync's result shape. Tokens are compared in constant time (see {@link ApiTokenSet}) and
 * never logged: refusals log the method, path and client address, nothing else.
 *
 * Without tokens every request passes and one warning says so at start.
 *
 * Must run before any route is registered. Returns the token set (for `whoami`).
 *
 * Deliberately left out: tokens in query strings or cookies (they end up in access logs and
 * browser histories; a browser page sends the header with `fetch`), and per-route scopes beyond
 * read/write.
 */
export function installAuth(app: FastifyInstance, settings: AuthSettings, log: Logger): ApiTokenSet {
  const table: RouteEntry[] = [];
  routeTables.set(app, table);
  app.addHook('onRoute', (route) => {
    for (const method of Array.isArray(route.method) ? route.method : [route.method]) {
      table.push({ method: String(method), url: route.url, access: routeAccess(String(method), route.url) });
    }
  });
  const tokens = new ApiTokenSet(settings.tokens ?? []);
  if (!tokens.enabled) {
    log.warn('no API tokens configured: anyone who can reach the REST API can read and change clusters and tasks; set REGSYNC_API_TOKENS or --api-tokens-file');
    return tokens;
  }
  log.info({ tokens: tokens.counts() }, 'the REST API needs a bearer token (except /healthz, /readyz and the static pages)');
  app.addHook('onRequest', async (request, reply) => {
    const access = requestAccess(request);
    const decision = authorize(tokens, access, request.method, request.headers.authorization);
    if (decision.ok) {
      if (decision.principal !== undefined) principals.set(request, decision.principal);
      return undefined;
    }
    const where = { method: request.method, path: pathOf(request.url), ip: request.ip };
    if (decision.reason === 'scope') log.info(where, 'change with a read token refused');
    else if (decision.reason === 'invalid') log.warn(where, 'request with an invalid token refused');
    else log.debug(where, 'request without a token refused');
    return refuse(request, reply, decision.error, decision.challenge);
  });
  return tokens;
}

/** The outcome of {@link authorize}. */
export type AuthDecision =
  | { ok: true; principal: ApiPrincipal | undefined }
  | { ok: false; reason: 'missing' | 'invalid' | 'scope'; error: ApiError; challenge: string };

/**
 * Whether a request needing `access` may go on with `authorization` (its header), without any HTTP
 * framework: the hook of {@link installAuth} uses it, and so can any other listener that serves protected routes.
 * Open routes, and every route while no token is configured, pass without a principal.
 */
export function authorize(tokens: ApiTokenSet, access: RouteAccess, method: string, authorization: string | undefined): AuthDecision {
  if (access === 'open' || !tokens.enabled) return { ok: true, principal: undefined };
  const presented = bearerOf(authorization);
  if (presented === undefined) {
    const error = new ApiError('unauthorized', 'this API needs a token: send Authorization: Bearer <token>');
    return { ok: false, reason: 'missing', error, challenge: REALM };
  }
  const principal = tokens.verify(presented);
  if (principal === undefined) {
    return { ok: false, reason: 'invalid', error: new ApiError('unauthorized', 'the token is not valid'), challenge: `${REALM}, error="invalid_token"` };
  }
  if (access === 'admin' && principal.scope !== 'admin') {
    const error = new ApiError('forbidden', `token ${principal.name} has scope ${principal.scope}: ${method.toUpperCase()} needs an admin token`);
    return { ok: false, reason: 'scope', error, challenge: `${REALM}, error="insufficient_scope", scope="admin"` };
  }
  return { ok: true, principal };
}

/** `GET /api/v1/auth/whoami`: the name and scope of the token sent, or `{scope: "open"}` without tokens. */
export function registerAuthRoutes(app: FastifyInstance, tokens: ApiTokenSet): void {
  app.get(
    WHOAMI_PATH,
    {
      schema: {
        response: {
          200: {
            description: 'The token the request carried; `{"scope": "open"}` when the API has no tokens.',
            type: 'object',
            required: ['scope'],
            properties: { name: { type: 'string' }, scope: { type: 'string', enum: ['read', 'admin', 'open'] } },
          },
        },
      },
    },
    async (request) => {
      if (!tokens.enabled) return { scope: 'open' };
      const principal = principalOf(request);
      // The hook lets no request through to here without a token; this is a second lock.
      if (principal === undefined) throw new ApiError('unauthorized', 'this API needs a token: send Authorization: Bearer <token>');
      return { name: principal.name, scope: principal.scope };
    },
  );
}

/** The token of an `Authorization: Bearer <token>` header, or undefined for anything else. */
function bearerOf(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(header);
  return m?.[1];
}

/**
 * Answers a refused request: `{"error": {...}}`, or nacos-sync's `{success: false, ...}` on its
 * routes, with the error's status either way.
 */
export function refuse(request: FastifyRequest, reply: FastifyReply, apiError: ApiError, challenge?: string): FastifyReply {
  reply.code(apiError.status).type('application/json; charset=utf-8');
  if (challenge !== undefined) reply.header('www-authenticate', challenge);
  const nacosSync = isNacosSyncPath(request);
  return reply.send(nacosSync ? failedResult(apiError.message) : apiError.toBody());
}

function isNacosSyncPath(request: FastifyRequest): boolean {
  const path = (request.routeOptions.url ?? pathOf(request.url)).toLowerCase();
  return path.startsWith('/v1/');
}
