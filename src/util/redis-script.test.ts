import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { evalScript } from './redis-script.js';

const INCR_BY = "return redis.call('INCRBY', KEYS[1], ARGV[1])";

describe('evalScript', () => {
  let server: RedisServer;
  let redis: Redis;
  beforeAll(async () => {
    server = await startRedis();
    redis = new Redis(server.url);
  });
  afterAll(async () => {
    redis.disconnect();
    await server.cleanup();
  });

  it('runs a script by digest, and sends the source again when the server forgot it', async () => {
    expect(await evalScript(redis, INCR_BY, 1, 'n', 2)).toBe(2);
    expect(await evalScript(redis, INCR_BY, 1, 'n', 3)).toBe(5);
    await redis.script('FLUSH');
    expect(await evalScript(redis, INCR_BY, 1, 'n', 4)).toBe(9);
    // Three calls by digest; the source went over the wire twice: first use and after the flush.
    const stats = await redis.info('commandstats');
    expect(stats).toMatch(/cmdstat_evalsha:calls=3,/);
    expect(stats).toMatch(/cmdstat_eval:calls=2,/);
  });

  it('passes script errors through', async () => {
    await expect(evalScript(redis, "return redis.call('NOPE')", 0)).rejects.toThrow(/Unknown Redis command|unknown command/i);
  });
});
