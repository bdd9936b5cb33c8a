import { connect } from 'node:net';
import type { InjectOptions } from 'fastify';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { apiHarness, expectError, type ApiHarness } from '../../test/support/api-harness.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { DEFAULT_BODY_LIMIT_BYTES } from './index.js';

let server: RedisServer;
let h: ApiHarness;

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  await server?.cleanup();
});

beforeEach(async () => {
  h = await apiHarness(server);
  // Existing records, so that body errors are checked on routes whose ids exist.
  await h.store.putCluster({ id: 'a', kind: 'nacos', endpoints: ['h:1'], labels: {}, options: {} });
  await h.store.putCluster({ id: 'b', kind: 'nacos', endpoints: ['h:2'], labels: {}, options: {} });
  await h.store.createTask({
    id: 't1',
    source: 'a',
    destination: 'b',
    service: 'orders',
    group: 'DEFAULT_GROUP',
    namespace: 'public',
    options: {},
    state: 'running',
    createdAt: '2024-01-01T00:00:00.000Z',
  });
});

afterEach(async () => {
  await h?.close();
});

/** Every route that takes a body, with a valid one. */
const bodyRoutes: { method: 'POST' | 'PUT'; url: string; valid: object }[] = [
  { method: 'POST', url: '/api/v1/clusters', valid: { id: 'c', kind: 'nacos', endpoints: ['h:1'] } },
  { method: 'PUT', url: '/api/v1/clusters/a', valid: { kind: 'nacos', endpoints: ['h:1'] } },
  { method: 'POST', url: '/api/v1/tasks', valid: { source: 'a', destination: 'b', service: 'users' } },
  { method: 'PUT', url: '/api/v1/tasks/t1', valid: { source: 'a', destination: 'b', service: 'orders', options: { fullSyncIntervalMs: 5000 } } },
  { method: 'POST', url: '/api/v1/tasks/t1/pause', valid: {} },
  { method: 'POST', url: '/api/v1/tasks/t1/resume', valid: {} },
  { method: 'POST', url: '/api/v1/tasks/t1/resync', valid: {} },
];

/** Every route that names a record, with an id that does not exist. */
const unknownIdRoutes: [InjectOptions['method'], string, object | undefined, string][] = [
  ['GET', '/api/v1/clusters/nope', undefined, 'cluster_not_found'],
  ['DELETE', '/api/v1/clusters/nope', undefined, 'cluster_not_found'],
  ['GET', '/api/v1/tasks/nope', undefined, 'task_not_found'],
  ['DELETE', '/api/v1/tasks/nope', undefined, 'task_not_found'],
  ['POST', '/api/v1/tasks/nope/pause', undefined, 'task_not_found'],
  ['POST', '/api/v1/tasks/nope/resume', undefined, 'task_not_found'],
  ['POST', '/api/v1/tasks/nope/resync', undefined, 'task_not_found'],
];

describe('health', () => {
  it('GET /healthz answers ok', async () => {
    const res = await h.inject({ method: 'GET', url: '/healthz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ok' });
  });

  it('GET /readyz answers ready while Redis answers', async () => {
    const res = await h.inject({ method: 'GET', url: '/readyz' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: 'ready' });
  });
});

describe('bad input on every route with a body', () => {
  for (const route of bodyRoutes) {
    describe(`${route.method} ${route.url}`, () => {
      const send = (payload: string | Buffer, contentType?: string) =>
        h.inject({
          method: route.method,
          url: route.url,
          payload,
          headers: contentType === undefined ? {} : { 'content-type': contentType },
        });

      async function expectNothingChanged(attempt: () => Promise<void>): Promise<void> {
        const before = await h.snapshot();
        await attempt();
        expect(await h.snapshot()).toEqual(before);
        expect(h.control.calls).toEqual([]);
      }

      it('answers 400 invalid_json to malformed JSON', async () => {
        await expectNothingChanged(async () => {
          for (const payload of ['{', '{"id": }', "{'id': 'c'}", '{"a":1}}', 'nul']) {
            expectError(await send(payload, 'application/json'), 400, 'invalid_json');
          }
          expectError(await send('', 'application/json'), 400, 'invalid_json', /empty/);
        });
      });

      it('answers 415 unsupported_media_type to a body that is not JSON', async () => {
        await expectNothingChanged(async () => {
          const json = JSON.stringify(route.valid);
          expectError(await send(json, 'text/plain'), 415, 'unsupported_media_type');
          expectError(await send(new URLSearchParams({ id: 'c' }).toString(), 'application/x-www-form-urlencoded'), 415, 'unsupported_media_type');
          expectError(await send(json, 'application/xml'), 415, 'unsupported_media_type');
          expectError(await send(json), 415, 'unsupported_media_type');
        });
      });

      it('answers 413 body_too_large above 64 KiB', async () => {
        await expectNothingChanged(async () => {
          const huge = JSON.stringify({ ...route.valid, options: { blob: 'x'.repeat(DEFAULT_BODY_LIMIT_BYTES) } });
          expectError(await send(huge, 'application/json'), 413, 'body_too_large', /65536 bytes/);
        });
      });

      it('answers 400 invalid_request to an unknown field', async () => {
        await expectNothingChanged(async () => {
          expectError(await send(JSON.stringify({ ...route.valid, bogus: true }), 'application/json'), 400, 'invalid_request', /body\.bogus is not a known field/);
        });
      });

      it('answers 400 invalid_request to a body of the wrong type', async () => {
        await expectNothingChanged(async () => {
          for (const payload of ['[]', '"text"', '12', 'true', 'null']) {
            expectError(await send(payload, 'application/json'), 400, 'invalid_request', /^body must be object/);
          }
        });
      });

      it('accepts the valid body with a charset', async () => {
        const res = await send(JSON.stringify(route.valid), 'application/json; charset=utf-8');
        expect(res.statusCode, res.payload).toBeLessThan(300);
      });
    });
  }
});

