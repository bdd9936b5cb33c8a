import { fastify, LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { silentLogger } from '../log.js';
import type { ApiDeps, RouteContext } from './api-deps.js';
import { registerClusterRoutes } from './cluster-routes.js';
import { installErrorHandling, sendApiError } from './error-handler.js';
import { registerHealthRoutes } from './health-routes.js';
import { registerNacosSyncRoutes } from './nacos-sync-routes.js';
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
 * coerced (`"5000"` is not an integer), so what is stored is exactly what was sent.
 *
 * Deliberately left out: authentication, CORS, SSE and metrics (separate plugins when they come).
 */
export async function buildApiApp(deps: ApiDeps): Promise<FastifyInstance> {
  const log = (deps.logger ?? silentLogger()).child({ component: 'api' });
  const bodyLimitBytes = deps.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const app = fastify({
    bodyLimit: bodyLimitBytes,
    // Ids are at most 253 characters; longer path segments are answered 414 by the router.
    routerOptions: { maxParamLength: 256 },
    frameworkErrors: (error, request, reply) => sendApiError(error, request, reply, log, bodyLimitBytes),
    logController: new LogController({ disableRequestLogging: true }),
    loggerInstance: log as FastifyBaseLogger,
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } },
  });
  // JSON only: a text/plain body is answered 415 instead of failing validation as a string.
  app.removeContentTypeParser('text/plain');
  installErrorHandling(app, log, bodyLimitBytes);
  const ctx: RouteContext = { store: deps.store, control: deps.control, redis: deps.redis, log };
  registerHealthRoutes(app, ctx);
  registerClusterRoutes(app, ctx);
  registerTaskRoutes(app, ctx);
  registerNacosSyncRoutes(app, ctx);
  if (deps.deployment) registerShardRoutes(app, deps.deployment);
  // Not `ready()` yet: the caller may add routes (metrics, dashboard) before `listen` or `inject`.
  return app;
}
