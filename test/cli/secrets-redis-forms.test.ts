import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisSentinel, type RedisSentinelSet } from '../support/redis-sentinel.js';
import { startTlsRedis, type TlsRedis } from '../support/redis-tls.js';
import { runRegsync } from '../support/regsync-process.js';

const NO_KEY_ENV = { REGSYNC_SECRET_KEY: '', REGSYNC_SECRET_KEY_FILE: '', REGSYNC_SECRET_KEY_PREVIOUS: '', REGSYNC_SECRET_KEY_PREVIOUS_FILE: '' };
/** A key for `rotate` (32 bytes, base64); no secret is stored, so none is re-encrypted. */
const KEY = Buffer.alloc(32, 7).toString('base64');

/**
 * `regsync secrets status|rotate` reach Redis in every form `--redis` takes elsewhere (one parser,
 * the same flags): a Sentinel-watched master and TLS with its own CA. Before, they handed the URL
 * straight to ioredis, which took `redis+sentinel://...` for a plain node and failed with
 * "Connection is closed.".
 */
describe('regsync secrets over every form of --redis', () => {
  let sentinel: RedisSentinelSet;
  let tls: TlsRedis;
  beforeAll(async () => {
    [sentinel, tls] = await Promise.all([startRedisSentinel(), startTlsRedis()]);
  });
  afterAll(async () => {
    await Promise.all([sentinel?.cleanup(), tls?.cleanup()]);
  });

  it('through the sentinels (redis+sentinel://)', async () => {
    const status = await runRegsync(['secrets', 'status', '--redis', sentinel.url], { env: NO_KEY_ENV });
    expect(status.output).toBe('0 secrets\n');
    expect(status.code).toBe(0);
    const rotate = await runRegsync(['secrets', 'rotate', '--redis', sentinel.url], { env: { ...NO_KEY_ENV, REGSYNC_SECRET_KEY: KEY } });
    expect(rotate.output).toMatch(/^re-encrypted 0 secret\(s\) with key \S+; 0 already under it/m);
    expect(rotate.code).toBe(0);
  });

  it('over TLS with --redis-ca (rediss://)', async () => {
    const status = await runRegsync(['secrets', 'status', '--redis', tls.url, '--redis-ca', tls.certs.ca], { env: NO_KEY_ENV });
    expect(status.output).toBe('0 secrets\n');
    expect(status.code).toBe(0);
  });

  it('says clearly when Redis cannot be reached, within the start bound', async () => {
    const status = await runRegsync(['secrets', 'status', '--redis', 'redis://127.0.0.1:1', '--redis-connect-timeout', '1s'], { env: NO_KEY_ENV });
    expect(status.code).toBe(1);
    expect(status.output).toContain('regsync: cannot reach Redis at redis://127.0.0.1:1: ');
  });
});
