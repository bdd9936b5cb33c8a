import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type AddressInfo, type Server as TcpServer, type Socket } from 'node:net';
import { inspect } from 'node:util';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterSpec, Instance, ServiceKey } from '../../src/model/index.js';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createNacosAdapter, type NacosAdapter } from './nacos-adapter.js';
import { NacosRequestError } from './nacos-request-error.js';

const silent = pino({ level: 'silent' });
const k: ServiceKey = { namespace: 'public', group: 'DEFAULT_GROUP', name: 'through-proxy' };
const instance = (port: number): Instance => ({
  ip: '10.60.0.1', port, weight: 1, healthy: true, enabled: true, ephemeral: false, cluster: 'DEFAULT', metadata: {},
});

/** A Nacos stand-in in front of the embedded registry: forwards, counts, and can hide API versions. */
interface Proxy {
  endpoint: string;
  /** Most requests in flight at once. */
  mostInFlight: number;
  /** `METHOD /path` of every request, in arrival order. */
  paths: string[];
  /** While true, requests wait in `held` until released. */
  holding: boolean;
  held: Array<() => void>;
  close(): Promise<void>;
}

async function startProxy(target: RunningRegistry | undefined, hide: RegExp | undefined): Promise<Proxy> {
  let inFlight = 0;
  const proxy: Proxy = { endpoint: '', mostInFlight: 0, paths: [], holding: false, held: [], close: async () => {} };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    proxy.paths.push(`${req.method} ${(req.url ?? '').split('?')[0]}`);
    if (!target || (hide && hide.test(req.url ?? ''))) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('Not Found');
      return;
    }
    inFlight += 1;
    proxy.mostInFlight = Math.max(proxy.mostInFlight, inFlight);
    try {
      if (proxy.holding) await new Promise<void>((resolve) => proxy.held.push(resolve));
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const headers: Record<string, string> = {};
      for (const h of ['content-type', 'authorization', 'accesstoken']) {
        const v = req.headers[h];
        if (typeof v === 'string') headers[h] = v;
      }
      const answer = await fetch(`${target.url}${req.url ?? ''}`, {
        method: req.method ?? 'GET',
        headers,
        ...(chunks.length > 0 ? { body: Buffer.concat(chunks) } : {}),
      });
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain' }).end(await answer.text());
    } finally {
      inFlight -= 1;
    }
  };
  const server: Server = createHttpServer((req, res) => void handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  proxy.endpoint = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return proxy;
}

