import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { apiHarness, expectError, type ApiHarness } from '../../test/support/api-harness.js';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { waitUntil } from '../../test/support/wait-until.js';
import type { ApiToken } from './auth-tokens.js';

const READ: ApiToken = { name: 'dash', scope: 'read', token: 'read-token-0123456789abcdef' };

let server: RedisServer;
let h: ApiHarness;

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  await server?.cleanup();
});

afterEach(async () => {
  await h?.close();
});

describe('rate limit', () => {
  it('answers 429 in the API shape past the limit, per client address, never on the probes', async () => {
    h = await apiHarness(server, { rateLimit: { max: 5, timeWindowMs: 60_000 } });
    for (let i = 0; i < 5; i++) {
      const res = await h.inject({ method: 'GET', url: '/api/v1/clusters' });
      expect(res.statusCode, `request ${i + 1}`).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe('5');
      expect(res.headers['x-ratelimit-remaining']).toBe(String(4 - i));
    }
    const refused = await h.inject({ method: 'GET', url: '/api/v1/clusters' });
    expectError(refused, 429, 'rate_limited', /^more than 5 requests in a minute from this address; retry in \d+ s$/);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // Every route counts, the nacos-sync ones answering in their own shape.
    const nacosSync = await h.inject({ method: 'GET', url: '/v1/cluster/list' });
    expect(nacosSync.statusCode).toBe(429);
    expect(nacosSync.json()).toMatchObject({ success: false, resultCode: 'SYSTEM_ERROR', resultMessage: expect.stringMatching(/^more than 5 requests/) });
    // Probes never.
    for (let i = 0; i < 20; i++) {
      expect((await h.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
      expect((await h.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    }
    // Another address has its own budget.
    expect((await h.inject({ method: 'GET', url: '/api/v1/clusters', remoteAddress: '127.0.0.2' })).statusCode).toBe(200);
  });

  it('counts requests before authentication, so token guessing is limited too', async () => {
    h = await apiHarness(server, { tokens: [READ], rateLimit: { max: 3, timeWindowMs: 60_000 } });
    for (let i = 0; i < 3; i++) {
      expectError(await h.inject({ method: 'GET', url: '/api/v1/clusters', headers: { authorization: `Bearer guess-${i}-0123456789abcdef` } }), 401, 'unauthorized');
    }
    expectError(await h.inject({ method: 'GET', url: '/api/v1/clusters', headers: { authorization: `Bearer ${READ.token}` } }), 429, 'rate_limited');
  });

  it('opens again when the window ends', async () => {
    h = await apiHarness(server, { rateLimit: { max: 2, timeWindowMs: 300 } });
    await h.inject({ method: 'GET', url: '/api/v1/tasks' });
    await h.inject({ method: 'GET', url: '/api/v1/tasks' });
    expectError(await h.inject({ method: 'GET', url: '/api/v1/tasks' }), 429, 'rate_limited', /in 300 ms/);
    await waitUntil(async () => (await h.inject({ method: 'GET', url: '/api/v1/tasks' })).statusCode === 200, {
      timeoutMs: 5_000,
      message: 'the window to end',
    });
  });

  it('can be turned off', async () => {
    h = await apiHarness(server, { rateLimit: false });
    for (let i = 0; i < 50; i++) {
      const res = await h.inject({ method: 'GET', url: '/api/v1/clusters' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
  });
});
