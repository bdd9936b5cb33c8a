import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { timingSafeEqual } from 'node:crypto';
import type { Logger } from 'pino';

/** What {@link startMetricsServer} serves: anything that renders Prometheus text. */
export interface MetricsExposition {
  /** The content type of the text (Prometheus text format). */
  readonly contentType: string;
  metrics(): Promise<string>;
}

/** A running metrics listener. */
export interface MetricsServer {
  /** `http://host:port` it listens on (the port resolved when 0 was asked). */
  url: string;
  /** Stops listening and closes every connection; idempotent. */
  close(): Promise<void>;
}

/**
 * A minimal HTTP listener for processes without the REST API (`regsync worker --metrics-listen`):
 * `GET /metrics` (Prometheus text) and `GET /healthz` (`{"status":"ok"}`), and any `json` routes
 * the caller adds (`regsync dns` serves `/status`); anything else is 404.
 * Plain `node:http`, no framework: it has two routes and no body to parse.
 *
 * With `token`, every route but `/healthz` (the probes') requires `Authorization: Bearer <token>`
 * (401 otherwise). Deliberately left out: TLS; bind it to an address only the scraper reaches (it
 * shows task and cluster ids, never services, addresses or secrets).
 */
export async function startMetricsServer(
  exposition: MetricsExposition,
  listen: { host: string; port: number },
  logger: Logger,
  json: Readonly<Record<string, () => Promise<unknown>>> = {},
  token?: string,
): Promise<MetricsServer> {
  const expected = token === undefined ? undefined : Buffer.from(`Bearer ${token}`);
  const log = logger.child({ component: 'metrics-server' });
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' }).end('method not allowed\n');
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end('{"status":"ok"}');
      return;
    }
    if (expected !== undefined && !sameSecret(req.headers.authorization, expected)) {
      res.writeHead(401, { 'content-type': 'text/plain; charset=utf-8', 'www-authenticate': 'Bearer' }).end('a bearer token is required\n');
      return;
    }
    const route = path !== undefined && Object.hasOwn(json, path) ? json[path] : undefined;
    if (route !== undefined) {
      route().then(
        (body) => res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' }).end(req.method === 'HEAD' ? undefined : JSON.stringify(body)),
        (err: unknown) => {
          log.warn({ err, path }, 'cannot render a status route');
          res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('cannot render status\n');
        },
      );
      return;
    }
    if (path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('not found: try /metrics\n');
      return;
    }
    exposition.metrics().then(
      (text) => {
        res.writeHead(200, { 'content-type': exposition.contentType }).end(req.method === 'HEAD' ? undefined : text);
      },
      (err: unknown) => {
        log.warn({ err }, 'cannot render metrics');
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end('cannot render metrics\n');
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (err) => log.warn({ err }, 'metrics listener error'));
  const port = (server.address() as AddressInfo).port;
  const url = `http://${listen.host.includes(':') ? `[${listen.host}]` : listen.host}:${port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    close() {
      closing ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Scrapers keep connections alive; nothing here is worth waiting for.
        server.closeAllConnections();
      });
      return closing;
    },
  };
}

/** Compares a presented Authorization header with the expected one in constant time. */
function sameSecret(presented: string | undefined, expected: Buffer): boolean {
  if (presented === undefined) return false;
  const given = Buffer.from(presented);
  return given.length === expected.length && timingSafeEqual(given, expected);
}