describe('unknown ids', () => {
  for (const [method, url, payload, code] of unknownIdRoutes) {
    it(`${method} ${url} answers 404 ${code} and changes nothing`, async () => {
      const before = await h.snapshot();
      const res = await h.inject({ method, url, ...(payload ? { payload } : {}) });
      expectError(res, 404, code as 'task_not_found');
      expect(await h.snapshot()).toEqual(before);
      expect(h.control.calls).toEqual([]);
    });
  }
});

describe('unknown routes', () => {
  it('answers 404 not_found for unknown paths and methods', async () => {
    const cases: [InjectOptions['method'], string][] = [
      ['GET', '/nope'],
      ['GET', '/api/v2/clusters'],
      ['POST', '/api/v1/clusters/a'],
      ['PATCH', '/api/v1/tasks/t1'],
      ['DELETE', '/api/v1/clusters'],
      ['GET', '/api/v1/tasks/t1/pause'],
    ];
    for (const [method, url] of cases) {
      expectError(await h.inject({ method, url }), 404, 'not_found', new RegExp(`${method} ${url.replace(/\//g, '\\/')}$`));
    }
  });
});

describe('limits', () => {
  it('takes the body limit from its deps', async () => {
    const small = await apiHarness(server, { bodyLimitBytes: 1024 });
    try {
      const big = { id: 'c', kind: 'nacos', endpoints: ['h:1'], options: { aliases: ['x'.repeat(1100)] } };
      expectError(await small.inject({ method: 'POST', url: '/api/v1/clusters', payload: big }), 413, 'body_too_large', /1024 bytes/);
      const fits = { id: 'c', kind: 'nacos', endpoints: ['h:1'], options: { aliases: ['x'.repeat(900)] } };
      expect((await small.inject({ method: 'POST', url: '/api/v1/clusters', payload: fits })).statusCode).toBe(201);
    } finally {
      await small.close();
    }
  });

  it('accepts a body just under the default limit', async () => {
    const payload = { id: 'c', kind: 'nacos', endpoints: ['h:1'], options: { aliases: ['x'.repeat(DEFAULT_BODY_LIMIT_BYTES - 200)] } };
    expect((await h.inject({ method: 'POST', url: '/api/v1/clusters', payload })).statusCode).toBe(201);
  });
});

describe('requests the HTTP parser refuses', () => {
  /** Sends `raw` on a fresh connection and answers everything the server wrote until it closed. */
  async function exchange(raw: string): Promise<{ status: number; contentType: string | undefined; body: unknown }> {
    await h.app.listen({ host: '127.0.0.1', port: 0 });
    const address = h.app.server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    const reply = await new Promise<string>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port });
      let text = '';
      socket.setEncoding('utf8');
      socket.on('data', (chunk: string) => (text += chunk));
      // The server may reset the connection while the rest of the request is still being sent.
      socket.on('error', (err: NodeJS.ErrnoException) => (text ? resolve(text) : reject(err)));
      socket.on('close', () => resolve(text));
      socket.once('connect', () => socket.write(raw));
    });
    const [head = '', ...rest] = reply.split('\r\n\r\n');
    const [statusLine = '', ...headers] = head.split('\r\n');
    const contentType = headers.find((line) => /^content-type:/i.test(line))?.replace(/^content-type:\s*/i, '');
    return { status: Number(statusLine.split(' ')[1]), contentType, body: JSON.parse(rest.join('\r\n\r\n')) };
  }

  it('answers an over-long request head 431 headers_too_large in the API shape', async () => {
    const res = await exchange(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(res.status).toBe(431);
    expect(res.contentType).toMatch(/^application\/json/);
    expect(res.body).toEqual({ error: { code: 'headers_too_large', message: expect.any(String) } });
  });

  it('answers a request that is not HTTP 400 invalid_request in the API shape', async () => {
    const res = await exchange('HELLO THERE\r\n\r\n');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: { code: 'invalid_request', message: 'the request is not valid HTTP' } });
  });
});

describe('GET /readyz without Redis', () => {
  let own: RedisServer;

  beforeAll(async () => {
    own = await startRedis();
  });

  afterAll(async () => {
    await own?.cleanup();
  });

  it('answers 503 not_ready while Redis is down and ready again once it is back', async () => {
    const api = await apiHarness(own);
    try {
      expect((await api.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
      await own.stop();
      const down = await waitUntil(
        async () => {
          const res = await api.inject({ method: 'GET', url: '/readyz' });
          return res.statusCode === 503 && res;
        },
        { message: '/readyz to answer 503' },
      );
      expectError(down, 503, 'not_ready', /redis/);
      // Liveness does not depend on Redis.
      expect((await api.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);

      await own.restart();
      const up = await waitUntil(
        async () => {
          const res = await api.inject({ method: 'GET', url: '/readyz' });
          return res.statusCode === 200 && res;
        },
        { message: '/readyz to answer 200 again', timeoutMs: 20_000 },
      );
      expect(up.json()).toEqual({ status: 'ready' });
    } finally {
      await api.close();
    }
  });
});
