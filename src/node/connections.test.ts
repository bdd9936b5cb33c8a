import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { openRedis } from './connections.js';
import { RedisErrorLog } from './redis-error-log.js';
import { parseRedisUrl } from './redis-target.js';

const server = redisPerTest();

describe('openRedis', () => {
  it('survives a stream that errs twice (a failed TLS handshake does), where ioredis listens once', async () => {
    const target = parseRedisUrl(server.server.url);
    const redis = openRedis(target, {}, { maxRetriesPerRequest: 0 }, new RedisErrorLog(silentLogger(), target), silentLogger());
    try {
      await waitUntil(() => redis.status === 'ready', { message: 'the connection ready' });
      const stream = redis.stream;
      expect(() => {
        stream.emit('error', new Error('certificate verify failed'));
        stream.emit('error', new Error('tlsv1 alert decode error'));
      }).not.toThrow();
    } finally {
      redis.disconnect();
    }
  });
});
