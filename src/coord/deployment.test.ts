import type { Redis } from 'ioredis';
import { beforeEach, describe, expect, it } from 'vitest';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { DeploymentMismatchError, ensureDeployment } from './index.js';

let redis: Redis;
let prefix: string;
const redisServer = redisPerTest();

beforeEach(() => {
  redis = redisServer.redis;
  prefix = redisServer.prefix;
});

describe('ensureDeployment', () => {
  it('stores the defaults on the first start and answers them on later starts', async () => {
    const first = await ensureDeployment(redis, prefix, {});
    expect(first).toMatchObject({ shards: 8, replicas: 2 });
    expect(JSON.parse((await redis.get(`${prefix}:deployment`)) ?? 'null')).toEqual(first);
    expect(await ensureDeployment(redis, prefix)).toEqual(first);
    expect(await ensureDeployment(redis, prefix, { shards: 8 })).toEqual(first);
  });

  it('stores explicit values on the first start; later starts without values take them', async () => {
    const first = await ensureDeployment(redis, prefix, { shards: 16, replicas: 3 });
    expect(first).toMatchObject({ shards: 16, replicas: 3 });
    expect(await ensureDeployment(redis, prefix, { shards: undefined, replicas: undefined })).toEqual(first);
    expect(await ensureDeployment(redis, prefix, { replicas: 3 })).toEqual(first);
  });

  it('lets exactly one of several concurrent first starts create the record', async () => {
    const answers = await Promise.all([1, 2, 3, 4].map((replicas) => ensureDeployment(redis, prefix, { replicas }).catch((e: unknown) => e)));
    const created = answers.filter((a) => !(a instanceof DeploymentMismatchError));
    expect(created).toHaveLength(1);
    expect(answers.filter((a) => a instanceof DeploymentMismatchError)).toHaveLength(3);
  });

  it('throws a DeploymentMismatchError saying what is stored, what was asked and how to proceed', async () => {
    const stored = await ensureDeployment(redis, prefix, { shards: 8, replicas: 2 });
    const error = await ensureDeployment(redis, prefix, { shards: 16 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(DeploymentMismatchError);
    const mismatch = error as DeploymentMismatchError;
    expect(mismatch.stored).toEqual(stored);
    expect(mismatch.requested).toEqual({ shards: 16 });
    expect(mismatch.message).toContain(`${prefix}:deployment holds a deployment with shards=8 replicas=2`);
    expect(mismatch.message).toContain('asked for shards=16.');
    expect(mismatch.message).toContain('Start with the stored values');
    expect(mismatch.message).toContain('fresh key prefix (--prefix) or Redis');
    await expect(ensureDeployment(redis, prefix, { shards: 8, replicas: 3 })).rejects.toThrow('asked for shards=8 replicas=3.');
  });

  it('rejects out-of-range values before touching Redis', async () => {
    for (const bad of [{ shards: 0 }, { shards: 1025 }, { shards: 2.5 }, { replicas: 0 }, { replicas: 17 }, { replicas: Number.NaN }]) {
      await expect(ensureDeployment(redis, prefix, bad)).rejects.toThrow(RangeError);
    }
    await expect(ensureDeployment(redis, prefix, { shards: 0 })).rejects.toThrow('shards must be an integer from 1 to 1024, got 0');
    expect(await redis.exists(`${prefix}:deployment`)).toBe(0);
    expect(await ensureDeployment(redis, prefix, { shards: 1024, replicas: 16 })).toMatchObject({ shards: 1024, replicas: 16 });
  });

  it('names the key when the stored record is not a deployment', async () => {
    await redis.set(`${prefix}:deployment`, '{"shards":"many"}');
    await expect(ensureDeployment(redis, prefix)).rejects.toThrow(`${prefix}:deployment does not hold a valid deployment record`);
  });
});
