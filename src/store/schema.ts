import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { redisKeys } from '../util/redis-keys.js';
import { SchemaVersionError } from './schema-version-error.js';

/**
 * The version of the layout of regsync's state in Redis (keys, their types, the JSON they hold).
 * A release that changes the layout raises it and adds a {@link SchemaMigration} from the version
 * before. State written before the version was recorded is version 1.
 */
export const SCHEMA_VERSION = 1;

/** One step of the layout, from `from` to `from + 1`; it must be safe to run again if a process dies in it. */
export interface SchemaMigration {
  from: number;
  describe: string;
  run(redis: Redis, prefix: string): Promise<void>;
}

/** The steps this release knows, oldest first. */
export const SCHEMA_MIGRATIONS: readonly SchemaMigration[] = [];

/** What {@link ensureSchema} found and did. */
export interface SchemaCheck {
  /** The version the state has now. */
  version: number;
  /** `fresh`: nothing was stored; `current`: already at this version; `migrated`: steps were run. */
  outcome: 'fresh' | 'current' | 'migrated';
  /** The steps run, by their `from`. */
  ran: number[];
}

const LOCK_TTL_MS = 30_000;

/**
 * Makes sure the state under `prefix` has the layout this regsync uses, before a process reads or
 * writes anything else: records it for a fresh deployment, migrates older state step by step (one
 * process at a time, under `<prefix>:schema-lock`; the others wait and then find it done), and
 * refuses state of a newer version with a {@link SchemaVersionError}, so that a rolling upgrade
 * never has an old process misread what a new one wrote.
 */
export async function ensureSchema(
  redis: Redis,
  prefix: string,
  options: { logger?: Logger; current?: number; migrations?: readonly SchemaMigration[]; waitMs?: number } = {},
): Promise<SchemaCheck> {
  const current = options.current ?? SCHEMA_VERSION;
  const migrations = options.migrations ?? SCHEMA_MIGRATIONS;
  const key = redisKeys.schema(prefix);
  const lockKey = redisKeys.schemaLock(prefix);
  const deadline = Date.now() + (options.waitMs ?? 2 * LOCK_TTL_MS);
  const ran: number[] = [];
  for (;;) {
    const raw = await redis.get(key);
    if (raw === null && !(await holdsState(redis, prefix))) {
      if ((await redis.set(key, String(current), 'NX')) === 'OK') return { version: current, outcome: 'fresh', ran };
      continue;
    }
    const stored = raw === null ? 1 : parseVersion(key, raw, current);
    if (stored > current) throw new SchemaVersionError(key, raw ?? '1', current);
    if (stored === current && raw !== null) return { version: current, outcome: ran.length > 0 ? 'migrated' : 'current', ran };
    // Older (or not yet recorded): one process migrates, the others wait for it.
    const owner = randomBytes(8).toString('hex');
    if ((await redis.set(lockKey, owner, 'PX', LOCK_TTL_MS, 'NX')) !== 'OK') {
      if (Date.now() > deadline) throw new Error(`${lockKey} is held: another regsync process has been migrating the state for too long; look at its log`);
      await delay(200);
      continue;
    }
    try {
      for (let version = stored; version < current; version++) {
        const step = migrations.find((m) => m.from === version);
        if (step === undefined) throw new Error(`no migration of regsync state from schema version ${version} (this regsync knows ${current})`);
        options.logger?.info({ from: version, to: version + 1, step: step.describe }, 'migrating regsync state in Redis');
        await step.run(redis, prefix);
        await redis.set(key, String(version + 1));
        ran.push(version);
      }
      if (stored === current) await redis.set(key, String(current));
    } finally {
      // Only our own lock: a step that outlived the TTL must not free another process's.
      if ((await redis.get(lockKey)) === owner) await redis.del(lockKey);
    }
  }
}

function parseVersion(key: string, raw: string, current: number): number {
  if (!/^\d{1,9}$/.test(raw)) throw new SchemaVersionError(key, raw, current);
  return Number(raw);
}

/** Whether anything of regsync's is stored under the prefix (state from before versions were recorded). */
async function holdsState(redis: Redis, prefix: string): Promise<boolean> {
  for (const k of [redisKeys.deployment(prefix), redisKeys.clusters(prefix), redisKeys.tasks(prefix)]) {
    if ((await redis.exists(k)) === 1) return true;
  }
  return false;
}
