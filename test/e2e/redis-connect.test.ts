import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisUnreachableError } from '../../src/node/redis-unreachable-error.js';
import { redisClientSettings } from '../../src/node/redis-target.js';
import { startNode, type NodeOptions, type RegsyncNode } from '../../src/node.js';
import { freePort } from '../support/ports.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { startRedisSentinel } from '../support/redis-sentinel.js';
import { startTlsRedis, type TlsRedis } from '../support/redis-tls.js';
import { runRegsync } from '../support/regsync-process.js';
import { findExecutable, makeTempDir, ManagedProcess, removeTempDir, waitForReady } from '../support/server-process.js';
import { api, testLogger } from '../support/sync-fixture.js';

/** Starts a node and answers the error it failed with (it must fail). */
async function startFails(options: Omit<NodeOptions, 'logger'>): Promise<RedisUnreachableError> {
  let node: RegsyncNode | undefined;
  try {
    node = await startNode({ logger: testLogger(), ...options });
  } catch (err) {
    if (err instanceof RedisUnreachableError) return err;
    throw err;
  }
  await node.close();
  throw new Error('the node started');
}

/** Starts a node with the API, stores a cluster through it and reads it back. */
async function storesACluster(options: Omit<NodeOptions, 'logger' | 'listen'>): Promise<void> {
  const node = await startNode({ logger: testLogger(), listen: { host: '127.0.0.1', port: 0 }, shards: 1, replicas: 1, ...options });
  try {
    const url = node.url as string;
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'a', kind: 'nacos', endpoints: ['127.0.0.1:8848'] })).status).toBe(201);
    expect((await api(url, 'GET', '/api/v1/clusters/a')).body).toMatchObject({ id: 'a', kind: 'nacos' });
  } finally {
    await node.close();
  }
}

describe('Redis over TLS', () => {
  let tls: TlsRedis;
  beforeAll(async () => {
    tls = await startTlsRedis({ clientCertificates: true });
  });
  afterAll(async () => {
    await tls?.cleanup();
  });

  it('works end to end with rediss://, the CA and a client certificate', async () => {
    await storesACluster({
      redisUrl: tls.url,
      redis: redisClientSettings({ redisCa: tls.certs.ca, redisCert: tls.certs.clientCert, redisKey: tls.certs.clientKey }),
      prefix: 'tls',
    });
  });

  it('checks the certificate against the name given with the servername', async () => {
    await storesACluster({ redisUrl: tls.url, redis: redisClientSettings({ redisCa: tls.certs.ca, redisCert: tls.certs.clientCert, redisKey: tls.certs.clientKey, redisTlsServername: 'localhost' }), prefix: 'tls-name' });
    const err = await startFails({
      redisUrl: tls.url,
      redis: redisClientSettings({ redisCa: tls.certs.ca, redisCert: tls.certs.clientCert, redisKey: tls.certs.clientKey, redisTlsServername: 'redis.other' }),
    });
    expect(err.failure).toBe('tls');
    expect(err.message).toMatch(/^cannot reach Redis at rediss:\/\/127\.0\.0\.1:\d+: TLS handshake failed \(.*redis\.other/);
  });

  it('fails with a TLS error when the server\'s certificate is not signed by a CA it trusts', async () => {
    const err = await startFails({ redisUrl: tls.url, redis: redisClientSettings({ redisCert: tls.certs.clientCert, redisKey: tls.certs.clientKey }) });
    expect(err.failure).toBe('tls');
    expect(err.message).toContain('TLS handshake failed');
  });

  it('fails with a clear error when rediss:// points at a plain Redis, and redis:// at a TLS port', async () => {
    const plain = await startRedis();
    try {
      const err = await startFails({ redisUrl: plain.url.replace('redis://', 'rediss://u:hunter2@'), redis: { connectTimeoutMs: 3_000 } });
      expect(err.failure).toBe('tls');
      expect(err.message).toMatch(/^cannot reach Redis at rediss:\/\/u:\*\*\*@127\.0\.0\.1:\d+: TLS handshake/);
      expect(err.message).not.toContain('hunter2');
    } finally {
      await plain.cleanup();
    }
    const err = await startFails({ redisUrl: tls.url.replace('rediss://', 'redis://'), redis: { connectTimeoutMs: 2_000 } });
    expect(err.message).toMatch(/^cannot reach Redis at redis:\/\/127\.0\.0\.1:\d+: /);
  });
});

describe('Redis Sentinel over TLS', () => {
  it('works end to end with rediss+sentinel:// and the CA: sentinels and data nodes over TLS', async () => {
    const set = await startRedisSentinel({ tls: true });
    try {
      expect(set.url).toMatch(/^rediss\+sentinel:\/\//);
      await storesACluster({ redisUrl: set.url, redis: redisClientSettings({ redisCa: set.certs?.ca }), prefix: 'sentinel-tls' });
      const err = await startFails({ redisUrl: set.url, redis: { connectTimeoutMs: 2_000 } });
      // ioredis tells a failed TLS handshake with a sentinel only as a closed connection.
      expect(err.failure).toBe('no-sentinel');
      expect(err.message).toContain('the sentinels are asked over TLS: check --redis-ca');
      expect(err.message).toMatch(/^cannot reach Redis at rediss\+sentinel:\/\/127\.0\.0\.1:\d+,/);
    } finally {
      await set.cleanup();
    }
  }, 60_000);
});

describe('Redis ACL users', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
    const admin = new Redis(redis.url);
    await admin.call('ACL', 'SETUSER', 'regsync', 'on', '>right-password', '~*', '&*', '+@all');
    await admin.call('ACL', 'SETUSER', 'default', 'off');
    admin.disconnect();
  });
  afterAll(async () => {
    await redis?.cleanup();
  });

  it('connects as the URL\'s user, and fails at once with a wrong password or an unknown user, the password masked', async () => {
    const at = `127.0.0.1:${redis.port}`;
    await storesACluster({ redisUrl: `redis://regsync:right-password@${at}/2`, prefix: 'acl' });
    const wrong = await startFails({ redisUrl: `redis://regsync:wrong-password@${at}` });
    expect(wrong.failure).toBe('auth');
    expect(wrong.code).toBe('redis-unreachable');
    expect(wrong.message).toMatch(/^cannot reach Redis at redis:\/\/regsync:\*\*\*@127\.0\.0\.1:\d+: authentication failed \(WRONGPASS/);
    expect(wrong.message).not.toContain('wrong-password');
    expect((await startFails({ redisUrl: `redis://nobody:x@${at}` })).failure).toBe('auth');
    // No user: the default user is off.
    const none = await startFails({ redisUrl: `redis://${at}` });
    expect(none.failure).toBe('auth');
    expect(none.message).toMatch(/NOAUTH|WRONGPASS|NOPERM/);
  });
});

