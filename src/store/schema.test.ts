import { describe, expect, it } from 'vitest';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { redisKeys } from '../util/redis-keys.js';
import { SCHEMA_VERSION, ensureSchema, type SchemaMigration } from './schema.js';
import { SchemaVersionError } from './schema-version-error.js';

const r = redisPerTest();

describe('ensureSchema', () => {
  it('records the version of a fresh deployment, and finds it current afterwards', async () => {
    expect(await ensureSchema(r.redis, r.prefix)).toEqual({ version: SCHEMA_VERSION, outcome: 'fresh', ran: [] });
    expect(await r.redis.get(redisKeys.schema(r.prefix))).toBe(String(SCHEMA_VERSION));
    expect(await ensureSchema(r.redis, r.prefix)).toEqual({ version: SCHEMA_VERSION, outcome: 'current', ran: [] });
  });

  it('takes state stored before versions were recorded as version 1', async () => {
    await r.redis.set(redisKeys.deployment(r.prefix), JSON.stringify({ shards: 8, replicas: 2, createdAt: '' }));
    const check = await ensureSchema(r.redis, r.prefix, { current: 1 });
    expect(check.version).toBe(1);
    expect(await r.redis.get(redisKeys.schema(r.prefix))).toBe('1');
  });

  it('refuses state a newer regsync wrote, and a value that is no version, saying what to do', async () => {
    await r.redis.set(redisKeys.schema(r.prefix), '7');
    const err = await ensureSchema(r.redis, r.prefix, { current: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SchemaVersionError);
    expect((err as Error).message).toBe(
      `${r.prefix}:schema says the state in Redis has schema version 7, and this regsync knows versions up to 1: a newer regsync wrote it. ` +
        'Run the newer regsync on every process (a rolling upgrade never goes back), or use another --prefix or Redis.',
    );
    await r.redis.set(redisKeys.schema(r.prefix), 'hello');
    await expect(ensureSchema(r.redis, r.prefix)).rejects.toThrow(/holds "hello", not a schema version/);
  });

  it('migrates older state step by step, once, however many processes start at the same time', async () => {
    await r.redis.set(redisKeys.schema(r.prefix), '1');
    const order: string[] = [];
    const step = (from: number): SchemaMigration => ({
      from,
      describe: `step ${from}`,
      run: async (redis, prefix) => {
        order.push(`start ${from}`);
        await redis.incr(`${prefix}:ran-${from}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
        order.push(`end ${from}`);
      },
    });
    const migrations = [step(2), step(1)];
    const checks = await Promise.all([0, 1, 2].map(() => ensureSchema(r.connect(), r.prefix, { current: 3, migrations })));
    expect(checks.map((c) => c.version)).toEqual([3, 3, 3]);
    expect(checks.filter((c) => c.outcome === 'migrated')).toHaveLength(1);
    expect(order).toEqual(['start 1', 'end 1', 'start 2', 'end 2']);
    expect([await r.redis.get(`${r.prefix}:ran-1`), await r.redis.get(`${r.prefix}:ran-2`), await r.redis.get(redisKeys.schema(r.prefix))]).toEqual(['1', '1', '3']);
    expect(await r.redis.exists(redisKeys.schemaLock(r.prefix))).toBe(0);
  });

  it('stops at a version it has no step for', async () => {
    await r.redis.set(redisKeys.schema(r.prefix), '1');
    await expect(ensureSchema(r.redis, r.prefix, { current: 2, migrations: [] })).rejects.toThrow('no migration of regsync state from schema version 1 (this regsync knows 2)');
  });
});
