import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startNode, type RegsyncNode } from '../../src/node.js';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { parseSecretKey, SecretBox } from '../../src/secrets/index.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { api, copiesIn, persistent, testLogger } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** Every key and every value under `prefix`, whatever its type, as one string. */
async function dumpRedis(redis: Redis): Promise<string> {
  const parts: string[] = [];
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'COUNT', 500);
    cursor = next;
    for (const key of keys) {
      parts.push(key);
      const type = await redis.type(key);
      if (type === 'string') parts.push((await redis.get(key)) ?? '');
      else if (type === 'hash') parts.push(JSON.stringify(await redis.hgetall(key)));
      else if (type === 'list') parts.push(JSON.stringify(await redis.lrange(key, 0, -1)));
      else if (type === 'set') parts.push(JSON.stringify(await redis.smembers(key)));
      else if (type === 'zset') parts.push(JSON.stringify(await redis.zrange(key, '0', '-1', 'WITHSCORES')));
      else if (type === 'stream') parts.push(JSON.stringify(await redis.xrange(key, '-', '+')));
      // Gone since the SCAN (queue keys come and go while the workers run).
      else if (type === 'none') continue;
      else throw new Error(`${key} has type ${type}, which this test cannot read`);
    }
  } while (cursor !== '0');
  return parts.join('\n');
}

/** Every byte of every file under `dir` (the append-only files), latin1 so no byte is lost. */
function filesUnder(dir: string): { names: string[]; bytes: string } {
  const names: string[] = [];
  let bytes = '';
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) continue;
    names.push(name);
    bytes += readFileSync(path).toString('latin1');
  }
  return { names, bytes };
}

/**
 * Clusters with passwords created through the REST API and the nacos-sync API of a process with a
 * secret key: Redis (every key, every type) and its append-only file hold no password, while the
 * adapters log in with them (both embedded registries require users) and the copy gets through.
 */
describe('cluster secrets at rest', () => {
  const shanghaiPassword = `sh-${randomUUID()}`;
  const beijingPassword = `bj-${randomUUID()}`;
  const box = new SecretBox(parseSecretKey(randomBytes(32).toString('base64'), 'test'));
  let redis: RedisServer;
  let client: Redis;
  let shanghai: RunningRegistry;
  let beijing: RunningRegistry;
  let node: RegsyncNode | undefined;

  beforeAll(async () => {
    redis = await startRedis({ appendonly: true });
    client = new Redis(redis.url);
    shanghai = await startRegistry({ port: 0, users: new Map([['nacos', shanghaiPassword]]) });
    beijing = await startRegistry({ port: 0, users: new Map([['regsync', beijingPassword]]) });
    node = await startNode({ redisUrl: redis.url, listen: { host: '127.0.0.1', port: 0 }, logger: testLogger(), confirmEmptyMs: 1_000, secrets: box });
  });
  afterAll(async () => {
    client?.disconnect();
    await node?.close();
    await shanghai?.close();
    await beijing?.close();
    await redis?.cleanup();
  });

  it('keeps every password out of Redis and its AOF, and the adapters log in with them', async () => {
    const url = node?.url as string;
    const native = await api(url, 'POST', '/api/v1/clusters', {
      id: 'shanghai',
      kind: 'nacos',
      endpoints: [shanghai.endpoint],
      username: 'nacos',
      password: shanghaiPassword,
    });
    expect(native.status, JSON.stringify(native.body)).toBe(201);
    const added = await api(url, 'POST', '/v1/cluster/add', {
      clusterName: 'beijing',
      clusterType: 'NACOS',
      connectKeyList: [beijing.endpoint],
      userName: 'regsync',
      password: beijingPassword,
    });
    expect(added.body, JSON.stringify(added.body)).toMatchObject({ success: true });
    const beijingId = ((await api(url, 'GET', '/v1/cluster/list?pageNum=1&pageSize=10')).body.clusterModels as Array<{ clusterName: string; clusterId: string }>).find(
      (c) => c.clusterName === 'beijing',
    )?.clusterId as string;

    // The API shows that there is a password, never the password.
    const listed = await api(url, 'GET', '/api/v1/clusters');
    expect(listed.body.items).toEqual(
      expect.arrayContaining([expect.objectContaining({ id: 'shanghai', hasPassword: true }), expect.objectContaining({ id: beijingId, hasPassword: true })]),
    );
    expect(JSON.stringify(listed.body)).not.toContain(shanghaiPassword);
    // The store hands the clear password to those that need it.
    expect((await node?.store.getCluster(beijingId))?.password).toBe(beijingPassword);

    // A sync through both registries, each requiring its user: the decrypted passwords work.
    shanghai.store.register('public', 'DEFAULT_GROUP', 'orders', persistent('10.52.0.1', { app: 'orders' }));
    const task = await api(url, 'POST', '/api/v1/tasks', { id: 'orders', source: 'shanghai', destination: beijingId, service: 'orders' });
    expect(task.status, JSON.stringify(task.body)).toBe(201);
    await waitUntil(() => copiesIn(beijing, 'orders').length === 1, { message: 'the copy in beijing' });
    expect(copiesIn(beijing, 'orders')[0]).toMatchObject({ ip: '10.52.0.1', metadata: { app: 'orders' } });

    // Every key and value of every type in Redis.
    const dump = await dumpRedis(client);
    expect(dump).toContain(`enc:v1:${box.keyId as string}:`);
    expect(dump).toContain('orders');
    expect(dump).not.toContain(shanghaiPassword);
    expect(dump).not.toContain(beijingPassword);

    // Every byte of the append-only files, flushed by a clean stop of Redis.
    await node?.close();
    node = undefined;
    client.disconnect();
    await redis.stop();
    const aof = filesUnder(join(redis.dataDir, 'appendonlydir'));
    expect(aof.names.some((n) => n.endsWith('.incr.aof'))).toBe(true);
    expect(aof.bytes).toContain(`enc:v1:${box.keyId as string}:`);
    expect(aof.bytes).toContain(shanghai.endpoint);
    expect(aof.bytes).not.toContain(shanghaiPassword);
    expect(aof.bytes).not.toContain(beijingPassword);
  });
});
