import type { FastifyInstance } from 'fastify';

/** What `/metrics` serves: anything that renders the Prometheus text format (the node's `RegsyncMetrics`). */
export interface MetricsSource {
  /** Content type of the text, as the Prometheus client library gives it. */
  readonly contentType: string;
  metrics(): Promise<string>;
}

/**
 * `GET /metrics`: the process's Prometheus metrics (see `src/metrics/regsync-metrics.ts` for names,
 * labels, and which ones are per process or deployment-wide), at the root like every exporter, so
 * scrape configs need no path. Not in the OpenAPI document's `/api/v1` space on purpose: it is for
 * scrapers, not API clients.
 */
export function registerMetricsRoutes(app: FastifyInstance, metrics: MetricsSource): void {
  app.get('/metrics', async (_request, reply) => {
    const text = await metrics.metrics();
    return reply.type(metrics.contentType).send(text);
  });
}
