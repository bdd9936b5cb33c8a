import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import type { ClusterSpec } from '../model/index.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { parseSecretKey, SecretBox, SecretKeyError } from '../secrets/index.js';
import { prepareStoredSecrets, RegsyncStore } from './index.js';

const redisServer = redisPerTest();
const keyA = parseSecretKey(randomBytes(32).toString('hex'), 'a');
const keyB = parseSecretKey(randomBytes(32).toString('base64'), 'b');
const logger = silentLogger();

function cluster(id: string, password?: string): ClusterSpec {
  return { id, kind: 'nacos', endpoints: ['127.0.0.1:8848'], labels: {}, options: {}, ...(password === undefined ? {} : { username: 'nacos', password }) };
}

/** Every cluster record as stored, joined. */
async function raw(prefix: string): Promise<string> {
  const keys = await redisServer.redis.keys(`${prefix}:cluster:*`);
  return keys.length === 0 ? '' : (await redisServer.redis.mget(keys)).join('\n');
}

async function rejection(promise: Promise<unknown>): Promise<SecretKeyError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (err instanceof SecretKeyError) return err;
  throw new Error(`expected a SecretKeyError, got ${String(err)}`);
}

describe('cluster secrets in the store', () => {
  it('stores passwords encrypted and reads them decrypted; an unchanged cluster writes nothing', async () => {
    const store = new RegsyncStore(redisServer.redis, redisServer.prefix, new SecretBox(keyA));
    expect(await store.createCluster(cluster('east', 'east-pw-1'))).toBe('created');
    expect(await store.putCluster(cluster('west', 'west-pw-1'))).toBe('created');
    expect(await store.putCluster(cluster('plain'))).toBe('created');
    const stored = await raw(redisServer.prefix);
    expect(stored).not.toContain('east-pw-1');
    expect(stored).not.toContain('west-pw-1');
    expect(stored).toContain(`"password":"enc:v1:${keyA.id}:`);
    expect((await store.getCluster('east'))?.password).toBe('east-pw-1');
    expect((await store.listClusters()).map((c) => c.password)).toEqual(['east-pw-1', undefined, 'west-pw-1']);
    expect(await store.putCluster(cluster('west', 'west-pw-1'))).toBe('unchanged');
    expect(await store.putCluster(cluster('west', 'west-pw-2'))).toBe('replaced');
    expect((await store.getCluster('west'))?.password).toBe('west-pw-2');
  });

  it('a process without the key, or with another, refuses to start naming the key id', async () => {
    await new RegsyncStore(redisServer.redis, redisServer.prefix, new SecretBox(keyA)).putCluster(cluster('east', 'pw'));
    for (const box of [SecretBox.none, new SecretBox(keyB)]) {
      const store = new RegsyncStore(redisServer.redis, redisServer.prefix, box);
      const err = await rejection(prepareStoredSecrets(store, box, logger));
      expect(err.code).toBe('key_missing');
      expect(err.keyId).toBe(keyA.id);
      expect(err.message).toContain(`cluster east's password is encrypted with secret key ${keyA.id}`);
      expect(err.message).toContain('REGSYNC_SECRET_KEY');
      // Reads made anyway fail the same way, never answer ciphertext.
      expect((await rejection(store.getCluster('east'))).code).toBe('key_missing');
    }
  });

  it('without a key stores in clear; given one, a process encrypts what is in clear at start', async () => {
    const clear = new RegsyncStore(redisServer.redis, redisServer.prefix);
    await clear.putCluster(cluster('east', 'east-clear-pw'));
    await clear.putCluster(cluster('west', 'west-clear-pw'));
    expect(await prepareStoredSecrets(clear, SecretBox.none, logger)).toEqual({ total: 2, encrypted: 0, clear: 2, underPreviousKeys: 0 });
    expect(await raw(redisServer.prefix)).toContain('east-clear-pw');

    const box = new SecretBox(keyA);
    const keyed = new RegsyncStore(redisServer.redis, redisServer.prefix, box);
    expect(await prepareStoredSecrets(keyed, box, logger)).toEqual({ total: 2, encrypted: 2, clear: 0, underPreviousKeys: 0 });
    expect(await raw(redisServer.prefix)).not.toMatch(/clear-pw/);
    expect((await keyed.getCluster('west'))?.password).toBe('west-clear-pw');
    // A second start finds nothing to do.
    expect(await prepareStoredSecrets(keyed, box, logger)).toEqual({ total: 2, encrypted: 0, clear: 0, underPreviousKeys: 0 });
  });

  it('rotates: reads under the previous key, re-encrypts everything under the current one', async () => {
    const old = new RegsyncStore(redisServer.redis, redisServer.prefix, new SecretBox(keyA));
    await old.putCluster(cluster('east', 'east-pw'));
    await old.putCluster(cluster('west', 'west-pw'));
    const rotating = new SecretBox(keyB, [keyA]);
    const store = new RegsyncStore(redisServer.redis, redisServer.prefix, rotating);
    expect(await prepareStoredSecrets(store, rotating, logger)).toMatchObject({ underPreviousKeys: 2 });
    // A write during the rotation goes under the new key.
    await store.putCluster(cluster('west', 'west-pw-2'));
    expect((await store.inspectSecrets()).map((s) => [s.cluster, s.keyId])).toEqual([
      ['east', keyA.id],
      ['west', keyB.id],
    ]);
    const { resealed, untouched } = await store.resealSecrets('all');
    expect(resealed).toEqual([{ cluster: 'east', field: 'password' }]);
    expect(untouched).toBe(1);
    const onlyNew = new RegsyncStore(redisServer.redis, redisServer.prefix, new SecretBox(keyB));
    expect((await onlyNew.listClusters()).map((c) => c.password)).toEqual(['east-pw', 'west-pw-2']);
    expect((await store.resealSecrets('all')).resealed).toEqual([]);
    const err = await rejection(prepareStoredSecrets(old, new SecretBox(keyA), logger));
    expect(err.keyId).toBe(keyB.id);
  });

  it('the first step of a rotation: the old key current, the new one previous, reads what the new key wrote', async () => {
    await new RegsyncStore(redisServer.redis, redisServer.prefix, new SecretBox(keyB, [keyA])).putCluster(cluster('east', 'east-pw'));
    const box = new SecretBox(keyA, [keyB]);
    const store = new RegsyncStore(redisServer.redis, redisServer.prefix, box);
    expect(await prepareStoredSecrets(store, box, logger)).toMatchObject({ total: 1, underPreviousKeys: 1 });
    expect((await store.getCluster('east'))?.password).toBe('east-pw');
    await store.putCluster(cluster('west', 'west-pw'));
    expect((await store.inspectSecrets()).map((s) => s.keyId)).toEqual([keyB.id, keyA.id]);
  });

  it('a rotation never undoes a write made meanwhile', async () => {
    await new RegsyncStore(redisServer.redis, redisServer.prefix, new SecretBox(keyA)).putCluster(cluster('east', 'east-pw'));
    const rotating = new RegsyncStore(redisServer.redis, redisServer.prefix, new SecretBox(keyB, [keyA]));
    const writer = new RegsyncStore(redisServer.connect(), redisServer.prefix, new SecretBox(keyB, [keyA]));
    // A write lands between the rotation's read of the records and its compare-and-set.
    const redis = redisServer.redis;
    const mget = redis.mget.bind(redis);
    redis.mget = (async (...args: Parameters<typeof mget>) => {
      const answer = await mget(...args);
      redis.mget = mget;
      await writer.putCluster(cluster('east', 'east-pw-1'));
      return answer;
    }) as typeof redis.mget;
    expect((await rotating.resealSecrets('all')).resealed).toEqual([]);
    expect((await rotating.getCluster('east'))?.password).toBe('east-pw-1');
  });
});
