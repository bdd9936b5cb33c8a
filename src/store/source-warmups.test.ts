import { describe, expect, it } from 'vitest';
import { nextWarmup, type WarmupEvent } from '../engine/warmup.js';
import type { SourceWarmupRecord } from '../model/service-status.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { redisKeys } from '../util/redis-keys.js';
import { SourceWarmups } from './source-warmups.js';

const redisServer = redisPerTest();

describe('SourceWarmups', () => {
  it('makes the transitions of the pure nextWarmup, atomically in Redis', async () => {
    const warmups = new SourceWarmups(redisServer.redis, redisServer.prefix);
    const steps: Array<[WarmupEvent, number]> = [
      ['up', 1_000],
      ['down', 2_000],
      ['down', 3_000],
      ['drop', 4_000],
      ['drop', 5_000],
      ['up', 6_000],
      ['down', 7_000],
      ['up', 8_000],
      ['drop', 70_000],
    ];
    let expected: SourceWarmupRecord = {};
    for (const [event, now] of steps) {
      expected = nextWarmup(expected, event, now, 60_000);
      expect(await warmups.note('a', event, now, 60_000), `${event} at ${now}`).toEqual(expected);
      expect(await warmups.get('a')).toEqual(expected);
    }
  });

  it('keeps a warm-up only a while past its end, and each cluster apart', async () => {
    const { redis, prefix } = redisServer;
    const warmups = new SourceWarmups(redis, prefix);
    const now = Date.now();
    await warmups.note('a', 'drop', now, 5_000);
    const ttl = await redis.pttl(redisKeys.sourceWarmup(prefix, 'a'));
    expect(ttl).toBeGreaterThan(5_000);
    expect(ttl).toBeLessThanOrEqual(65_000);
    expect(await warmups.get('b')).toEqual({});
  });
});
