import { describe, expect, it } from 'vitest';
import { nextWarmup, WARMUP_DROP_INSTANCES, type WarmupEvent } from '../engine/warmup.js';
import type { SourceWarmupRecord } from '../model/service-status.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { redisKeys } from '../util/redis-keys.js';
import { SourceWarmups } from './source-warmups.js';

const redisServer = redisPerTest();

describe('SourceWarmups', () => {
  it('makes the transitions of the pure nextWarmup, atomically in Redis', async () => {
    const warmups = new SourceWarmups(redisServer.redis, redisServer.prefix);
    const drop = (service: string, lost: number): WarmupEvent => ({ kind: 'drop', service, lost });
    const steps: Array<[WarmupEvent, number]> = [
      [{ kind: 'up' }, 1_000],
      [drop('public/G/a', 2), 1_500],
      [drop('public/G/a', 1), 1_600],
      [{ kind: 'down' }, 2_000],
      [{ kind: 'down' }, 3_000],
      [drop('public/G/a', 1), 4_000],
      [drop('public/G/b', 9), 5_000],
      [{ kind: 'up' }, 6_000],
      [{ kind: 'down' }, 7_000],
      [{ kind: 'up' }, 8_000],
      [drop('public/G/a', 3), 70_000],
      [drop('public/G/b', 1), 71_000],
      [drop('public/G/c', 1), 140_000],
      [drop('public/G/d', 2), 141_000],
      [drop('public/G/e', 2), 142_000],
    ];
    let expected: SourceWarmupRecord = {};
    for (const [event, now] of steps) {
      expected = nextWarmup(expected, event, now, 60_000);
      expect(await warmups.note('a', event, now, 60_000, WARMUP_DROP_INSTANCES), `${event.kind} at ${now}`).toEqual(expected);
      expect(await warmups.get('a')).toEqual(expected);
    }
    expect(expected).toMatchObject({ since: 142_000, reason: 'drop' });
  });

  it('keeps a warm-up only a while past its end, and each cluster apart', async () => {
    const { redis, prefix } = redisServer;
    const warmups = new SourceWarmups(redis, prefix);
    const now = Date.now();
    await warmups.note('a', { kind: 'drop', service: 's', lost: 5 }, now, 5_000, WARMUP_DROP_INSTANCES);
    const ttl = await redis.pttl(redisKeys.sourceWarmup(prefix, 'a'));
    expect(ttl).toBeGreaterThan(5_000);
    expect(ttl).toBeLessThanOrEqual(65_000);
    expect(await warmups.get('b')).toEqual({});
  });
});
