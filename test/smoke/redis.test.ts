import { existsSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis.js';
import { waitUntil } from '../support/wait-until.js';

const clients: Redis[] = [];

function client(server: RedisServer): Redis {
  // No retries: a test should see a refused connection, not wait through a reconnect loop.
  const redis = new Redis(server.url, { maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
  // Refused connections are expected in some tests; they surface as rejected commands.
  redis.on('error', () => undefined);
  clients.push(redis);
  return redis;
}

afterEach(() => {
  for (const redis of clients.splice(0)) redis.disconnect();
});

describe('startRedis({ appendonly: true })', () => {
  let server: RedisServer;

  beforeAll(async () => {
    server = await startRedis({ appendonly: true });
  });

  afterAll(async () => {
    await server?.cleanup();
  });

  it('serves SET/GET on 127.0.0.1', async () => {
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);
    const redis = client(server);
    const key = `smoke:${randomUUID()}`;
    expect(await redis.set(key, 'hello')).toBe('OK');
    expect(await redis.get(key)).toBe('hello');
  });

  it('keeps an acknowledged key across restart()', async () => {
    const key = `smoke:${randomUUID()}`;
    const before = client(server);
    await before.set(key, 'survives');
    before.disconnect();

    await server.restart();

    const after = client(server);
    expect(await after.get(key)).toBe('survives');
    expect(await after.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
  });
});

describe('startRedis() without appendonly', () => {
  let server: RedisServer;

  beforeAll(async () => {
    server = await startRedis();
  });

  afterAll(async () => {
    await server?.cleanup();
  });

  it('starts empty after restart(), since nothing is saved', async () => {
    const key = `smoke:${randomUUID()}`;
    const before = client(server);
    await before.set(key, 'gone');
    before.disconnect();

    await server.restart();

    const after = client(server);
    expect(await after.get(key)).toBeNull();
  });

  it('refuses connections after kill() and comes back with restart()', async () => {
    await server.kill();
    expect(server.running).toBe(false);
    await expect(client(server).ping()).rejects.toThrow();

    await server.restart();
    const redis = client(server);
    expect(await waitUntil(() => redis.ping(), { message: 'PING after restart' })).toBe('PONG');
  });
});

describe('RedisServer.cleanup()', () => {
  it('stops the server and removes its data dir', async () => {
    const server = await startRedis();
    try {
      expect(existsSync(server.dataDir)).toBe(true);
    } finally {
      await server.cleanup();
    }
    expect(server.running).toBe(false);
    expect(existsSync(server.dataDir)).toBe(false);
    await expect(client(server).ping()).rejects.toThrow();
  });
});