/** A server that answers from a script: `route(method, path)` -> [status, body]. */
async function startScripted(
  route: (method: string, path: string, req: IncomingMessage) => [number, unknown],
): Promise<{ endpoint: string; close(): Promise<void> }> {
  const server: Server = createHttpServer((req, res) => {
    const [status, body] = route(req.method ?? 'GET', (req.url ?? '').split('?')[0] ?? '', req);
    req.resume();
    res.writeHead(status, { 'content-type': 'application/json' }).end(typeof body === 'string' ? body : JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    endpoint: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

describe('NacosAdapter transport', () => {
  let registry: RunningRegistry;
  const closers: Array<() => Promise<void>> = [];
  const adapterFor = (endpoint: string, options: Record<string, unknown>): NacosAdapter => {
    const spec: ClusterSpec = { id: 'nacos-http', kind: 'nacos', endpoints: [endpoint], labels: {}, options };
    const adapter = createNacosAdapter(spec, { logger: silent });
    closers.push(() => adapter.close());
    return adapter;
  };
  const proxyFor = async (target: RunningRegistry | undefined, hide?: RegExp) => {
    const proxy = await startProxy(target, hide);
    closers.push(() => proxy.close());
    return proxy;
  };

  beforeAll(async () => {
    registry = await startRegistry({ port: 0 });
  });
  afterEach(async () => {
    // Adapters first (they hold connections to the proxies), then the proxies.
    for (const close of closers.splice(0)) await close();
  });
  afterAll(async () => {
    await registry.close();
  });

  it('auto prefers v1 where the server serves it (push is only there)', async () => {
    const adapter = adapterFor(registry.endpoint, {});
    expect(await adapter.resolveApiVersion()).toBe('v1');
    expect(adapter.stats().apiVersion).toBe('v1');
  });

  it('auto falls back to v3 where v1 answers 404 (Nacos 3.2+), probing once', async () => {
    const proxy = await proxyFor(registry, /^\/nacos\/v1\//);
    const adapter = adapterFor(proxy.endpoint, {});
    await adapter.apply(k, { upsert: [instance(1)], remove: [] });
    expect(await adapter.listInstances(k)).toEqual([instance(1)]);
    expect(await adapter.resolveApiVersion()).toBe('v3');
    expect(proxy.paths.filter((p) => p.startsWith('GET /nacos/v1/'))).toEqual(['GET /nacos/v1/ns/service/list']);
    expect(proxy.paths).toContain('POST /nacos/v3/admin/ns/instance');
  });

  it('says so when neither API is served (wrong port or context path)', async () => {
    const proxy = await proxyFor(undefined);
    const adapter = adapterFor(proxy.endpoint, {});
    const err = await adapter.listInstances(k).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(NacosRequestError);
    expect((err as Error).message).toMatch(/neither the v1 nor the v3 naming API is served here/);
  });

  it('honours the context path', async () => {
    const proxy = await proxyFor(registry);
    const adapter = adapterFor(proxy.endpoint, { apiVersion: 'v1', contextPath: '/elsewhere' });
    const err = await adapter.listInstances(k).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'nacos-http-error', status: 404, path: '/elsewhere/v1/ns/instance/list' });
  });

  it('queues requests beyond maxConcurrency, and lets heartbeats overtake queued writes', async () => {
    const proxy = await proxyFor(registry);
    proxy.holding = true;
    const adapter = adapterFor(proxy.endpoint, { apiVersion: 'v1', maxConcurrency: 2 });
    const writes = adapter.apply({ ...k, name: 'queued' }, { upsert: Array.from({ length: 6 }, (_, n) => instance(2000 + n)), remove: [] });
    await waitUntil(() => proxy.held.length === 2, { message: 'two writes at the server' });
    expect(adapter.stats().concurrency).toEqual({ inUse: 2, waiting: 4 });

    const beat = adapter.heartbeat({ ...k, name: 'queued-beat' }, { ...instance(1), ephemeral: true });
    await waitUntil(() => adapter.stats().concurrency.waiting === 5, { message: 'beat queued' });
    proxy.held.shift()?.();
    // The next request to reach the server is the beat, ahead of four writes that waited longer.
    await waitUntil(() => proxy.paths.length === 3, { message: 'third request' });
    expect(proxy.paths[2]).toBe('PUT /nacos/v1/ns/instance/beat');

    proxy.holding = false;
    for (const release of proxy.held.splice(0)) release();
    await writes;
    expect(await beat).toBe('ok');
    expect(proxy.mostInFlight).toBe(2);
    expect(registry.store.getService('public', 'DEFAULT_GROUP', 'queued')?.instances.size).toBe(6);
    expect(adapter.stats().concurrency).toEqual({ inUse: 0, waiting: 0 });
  });

  it('times out a server that accepts but never answers', async () => {
    const sockets = new Set<Socket>();
    const silentServer: TcpServer = createTcpServer((socket) => void sockets.add(socket));
    await new Promise<void>((resolve) => silentServer.listen(0, '127.0.0.1', resolve));
    closers.push(async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => silentServer.close(() => resolve()));
    });
    const endpoint = `127.0.0.1:${(silentServer.address() as AddressInfo).port}`;
    const adapter = adapterFor(endpoint, { apiVersion: 'v3', requestTimeoutMs: 200 });
    const err = await adapter.listInstances(k).then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(NacosRequestError);
    expect(err).toMatchObject({ code: 'nacos-timeout', endpoint });
    expect((err as Error).message).toMatch(/no answer within 200 ms/);
  });

  it('reads Nacos 3 "service not exist" as empty, and "already gone" as removed', async () => {
    const notFound = (code: number): [number, unknown] => [404, { code, message: 'not found', data: null }];
    const server = await startScripted((method, path) => {
      if (path === '/nacos/v3/admin/ns/instance/list') return notFound(21008);
      if (method === 'DELETE' && path === '/nacos/v3/admin/ns/instance') return notFound(21003);
      if (path === '/nacos/v3/client/ns/instance') return notFound(21008);
      if (path === '/nacos/v3/admin/ns/service/list') return [404, { code: 22001, message: 'namespace not exist', data: null }];
      return [500, 'unexpected'];
    });
    closers.push(() => server.close());
    const adapter = adapterFor(server.endpoint, { apiVersion: 'v3' });
    expect(await adapter.listInstances(k)).toEqual([]);
    await adapter.apply(k, { upsert: [], remove: [instance(1)] });
    expect(await adapter.heartbeat(k, { ...instance(1), ephemeral: true })).toBe('unknown');
    // Any other code is an error, with the server's words.
    const err = await adapter.listServices({ namespace: 'nope', group: 'G' }).then(() => undefined, (e: unknown) => e);
    expect(err).toMatchObject({ code: 'nacos-http-error', status: 404, nacosCode: 22001 });
    expect((err as Error).message).toMatch(/GET \/nacos\/v3\/admin\/ns\/service\/list at .* HTTP 404 \(code 22001\) namespace not exist/);
  });

  it('moves on to the next endpoint when one answers 503', async () => {
    const starting = await startScripted(() => [503, 'server is STARTING now, please try again later!']);
    closers.push(() => starting.close());
    const spec: ClusterSpec = { id: 'nacos-http', kind: 'nacos', endpoints: [starting.endpoint, registry.endpoint], labels: {}, options: { apiVersion: 'v1' } };
    const adapter = createNacosAdapter(spec, { logger: silent });
    closers.unshift(() => adapter.close());
    await adapter.apply({ ...k, name: 'after-503' }, { upsert: [instance(2)], remove: [] });
    expect(await adapter.listInstances({ ...k, name: 'after-503' })).toEqual([instance(2)]);
  });

  it('does not log in again and again when 403 means a missing permission', async () => {
    let logins = 0;
    const server = await startScripted((method, path) => {
      if (path === '/nacos/v1/auth/login') {
        logins += 1;
        return [200, { accessToken: `token-${logins}`, tokenTtl: 18000, globalAdmin: false }];
      }
      return [403, 'authorization failed!'];
    });
    closers.push(() => server.close());
    const spec: ClusterSpec = {
      id: 'nacos-http', kind: 'nacos', endpoints: [server.endpoint], username: 'reader', password: 'pw', labels: {}, options: { apiVersion: 'v1' },
    };
    const adapter = createNacosAdapter(spec, { logger: silent });
    closers.unshift(() => adapter.close());
    for (let n = 0; n < 5; n += 1) {
      await expect(adapter.listInstances(k)).rejects.toMatchObject({ code: 'nacos-http-error', status: 403 });
    }
    // The first login, and one re-login that showed the token was not the problem.
    expect(logins).toBe(2);
    await expect(adapter.listInstances(k)).rejects.toThrow(/HTTP 403 authorization failed!/);
  });

  it('logs in through v1 when the v3 login is missing, and sends v3 tokens as Bearer headers', async () => {
    const seen: string[] = [];
    const server = await startScripted((method, path, req) => {
      seen.push(`${method} ${path}`);
      if (path === '/nacos/v3/auth/user/login') return [404, { code: 404, message: 'not found', data: null }];
      if (path === '/nacos/v1/auth/login') return [200, { accessToken: 'tok-1', tokenTtl: 18000 }];
      if (path === '/nacos/v3/admin/ns/instance/list' && req.headers.authorization === 'Bearer tok-1' && !(req.url ?? '').includes('tok-1')) {
        return [200, { code: 0, message: 'success', data: [] }];
      }
      return [403, { code: 403, message: 'token invalid!', data: null }];
    });
    closers.push(() => server.close());
    const spec: ClusterSpec = {
      id: 'nacos-http', kind: 'nacos', endpoints: [server.endpoint], username: 'nacos', password: 'pw', labels: {}, options: { apiVersion: 'v3' },
    };
    const adapter = createNacosAdapter(spec, { logger: silent });
    closers.unshift(() => adapter.close());
    expect(await adapter.listInstances(k)).toEqual([]);
    expect(seen).toEqual(['POST /nacos/v3/auth/user/login', 'POST /nacos/v1/auth/login', 'GET /nacos/v3/admin/ns/instance/list']);
    // The password is nowhere in the adapter's inspectable state.
    expect(inspect(adapter, { depth: 10, showHidden: true })).not.toContain("'pw'");
  });
});
