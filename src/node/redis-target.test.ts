import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { RedisConfigError } from './redis-config-error.js';
import { maskRedisUrl, parseRedisUrl, redisClientSettings, redisOptions } from './redis-target.js';

function configError(fn: () => unknown): RedisConfigError {
  try {
    fn();
  } catch (err) {
    if (err instanceof RedisConfigError) return err;
    throw err;
  }
  throw new Error('no RedisConfigError thrown');
}

describe('parseRedisUrl', () => {
  it('reads a single node: host, default port, db, user and password (percent-decoded)', () => {
    expect(parseRedisUrl('redis://127.0.0.1')).toMatchObject({ tls: false, db: 0, node: { host: '127.0.0.1', port: 6379 }, username: undefined, password: undefined });
    expect(parseRedisUrl('redis://redis.example:6380/3')).toMatchObject({ db: 3, node: { host: 'redis.example', port: 6380 } });
    const acl = parseRedisUrl('redis://regsync:p%40ss%3Aw0rd@10.1.2.3:6379/');
    expect(acl).toMatchObject({ username: 'regsync', password: 'p@ss:w0rd', db: 0 });
    expect(acl.masked).toBe('redis://regsync:***@10.1.2.3:6379/');
    expect(parseRedisUrl('redis://:only-a-password@h')).toMatchObject({ username: undefined, password: 'only-a-password' });
    // A raw @ in the password: the last @ of the host part ends it.
    expect(parseRedisUrl('redis://u:a@b@h:1')).toMatchObject({ username: 'u', password: 'a@b', node: { host: 'h', port: 1 } });
  });

  it('reads rediss:// as TLS and IPv6 hosts in brackets', () => {
    expect(parseRedisUrl('rediss://[::1]:6390')).toMatchObject({ tls: true, node: { host: '::1', port: 6390 } });
    expect(parseRedisUrl('REDISS://[fe80::1]')).toMatchObject({ tls: true, node: { host: 'fe80::1', port: 6379 } });
  });

  it('reads sentinels, master name, db and the sentinels\' own credentials', () => {
    const t = parseRedisUrl('redis+sentinel://app:pw@s1:26379,s2,[::1]:26380/mymaster/2?sentinelUsername=sen&sentinelPassword=s3cret');
    expect(t.node).toBeUndefined();
    expect(t).toMatchObject({ tls: false, username: 'app', password: 'pw', db: 2 });
    expect(t.sentinel).toEqual({
      hosts: [{ host: 's1', port: 26379 }, { host: 's2', port: 26379 }, { host: '::1', port: 26380 }],
      masterName: 'mymaster',
      username: 'sen',
      password: 's3cret',
      tls: false,
    });
    expect(t.masked).toBe('redis+sentinel://app:***@s1:26379,s2,[::1]:26380/mymaster/2?sentinelUsername=sen&sentinelPassword=***');
    expect(parseRedisUrl('rediss+sentinel://s1/m').sentinel).toMatchObject({ masterName: 'm', tls: true });
    expect(parseRedisUrl('rediss+sentinel://s1/m?sentinelTls=false')).toMatchObject({ tls: true, sentinel: { tls: false } });
  });

  it('names the bad part, with passwords masked', () => {
    const cases: [string, string, RegExp][] = [
      ['http://h:1', '--redis', /http:\/\/h:1 is not a Redis URL; expected redis:\/\//],
      ['127.0.0.1:6379', '--redis', /is not a Redis URL/],
      ['redis://', '--redis host', /no host/],
      ['redis://a:1,b:2', '--redis host', /several hosts need redis\+sentinel/],
      ['redis://h:0', '--redis port', /port "0" of h/],
      ['redis://h:70000', '--redis port', /port "70000"/],
      ['redis://h:x1', '--redis port', /port "x1"/],
      ['redis://::1:6379', '--redis host', /IPv6 address goes in brackets/],
      ['redis://[::1', '--redis host', /not a bracketed IPv6/],
      ['redis://[nope]:1', '--redis host', /not a bracketed IPv6/],
      ['redis://bad_host!:1', '--redis host', /is not a host name/],
      ['redis://h/db1', '--redis db', /database "db1"/],
      ['redis://h/1/2', '--redis path', /unexpected path/],
      ['redis://h?family=6', '--redis query parameter family', /a redis:\/\/ URL takes none/],
      ['redis://user@h', '--redis user', /a user needs a password/],
      ['redis://u:%zz@h', '--redis password', /not percent-encoded/],
      ['redis+sentinel://s1:26379', '--redis master name', /no master name/],
      ['redis+sentinel://s1:26379/m/x', '--redis db', /database "x"/],
      ['redis+sentinel://s1/m?sentinelPass=x', '--redis query parameter sentinelPass', /known: sentinelUsername, sentinelPassword, sentinelTls/],
      ['redis+sentinel://s1/m?sentinelTls=maybe', '--redis query parameter sentinelTls', /true or false/],
      ['redis+sentinel://s1/m?sentinelUsername=u', '--redis query parameter sentinelUsername', /needs sentinelPassword/],
      ['redis://h#x', '--redis', /fragment/],
    ];
    for (const [url, setting, detail] of cases) {
      const err = configError(() => parseRedisUrl(url));
      expect(err.setting, url).toBe(setting);
      expect(err.message, url).toMatch(detail);
      expect(err.code).toBe('redis-config-invalid');
    }
    const secret = configError(() => parseRedisUrl('redis://u:hunter2@h:99999'));
    expect(secret.message).toContain('redis://u:***@h:99999');
    expect(secret.message).not.toContain('hunter2');
    const sentinelSecret = configError(() => parseRedisUrl('redis+sentinel://s/m?sentinelPassword=hunter2&x=1'));
    expect(sentinelSecret.message).not.toContain('hunter2');
  });
});

describe('maskRedisUrl', () => {
  it('masks every password, of a malformed URL too, and leaves the rest', () => {
    expect(maskRedisUrl('redis://h:1')).toBe('redis://h:1');
    expect(maskRedisUrl('redis://u:p@h')).toBe('redis://u:***@h');
    expect(maskRedisUrl('redis://:p@h')).toBe('redis://:***@h');
    expect(maskRedisUrl('nonsense://u:p@@h:abc')).toBe('nonsense://u:***@h:abc');
    expect(maskRedisUrl('redis+sentinel://s/m?sentinelPassword=p&sentinelUsername=u')).toBe('redis+sentinel://s/m?sentinelPassword=***&sentinelUsername=u');
  });
});

describe('redisOptions', () => {
  const ca = Buffer.from('CA');
  it('gives ioredis a node, or the sentinels and the master, with TLS where the URL asks for it', () => {
    const plain = redisOptions(parseRedisUrl('redis://u:p@h:7/1'), {}, { maxRetriesPerRequest: 3 });
    expect(plain).toMatchObject({ host: 'h', port: 7, db: 1, username: 'u', password: 'p', maxRetriesPerRequest: 3 });
    expect(plain.tls).toBeUndefined();
    const tls = redisOptions(parseRedisUrl('rediss://h'), { ca, servername: 'redis.internal', connectTimeoutMs: 4_000 }, { maxRetriesPerRequest: null });
    expect(tls.tls).toEqual({ ca, servername: 'redis.internal' });
    expect(tls.connectTimeout).toBe(2_000);
    const sentinel = redisOptions(parseRedisUrl('rediss+sentinel://:p@s1,s2:1/m?sentinelPassword=sp'), { ca }, { maxRetriesPerRequest: null });
    expect(sentinel).toMatchObject({
      sentinels: [{ host: 's1', port: 26379 }, { host: 's2', port: 1 }],
      name: 'm',
      role: 'master',
      password: 'p',
      sentinelPassword: 'sp',
      enableTLSForSentinelMode: true,
      tls: { ca },
      sentinelTLS: { ca },
    });
    expect(sentinel.host).toBeUndefined();
    const reconnect = sentinel.reconnectOnError as (err: Error) => boolean | 1 | 2;
    expect(reconnect(new Error("READONLY You can't write against a read only replica."))).toBe(2);
    expect(reconnect(new Error('ERR other'))).toBe(false);
  });
});

describe('redisClientSettings', () => {
  it('reads the TLS files once, and names the flag and path of one it cannot read', () => {
    const dir = mkdtempSync(join(tmpdir(), 'regsync-tls-'));
    try {
      writeFileSync(join(dir, 'ca.pem'), 'CA PEM');
      expect(redisClientSettings({ redisCa: join(dir, 'ca.pem'), redisTlsServername: 'n', redisConnectTimeout: 1_000 })).toMatchObject({
        ca: Buffer.from('CA PEM'),
        servername: 'n',
        connectTimeoutMs: 1_000,
      });
      const missing = configError(() => redisClientSettings({ redisCa: join(dir, 'nope.pem') }));
      expect(missing.setting).toBe('--redis-ca');
      expect(missing.message).toBe(`invalid --redis-ca: cannot read ${join(dir, 'nope.pem')} (ENOENT)`);
      const dirAsFile = configError(() => redisClientSettings({ redisCert: dir, redisKey: join(dir, 'ca.pem') }));
      expect(dirAsFile.message).toBe(`invalid --redis-cert: cannot read ${dir} (EISDIR)`);
      expect(configError(() => redisClientSettings({ redisCert: join(dir, 'ca.pem') })).setting).toBe('--redis-key');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
