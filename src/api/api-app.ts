import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { silentLogger } from '../log.js';
import type { ApiDeps, RouteContext } from './api-deps.js';
import { installAuth, registerAuthRoutes } from './auth.js';
import { installBodyDepthLimit } from './body-depth.js';
import { registerClusterHistoryRoutes } from './cluster-history-routes.js';
import { registerClusterRoutes } from './cluster-routes.js';
import { registerDashboardRoutes } from './dashboard-routes.js';
import { answerClientError, installErrorHandling, sendApiError } from './error-handler.js';
import { registerDnsRoutes } from './dns-routes.js';
import { registerEventRoutes } from './event-routes.js';
import { registerMetricsRoutes } from './metrics-routes.js';
import { registerHealthRoutes } from './health-routes.js';
import { registerHistoryRoutes } from './history-routes.js';
import { registerKindRoutes } from './kind-routes.js';
import { registerNacosSyncRoutes } from './nacos-sync-routes.js';
import { registerOpenApi } from './openapi.js';
import { DEFAULT_RATE_LIMIT, installRateLimit } from './rate-limit.js';
import { registerShardRoutes } from './shard-routes.js';
import { registerTaskRoutes } from './task-routes.js';

/** Default of {@link ApiDeps.bodyLimitBytes}: far above any cluster or task, far below harm. */
export const DEFAULT_BODY_LIMIT_BYTES = 64 * 1024;

/**
 * Builds the REST API (clusters, tasks, health) without listening: tests call `app.inject()`, the
 * CLI calls `listen`. Bodies must be JSON; every error answers `{"error": {"code", "message"}}`
 * with a code from `API_ERRORS`.
 *
 * Validation is strict: unknown fields are rejected rather than dropped, and types are never
 * coerced (`"5000"` is not an integer), so what is stored is exactly what was sent. Bodies nested
 * deeper than `MAX_BODY_DEPTH` are refused before anything reads them (see `installBodyDepthLimit`).
 *
 * Bearer tokens with a read and an admin scope guard `/api/*`, `/v1/*` and `/metrics` when
 * `deps.tokens` has any (see `installAuth`); every client address is rate-limited (see
 * `installRateLimit`); the OpenAPI document is at `/api/v1/openapi.json`, its docs page at
 * `/api/v1/docs` (see `registerOpenApi`).
 *
 * Deliberately left out: CORS (the dashboard is served from the same origin).
 */
export async function buildApiApp(deps: ApiDeps): Promise<FastifyInstance> {
  const log = (deps.logger ?? silentLogger()).child({ component: 'api' });
  const bodyLimitBytes = deps.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const app = fastify({
    ...(deps.tls ? { https: { cert: deps.tls.cert, key: deps.tls.key } } : {}),
    bodyLimit: bodyLimitBytes,
    // Ids are at most 253 characters; longer path segments are answered 414 by the router.
    routerOptions: { maxParamLength: 256 },
    frameworkErrors: (error, request, reply) => sendApiError(error, request, reply, log, bodyLimitBytes),
    clientErrorHandler: answerClientError(log),
    logController: new LogController({ disableRequestLogging: true }),
    loggerInstance: log as FastifyBaseLogger,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } },
  });
  // JSON only: a text/plain body is answered 415 instead of failing validation as a string.
  app.removeContentTypeParser('text/plain');
  installErrorHandling(app, log, bodyLimitBytes);
  installBodyDepthLimit(app);
  // Before any plugin or route: root hooks added now cover every route, whoever registers it later.
  await installRateLimit(app, deps.rateLimit ?? DEFAULT_RATE_LIMIT, log);
  const tokens = installAuth(app, { tokens: deps.tokens }, log);
  // Before the routes: the OpenAPI document collects them as they are registered.
  await registerOpenApi(app);
  const ctx: RouteContext = { store: deps.store, control: deps.control, redis: deps.redis, log };
  registerHealthRoutes(app, ctx);
  registerAuthRoutes(app, tokens);
  registerClusterRoutes(app, ctx);
  registerKindRoutes(app);
  registerTaskRoutes(app, ctx);
  registerNacosSyncRoutes(app, ctx);
  if (deps.deployment) registerShardRoutes(app, deps.deployment);
  if (deps.metrics) registerMetricsRoutes(app, deps.metrics);
  if (deps.events) registerEventRoutes(app, deps.events, deps.store, deps.eventRoutes);
  if (deps.history) registerHistoryRoutes(app, deps.history, deps.store);
  if (deps.clusterHistory) registerClusterHistoryRoutes(app, deps.clusterHistory, deps.store);
  registerDnsRoutes(app, deps.dns);
  registerDashboardRoutes(app, ctx);
  // Not `ready()` yet: the caller may add routes (metrics, dashboard) before `listen` or `inject`.
  return app;
}
