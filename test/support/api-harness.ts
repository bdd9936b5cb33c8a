import { randomUUID } from 'node:crypto';
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, expect } from 'vitest';
import type { Logger } from 'pino';
import { API_ERRORS, buildApiApp, type ApiErrorCode } from '../../src/api/index.js';
import type { ApiToken } from '../../src/api/auth-tokens.js';
import type { RateLimitSettings } from '../../src/api/rate-limit.js';
import type { DeploymentView } from '../../src/coord/deployment-view.js';
import { RegsyncStore } from '../../src/store/index.js';
import { startRedis, type RedisServer } from './redis.js';
import { RecordingTaskControl } from './recording-task-control.js';

/**
 * Every password a test sends contains this marker, and {@link ApiHarness.inject} fails a test
 * whose response contains it: so every request of every API test checks that passwords never
 * come back.
 */
export const SECRET_MARKER = 's3cret';

/** The API app on a real Redis, with its own key prefix and a recording engine. */
export interface ApiHarness {
  app: FastifyInstance;
  store: RegsyncStore;
  control: RecordingTaskControl;
  redis: Redis;
  prefix: string;
  /** `app.inject`, failing when the response leaks a password or a configured token. */
  inject(opts: InjectOptions): Promise<LightMyRequestResponse>;
  /** Every key under the prefix with its content: compare two to prove nothing was written. */
  snapshot(): Promise<Record<string, unknown>>;
  close(): Promise<void>;
}

/** Options of {@link apiHarness}; by default the app has no tokens (it is open) and the default rate limit. */
export interface ApiHarnessOptions {
  bodyLimitBytes?: number;
  /** API tokens the app requires; their values must never show up in a response either. */
  tokens?: readonly ApiToken[];
  rateLimit?: RateLimitSettings | false;
  /** The app's logger (default: silent). */
  logger?: Logger;
  /** Serves `/api/v1/shards`, `/workers` and `/cmdb` (absent by default). */
  deployment?: DeploymentView;
}

/** Builds an {@link ApiHarness} on `server`; call `close()` after the test. */
export async function apiHarness(server: RedisServer, opts: ApiHarnessOptions = {}): Promise<ApiHarness> {
  const redis = new Redis(server.url, { maxRetriesPerRequest: 0 });
  redis.on('error', () => undefined);
  // Connected before the first request, so that /readyz answers ready from the start.
  await redis.ping();
  const prefix = `api-${randomUUID()}`;
  const store = new RegsyncStore(redis, prefix);
  const control = new RecordingTaskControl();
  const app = await buildApiApp({ store, control, redis, ...opts });
  return {
    app,
    store,
    control,
    redis,
    prefix,
    async inject(options) {
      const res = await app.inject(options);
      expect(res.payload, `${String(options.method)} ${String(options.url)} leaked a password`).not.toContain(SECRET_MARKER);
      const answer = `${JSON.stringify(res.headers)}\n${res.payload}`;
      for (const t of opts.tokens ?? []) {
        expect(answer.includes(t.token), `${String(options.method)} ${String(options.url)} leaked token ${t.name}`).toBe(false);
      }
      return res;
    },
    async snapshot() {
      const keys = (await redis.keys(`${prefix}:*`)).sort();
      const out: Record<string, unknown> = {};
      for (const key of keys) {
        const type = await redis.type(key);
        if (type === 'string') out[key] = await redis.get(key);
        else if (type === 'set') out[key] = (await redis.smembers(key)).sort();
        else if (type === 'hash') out[key] = await redis.hgetall(key);
        else out[key] = type;
      }
      return out;
    },
    async close() {
      await app.close();
      redis.disconnect();
    },
  };
}

/** Asserts an error response: status, code, the code's status in the catalog, and the body shape. */
export function expectError(res: LightMyRequestResponse, status: number, code: ApiErrorCode, message?: RegExp): void {
  const body = res.json() as { error?: { code?: unknown; message?: unknown } };
  expect({ status: res.statusCode, code: body.error?.code }, res.payload).toEqual({ status, code });
  expect(API_ERRORS[code].status).toBe(status);
  expect(Object.keys(body)).toEqual(['error']);
  expect(Object.keys(body.error ?? {}).sort()).toEqual(['code', 'message']);
  expect(typeof body.error?.message).toBe('string');
  expect((body.error?.message as string).length).toBeGreaterThan(0);
  if (message) expect(body.error?.message).toMatch(message);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
}

/**
 * Registers the hooks of a test file that tests the API app: one redis-server for the file, a
 * fresh {@link apiHarness} for every test (handed to `use`), closed after it.
 */
export function apiHarnessPerTest(use: (harness: ApiHarness) => void, opts: ApiHarnessOptions = {}): void {
  let server: RedisServer | undefined;
  let harness: ApiHarness | undefined;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server?.cleanup();
  });
  beforeEach(async () => {
    harness = await apiHarness(server as RedisServer, opts);
    use(harness);
  });
  afterEach(async () => {
    await harness?.close();
  });
}
