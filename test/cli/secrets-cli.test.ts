import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseSecretKey } from '../../src/secrets/index.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync } from '../support/regsync-process.js';
import { api } from '../support/sync-fixture.js';

/** No key from the environment of the test run: each step says which it gives. */
const NO_KEY_ENV = { REGSYNC_SECRET_KEY: '', REGSYNC_SECRET_KEY_FILE: '', REGSYNC_SECRET_KEY_PREVIOUS: '', REGSYNC_SECRET_KEY_PREVIOUS_FILE: '' };

/**
 * The secret key across processes, as an operator runs them: a deployment without a key, then
 * with one (what was in clear is encrypted at start), processes refusing to start without the key
 * or with another, and a rotation to a new key with `regsync secrets rotate`.
 */
describe('regsync with a secret key', () => {
  const password = `pw-${randomUUID()}`;
  const keyA = randomBytes(32).toString('base64');
  const keyB = randomBytes(32).toString('hex');
  const idA = parseSecretKey(keyA, 'a').id;
  const idB = parseSecretKey(keyB, 'b').id;
  let redis: RedisServer;
  let client: Redis;
  let dir: string;
  let fileA: string;
  let fileB: string;

  beforeAll(async () => {
    redis = await startRedis({ appendonly: true });
    client = new Redis(redis.url);
    dir = mkdtempSync(join(tmpdir(), 'regsync-secrets-'));
    fileA = join(dir, 'key-a');
    fileB = join(dir, 'key-b');
    writeFileSync(fileA, `${keyA}\n`);
    writeFileSync(fileB, `${keyB}\n`);
  });
  afterAll(async () => {
    client?.disconnect();
    await redis?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  const stored = async (): Promise<string> => (await client.get('regsync:cluster:east')) ?? '';
  const aof = (): string =>
    readdirSync(join(redis.dataDir, 'appendonlydir'))
      .map((name) => readFileSync(join(redis.dataDir, 'appendonlydir', name)).toString('latin1'))
      .join('');

  it('refuses keys it cannot use, naming the source and never the key', async () => {
    const missing = await runRegsync(['worker', '--redis', redis.url, '--secret-key-file', join(dir, 'nope')], { env: NO_KEY_ENV });
    expect(missing.code).toBe(1);
    expect(missing.output).toContain(`cannot read the secret key file ${join(dir, 'nope')} (--secret-key-file): no such file`);
    const short = randomBytes(16).toString('base64');
    const invalid = await runRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0'], { env: { ...NO_KEY_ENV, REGSYNC_SECRET_KEY: short } });
    expect(invalid.code).toBe(1);
    expect(invalid.output).toContain('REGSYNC_SECRET_KEY: expected a key of 32 bytes');
    expect(invalid.output).not.toContain(short);
  });

  it('runs without a key (secrets in clear, with a warning), encrypts them once given one, and then refuses to start without it', async () => {
    const clear = await startRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0'], { env: NO_KEY_ENV });
    const created = await api(clear.url, 'POST', '/api/v1/clusters', { id: 'east', kind: 'nacos', endpoints: ['127.0.0.1:1'], username: 'nacos', password });
    expect(created.status).toBe(201);
    expect(clear.output()).toContain('cluster passwords are stored in clear');
    await clear.stop();
    expect(await stored()).toContain(password);

    const keyed = await startRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0', '--secret-key-file', fileA], { env: NO_KEY_ENV });
    expect(await stored()).toContain(`enc:v1:${idA}:`);
    expect(await stored()).not.toContain(password);
    expect((await api(keyed.url, 'POST', '/api/v1/clusters/east/compare', { kind: 'nacos', endpoints: ['127.0.0.1:1'], username: 'nacos', password })).body).toMatchObject({ exists: true, differs: false });
    await keyed.stop();

    const noKey = await runRegsync(['worker', '--redis', redis.url], { env: NO_KEY_ENV });
    expect(noKey.code).toBe(1);
    expect(noKey.output).toContain(`cluster east's password is encrypted with secret key ${idA}, and this process has no secret key: give that key as REGSYNC_SECRET_KEY or --secret-key-file`);
    const wrongKey = await runRegsync(['dns', '--redis', redis.url, '--listen', '127.0.0.1:0'], { env: { ...NO_KEY_ENV, REGSYNC_SECRET_KEY: keyB } });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.output).toContain(`encrypted with secret key ${idA}, and this process has key ${idB}`);
  });

  it('rotates to a new key: regsync secrets rotate re-encrypts everything, the old key alone no longer starts, the new one does', async () => {
    const underA = await stored();
    expect(underA).toContain(`enc:v1:${idA}:`);
    // Every process first runs with the new key and the old one as previous (a rolling restart) ...
    const both = await startRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0', '--secret-key-file', fileB, '--previous-secret-key-file', fileA], { env: NO_KEY_ENV });
    // A rotation without the old key writes nothing and names the key it needs.
    const withoutOld = await runRegsync(['secrets', 'rotate', '--redis', redis.url], { env: { ...NO_KEY_ENV, REGSYNC_SECRET_KEY: keyB } });
    expect(withoutOld.code).toBe(1);
    expect(withoutOld.output).toContain(`cluster east's password is encrypted with secret key ${idA}, and this process has key ${idB}`);
    expect(await stored()).toBe(underA);
    // ... then the rotation, beside them.
    const rotated = await runRegsync(['secrets', 'rotate', '--redis', redis.url, '--rewrite-aof'], { env: { ...NO_KEY_ENV, REGSYNC_SECRET_KEY: keyB, REGSYNC_SECRET_KEY_PREVIOUS: keyA } });
    expect(rotated.output).toContain(`re-encrypted 1 secret(s) with key ${idB}; 0 already under it; append-only file rewritten`);
    expect(rotated.code).toBe(0);
    expect(await stored()).toContain(`enc:v1:${idB}:`);
    const status = await runRegsync(['secrets', 'status', '--redis', redis.url], { env: NO_KEY_ENV });
    expect(status.output).toContain(`east password key ${idB}\n1 secret\n`);
    // The old value (and the first, clear one) left the append-only file with its rewrite.
    expect(aof()).not.toContain(underA);
    expect(aof()).not.toContain(password);
    expect((await api(both.url, 'POST', '/api/v1/clusters/east/compare', { kind: 'nacos', endpoints: ['127.0.0.1:1'], username: 'nacos', password })).body).toMatchObject({ differs: false });
    await both.stop();

    const oldOnly = await runRegsync(['worker', '--redis', redis.url, '--secret-key-file', fileA], { env: NO_KEY_ENV });
    expect(oldOnly.code).toBe(1);
    expect(oldOnly.output).toContain(`encrypted with secret key ${idB}, and this process has key ${idA}`);
    const newOnly = await startRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0'], { env: { ...NO_KEY_ENV, REGSYNC_SECRET_KEY: keyB } });
    expect((await api(newOnly.url, 'POST', '/api/v1/clusters/east/compare', { kind: 'nacos', endpoints: ['127.0.0.1:1'], username: 'nacos', password })).body).toMatchObject({ differs: false });
    expect((await api(newOnly.url, 'GET', '/api/v1/clusters/east')).body).toMatchObject({ hasPassword: true });
    await newOnly.stop();
  });

  it('regsync apply takes passwords from the environment and from files; applying again changes nothing', async () => {
    const filePassword = `file-${randomUUID()}`;
    const envPassword = `env-${randomUUID()}`;
    writeFileSync(join(dir, 'west-password'), `${filePassword}\n`);
    const yaml = join(dir, 'clusters.yaml');
    writeFileSync(
      yaml,
      [
        'clusters:',
        '  - { id: north, kind: nacos, endpoints: ["127.0.0.1:3"], username: nacos, password: "${NORTH_PASSWORD}" }',
        '  - { id: west, kind: nacos, endpoints: ["127.0.0.1:4"], username: nacos, passwordFile: west-password }',
      ].join('\n'),
    );
    const server = await startRegsync(['api', '--redis', redis.url, '--listen', '127.0.0.1:0'], { env: { ...NO_KEY_ENV, REGSYNC_SECRET_KEY: keyB } });
    try {
      const unset = await runRegsync(['apply', '-f', yaml, '--server', server.url], { env: NO_KEY_ENV });
      expect(unset.code).toBe(1);
      expect(unset.output).toContain(`${yaml} (document 1): clusters[0] (id north), password: environment variable NORTH_PASSWORD is not set`);
      const first = await runRegsync(['apply', '-f', yaml, '--server', server.url], { env: { ...NO_KEY_ENV, NORTH_PASSWORD: envPassword } });
      expect(first.output).toBe('cluster north created\ncluster west created\n');
      const again = await runRegsync(['apply', '-f', yaml, '--server', server.url], { env: { ...NO_KEY_ENV, NORTH_PASSWORD: envPassword } });
      expect(again.output).toBe('cluster north unchanged\ncluster west unchanged\n');
      const records = `${await client.get('regsync:cluster:north')} ${await client.get('regsync:cluster:west')}`;
      expect(records).toContain(`enc:v1:${idB}:`);
      expect(records).not.toContain(envPassword);
      expect(records).not.toContain(filePassword);
      const compare = await api(server.url, 'POST', '/api/v1/clusters/west/compare', { kind: 'nacos', endpoints: ['127.0.0.1:4'], username: 'nacos', password: filePassword });
      expect(compare.body).toMatchObject({ exists: true, differs: false });
    } finally {
      await server.stop();
    }
  });
});
