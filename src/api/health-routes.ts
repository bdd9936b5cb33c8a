import { setTimeout as delay } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import type { RouteContext } from './api-deps.js';
import { ApiError } from './api-error.js';

/** How long `/readyz` waits for Redis to answer PING. */
const READY_PING_TIMEOUT_MS = 2_000;

/**
 * `/healthz` (the process serves HTTP: liveness) and `/readyz` (it can also reach Redis, so it can
 * serve the API: readiness).
 *
 * Deliberately left out: probing registries or the engine; a registry outage must not take the
 * API out of a load balancer, since the API is how an operator sees and fixes it.
 */
export function registerHealthRoutes(app: FastifyInstance, ctx: RouteContext): void {
  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async () => {
    const { redis } = ctx;
    // Not connected: answer at once instead of queueing a PING behind the reconnect.
    if (redis.status !== 'ready') throw new ApiError('not_ready', `redis is not connected (${redis.status})`);
    const timer = new AbortController();
    try {
      const answer = await Promise.race([
        redis.ping(),
        delay(READY_PING_TIMEOUT_MS, 'timeout' as const, { signal: timer.signal, ref: false }),
      ]);
      if (answer !== 'PONG') throw new ApiError('not_ready', `redis did not answer PING within ${READY_PING_TIMEOUT_MS} ms`);
    } catch (err) {
      if (err instanceof ApiError) throw err;
      throw new ApiError('not_ready', `redis did not answer PING: ${err instanceof Error ? err.message : String(err)}`);
    } finally {
      timer.abort();
    }
    return { status: 'ready' };
  });
}
