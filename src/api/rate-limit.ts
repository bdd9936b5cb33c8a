import { fastifyRateLimit } from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { ApiError } from './api-error.js';
import { pathOf, refuse } from './auth.js';

/** At most `max` requests per `timeWindowMs` from one client address. */
export interface RateLimitSettings {
  max: number;
  timeWindowMs: number;
}

/**
 * The default: 600 requests a minute per address, far above what the dashboard, `regsync apply` or a
 * script needs (10 a second), far below what could hurt Redis or guess a token.
 */
export const DEFAULT_RATE_LIMIT: RateLimitSettings = { max: 600, timeWindowMs: 60_000 };

/** Probes are never limited: a load balancer polling often must not take the API out of service. */
const UNLIMITED_PATHS: ReadonlySet<string> = new Set(['/healthz', '/readyz']);

/**
 * Limits the requests of each client address (`request.ip`: the peer's address; IPv6 addresses count
 * per /64) with `@fastify/rate-limit`'s in-memory store, as an `onRequest` hook on the root that runs
 * before authentication (so wrong tokens count too). A request over the limit answers 429
 * `rate_limited` in the API's error shape (nacos-sync's on `/v1/...`) with `Retry-After`; every
 * limited answer carries `x-ratelimit-limit`, `-remaining` and `-reset`. The first refusal of an
 * address in a window is logged.
 *
 * Must run before any route is registered and before {@link installAuth}.
 *
 * Deliberately left out: a limit shared by several API processes (each counts its own requests;
 * `@fastify/rate-limit` can count in Redis should that be needed), and trusting `X-Forwarded-For`
 * (behind a proxy every client would share its address; set the limit for that case).
 */
export async function installRateLimit(app: FastifyInstance, settings: RateLimitSettings | false, log: Logger): Promise<void> {
  if (settings === false) {
    log.info('the REST API has no rate limit');
    return;
  }
  await app.register(fastifyRateLimit, { global: false });
  const check = app.createRateLimit({ max: settings.max, timeWindow: settings.timeWindowMs });
  /** Addresses refused in their current window, with the window's end: one log line each. */
  const warned = new Map<string, number>();
  app.addHook('onRequest', async (request, reply) => {
    if (UNLIMITED_PATHS.has(request.routeOptions.url ?? pathOf(request.url))) return undefined;
    const result = await check(request);
    if (result.isAllowed) return undefined;
    reply.header('x-ratelimit-limit', result.max);
    reply.header('x-ratelimit-remaining', result.remaining);
    reply.header('x-ratelimit-reset', result.ttlInSeconds);
    if (!result.isExceeded) return undefined;
    const now = Date.now();
    if ((warned.get(result.key) ?? 0) <= now) {
      if (warned.size > 10_000) warned.clear();
      warned.set(result.key, now + result.ttl);
      log.warn({ ip: request.ip, max: result.max, timeWindowMs: result.timeWindow }, 'client over the rate limit; refusing its requests until the window ends');
    }
    reply.header('retry-after', result.ttlInSeconds);
    const apiError = new ApiError(
      'rate_limited',
      `more than ${result.max} requests in ${describeWindow(result.timeWindow)} from this address; retry in ${result.ttlInSeconds} s`,
    );
    return refuse(request, reply, apiError);
  });
}

function describeWindow(ms: number): string {
  if (ms % 60_000 === 0) return ms === 60_000 ? 'a minute' : `${ms / 60_000} minutes`;
  if (ms % 1000 === 0) return ms === 1000 ? 'a second' : `${ms / 1000} seconds`;
  return `${ms} ms`;
}
