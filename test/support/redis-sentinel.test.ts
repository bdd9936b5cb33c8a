import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseRedisUrl, redisOptions } from '../../src/node/redis-target.js';
import { startRedisSentinel, type RedisSentinelSet } from './redis-sentinel.js';
import { waitUntil } from './wait-until.js';

describe('startRedisSentinel', () => {
  let set: RedisSentinelSet;
  beforeAll(async () => {
    set = await startRedisSentinel();
  }, 60_000);
  afterAll(async () => {
    await set?.cleanup();
  });

  it('serves a primary through its sentinels, and promotes the replica when the primary is killed', async () => {
    const first = await set.primaryPort();
    expect(first).toBe(set.nodes[0]?.port);
    const redis = new Redis(redisOptions(parseRedisUrl(set.url), {}, { maxRetriesPerRequest: null }));
    redis.on('error', () => undefined);
    try {
      await redis.set('k', 'v');
      // Replicated before the kill (WAIT: one replica acknowledged).
      expect(await redis.wait(1, 5_000)).toBe(1);
      const next = await set.killPrimaryAndWaitForFailover();
      expect(next).toBe(set.nodes[1]?.port);
      expect(set.nodes[0]?.running).toBe(false);
      // The same client, re-resolving the master through the sentinels, reads and writes the new primary.
      await waitUntil(async () => (await redis.get('k').catch(() => null)) === 'v', { timeoutMs: 20_000, message: 'the key read through the new primary' });
      await redis.set('k2', 'v2');
      expect(await redis.get('k2')).toBe('v2');
    } finally {
      redis.disconnect();
    }
  }, 60_000);
});
