import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { startRedis, type RedisServer, type StartRedisOptions } from './redis.js';

/** A real redis-server for a test file, with a fresh key prefix and connection for every test. */
export interface RedisPerTest {
  readonly server: RedisServer;
  /** The test's connection (made before each test). */
  readonly redis: Redis;
  /** The test's key prefix, unique per test. */
  readonly prefix: string;
  /** Another connection, cut after the test; it fails fast instead of retrying when Redis is gone. */
  connect(): Redis;
}

/**
 * Registers the hooks of a test file that talks to Redis: one redis-server for the file, a fresh
 * prefix and connection per test, every connection cut after its test (after `beforeCut`, which
 * stops what still uses them).
 */
export function redisPerTest(opts: StartRedisOptions = {}, beforeCut: () => void = () => {}): RedisPerTest {
  let server: RedisServer | undefined;
  let redis: Redis | undefined;
  let prefix = '';
  const clients: Redis[] = [];
  const connect = (): Redis => {
    if (!server) throw new Error('redis-server is not running yet (use it inside a test or hook)');
    const client = new Redis(server.url, { maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => undefined);
    clients.push(client);
    return client;
  };
  beforeAll(async () => {
    server = await startRedis(opts);
  });
  afterAll(async () => {
    await server?.cleanup();
  });
  beforeEach(() => {
    redis = connect();
    prefix = `t-${randomUUID()}`;
  });
  afterEach(() => {
    beforeCut();
    for (const client of clients.splice(0)) client.disconnect();
  });
  return {
    get server() {
      if (!server) throw new Error('redis-server is not running yet');
      return server;
    },
    get redis() {
      if (!redis) throw new Error('no connection outside a test');
      return redis;
    },
    get prefix() {
      return prefix;
    },
    connect,
  };
}