describe('Redis that does not answer', () => {
  it('names a refused connection, sentinels that do not answer, and a master name no sentinel knows', async () => {
    const port = await freePort();
    const refused = await startFails({ redisUrl: `redis://127.0.0.1:${port}`, redis: { connectTimeoutMs: 2_000 } });
    expect(refused.failure).toBe('refused');
    expect(refused.message).toBe(`cannot reach Redis at redis://127.0.0.1:${port}: connection refused (connect ECONNREFUSED 127.0.0.1:${port})`);

    const [s1, s2] = [await freePort(), await freePort()];
    const noSentinel = await startFails({ redisUrl: `redis+sentinel://127.0.0.1:${s1},127.0.0.1:${s2}/regsync`, redis: { connectTimeoutMs: 2_000 } });
    expect(noSentinel.failure).toBe('no-sentinel');
    expect(noSentinel.message).toContain(`no sentinel answered (127.0.0.1:${s1}, 127.0.0.1:${s2})`);

    const sentinel = await startLoneSentinel();
    try {
      const unknown = await startFails({ redisUrl: `redis+sentinel://127.0.0.1:${sentinel.port}/no-such-master`, redis: { connectTimeoutMs: 2_000 } });
      expect(unknown.failure).toBe('no-master');
      expect(unknown.message).toBe(`cannot reach Redis at redis+sentinel://127.0.0.1:${sentinel.port}/no-such-master: the sentinels (127.0.0.1:${sentinel.port}) know no master named "no-such-master"`);
    } finally {
      await sentinel.stop();
    }
  });
});

describe('regsync commands', () => {
  it('exit with the clear error: unreachable Redis, an unreadable TLS file, a bad URL', async () => {
    const port = await freePort();
    for (const command of [['worker'], ['api', '--listen', '127.0.0.1:0'], ['dns', '--listen', '127.0.0.1:0'], ['up', '--listen', '127.0.0.1:0']]) {
      const res = await runRegsync([...command, '--redis', `redis://u:s3cret@127.0.0.1:${port}`, '--redis-connect-timeout', '2s']);
      expect(res.code, command[0]).toBe(1);
      expect(res.output, command[0]).toContain(`regsync: cannot reach Redis at redis://u:***@127.0.0.1:${port}: connection refused`);
      expect(res.output).not.toContain('s3cret');
    }
    const missing = await runRegsync(['worker', '--redis', `rediss://127.0.0.1:${port}`, '--redis-ca', '/nonexistent/ca.pem']);
    expect(missing.code).toBe(1);
    expect(missing.output).toContain('regsync: invalid --redis-ca: cannot read /nonexistent/ca.pem (ENOENT)');
    const bad = await runRegsync(['api', '--redis', 'redis://u:s3cret@127.0.0.1:99999']);
    expect(bad.code).toBe(1);
    expect(bad.output).toContain('regsync: invalid --redis port: port "99999" of 127.0.0.1 is not a number from 1 to 65535 in redis://u:***@127.0.0.1:99999');
    expect(bad.output).not.toContain('s3cret');
  });
});

/** One redis-sentinel watching nothing that answers: it knows only the master name it was given. */
async function startLoneSentinel(): Promise<{ port: number; stop(): Promise<void> }> {
  const binary = findExecutable('redis-sentinel');
  if (!binary) throw new Error('redis-sentinel is needed: apt-get install -y redis-sentinel');
  const dir = makeTempDir('regsync-lone-sentinel-');
  const port = await freePort();
  const config = join(dir, 'sentinel.conf');
  writeFileSync(config, `port ${port}\nbind 127.0.0.1\ndaemonize no\ndir ${dir}\nsentinel monitor regsync 127.0.0.1 ${await freePort()} 1\n`);
  const logFile = join(dir, 'sentinel.log');
  const proc = new ManagedProcess(binary, [config], { logFile, cwd: dir });
  await waitForReady(
    proc,
    async () => {
      const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, retryStrategy: () => null, maxRetriesPerRequest: 0 });
      r.on('error', () => undefined);
      try {
        await r.connect();
        return (await r.ping()) === 'PONG';
      } catch {
        return false;
      } finally {
        r.disconnect();
      }
    },
    { what: `redis-sentinel on 127.0.0.1:${port}`, timeoutMs: 20_000, logFiles: [logFile] },
  );
  return {
    port,
    async stop() {
      await proc.stop();
      removeTempDir(dir);
    },
  };
}
