import type { Redis } from 'ioredis';
import { redisKeys } from '../util/redis-keys.js';

/** The shape of a deployment: fixed for its lifetime, since service syncs are hashed onto shards. */
export interface DeploymentSettings {
  /** Number of shards (one queue each), 1..1024. */
  shards: number;
  /** Workers serving each shard, the leader included, 1..16. */
  replicas: number;
}

/** {@link DeploymentSettings} as stored at `<prefix>:deployment`. */
export interface Deployment extends DeploymentSettings {
  /** ISO time of the first start. */
  createdAt: string;
}

export const DEFAULT_SHARDS = 8;
export const DEFAULT_REPLICAS = 2;
const LIMITS = { shards: 1024, replicas: 16 } as const;

/**
 * A start asked for settings that differ from the stored ones. Changing the shard count would move
 * service syncs between shards under running workers; there is no migration, so regsync refuses.
 */
export class DeploymentMismatchError extends Error {
  override readonly name = 'DeploymentMismatchError';

  constructor(
    readonly key: string,
    readonly stored: Deployment,
    readonly requested: Partial<DeploymentSettings>,
  ) {
    const asked = (Object.keys(requested) as (keyof DeploymentSettings)[])
      .filter((k) => requested[k] !== undefined)
      .map((k) => `${k}=${requested[k]}`)
      .join(' ');
    super(
      `${key} holds a deployment with shards=${stored.shards} replicas=${stored.replicas} ` +
        `(created ${stored.createdAt}), but this start asked for ${asked}. ` +
        `Start with the stored values (or without setting shards/replicas), ` +
        `or use a fresh key prefix (--prefix) or Redis for a new deployment.`,
    );
  }
}

/**
 * The deployment's settings: stored with SET NX at `<prefix>:deployment` by the first start, read back
 * by every later one. Pass `undefined` for a value to take the stored one (or the default, 8 shards and
 * 2 replicas, on the first start); an explicit value that differs from the stored one throws a
 * {@link DeploymentMismatchError}. Out-of-range values throw a RangeError before Redis is touched; a
 * stored value that is not a valid deployment throws an Error naming the key.
 */
export async function ensureDeployment(
  redis: Redis,
  prefix: string,
  requested: Partial<DeploymentSettings> = {},
): Promise<Deployment> {
  for (const k of ['shards', 'replicas'] as const) {
    const value = requested[k];
    if (value !== undefined && !validSetting(k, value)) {
      throw new RangeError(`${k} must be an integer from 1 to ${LIMITS[k]}, got ${value}`);
    }
  }
  const key = redisKeys.deployment(prefix);
  const fresh: Deployment = {
    shards: requested.shards ?? DEFAULT_SHARDS,
    replicas: requested.replicas ?? DEFAULT_REPLICAS,
    createdAt: new Date().toISOString(),
  };
  for (;;) {
    if ((await redis.set(key, JSON.stringify(fresh), 'NX')) === 'OK') return fresh;
    const raw = await redis.get(key);
    if (raw === null) continue; // deleted between SET NX and GET: try to create it again
    const stored = parseDeployment(key, raw);
    if (
      (requested.shards !== undefined && requested.shards !== stored.shards) ||
      (requested.replicas !== undefined && requested.replicas !== stored.replicas)
    ) {
      throw new DeploymentMismatchError(key, stored, requested);
    }
    return stored;
  }
}

function validSetting(k: keyof DeploymentSettings, value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= LIMITS[k];
}

function parseDeployment(key: string, raw: string): Deployment {
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    value = undefined;
  }
  const d = value as Partial<Deployment> | undefined;
  if (
    typeof d !== 'object' ||
    d === null ||
    !validSetting('shards', d.shards) ||
    !validSetting('replicas', d.replicas) ||
    typeof d.createdAt !== 'string'
  ) {
    throw new Error(`${key} does not hold a valid deployment record: ${raw.slice(0, 200)}`);
  }
  return { shards: d.shards, replicas: d.replicas, createdAt: d.createdAt };
}

/** The stored deployment, or undefined before any worker started (read-only: for API processes). */
export async function readDeployment(redis: Redis, prefix: string): Promise<Deployment | undefined> {
  const key = redisKeys.deployment(prefix);
  const raw = await redis.get(key);
  return raw === null ? undefined : parseDeployment(key, raw);
}
