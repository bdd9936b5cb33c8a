import type { FastifyInstance } from 'fastify';
import { ApiError } from './api-error.js';
import type { DnsStatusSource } from './api-deps.js';

/**
 * `GET /api/v1/dns`: the DNS server this process runs (`regsync up --dns-listen`): its zone and
 * listen address, each cluster it serves and whether its answers are fresh or stale (with the
 * registry's error), the size of the index, the names two services want, and the query counters.
 * A process without one answers 404 `dns_not_running`.
 */
export function registerDnsRoutes(app: FastifyInstance, dns: DnsStatusSource | undefined): void {
  app.get('/api/v1/dns', async () => {
    const status = dns?.status();
    if (status === undefined) throw new ApiError('dns_not_running', 'this process runs no DNS server: start it with regsync up --dns-listen <host:port>, or run regsync dns');
    return status;
  });
}
