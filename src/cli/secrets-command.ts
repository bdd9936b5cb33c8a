import { randomBytes } from 'node:crypto';
import type { Command } from 'commander';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { openRedis } from '../node/connections.js';
import { RedisErrorLog } from '../node/redis-error-log.js';
import { waitForRedis } from '../node/redis-ready.js';
import { DEFAULT_REDIS_CONNECT_TIMEOUT_MS, parseRedisUrl, redisClientSettings, type RedisCliOptions } from '../node/redis-target.js';
import { SecretBox, SECRET_KEY_BYTES } from '../secrets/index.js';
import { prepareStoredSecrets, RegsyncStore, type StoredSecret } from '../store/index.js';
import { addRedisOptions } from './redis-options.js';
import { addSecretKeyOptions, secretBoxOfCli, type SecretKeyCliOptions } from './secret-key-options.js';

/** Options of `regsync secrets status` and `regsync secrets rotate`. */
export interface SecretsCommandOptions extends SecretKeyCliOptions, RedisCliOptions {
  /** `--redis`: any form the other commands take (`redis://`, `rediss://`, `redis+sentinel://`, ...). */
  redis: string;
  prefix?: string | undefined;
  /** `rotate --rewrite-aof`: ask Redis to rewrite its append-only file afterwards, and wait for it. */
  rewriteAof?: boolean | undefined;
}

/** What `regsync secrets rotate` did. */
export interface RotateResult {
  keyId: string;
  /** Secrets written again under the current key (from clear or a previous key). */
  resealed: number;
  /** Secrets that were under the current key already. */
  untouched: number;
  /** Whether the append-only file was rewritten. */
  aofRewritten: boolean;
}

/**
 * `regsync secrets rotate`: re-encrypts every stored cluster secret with the current key (those in
 * clear and those under a previous key), after checking that every one of them decrypts with the
 * keys given (nothing is written otherwise). Safe beside running processes: each record is
 * replaced only if unchanged since read. With `rewriteAof`, Redis rewrites its append-only file, so
 * that earlier values (in clear, or under the old key) leave it too.
 */
export async function rotateSecrets(opts: SecretsCommandOptions, logger: Logger): Promise<RotateResult> {
  const box = secretBoxOfCli(opts);
  if (box.keyId === undefined) throw new Error('regsync secrets rotate needs the new key: REGSYNC_SECRET_KEY or --secret-key-file (the old one as REGSYNC_SECRET_KEY_PREVIOUS or --previous-secret-key-file)');
  return withStore(opts, box, logger, async (store, redis) => {
    // Refuses, naming the key, when a secret needs one not given; encrypts what is in clear.
    const report = await prepareStoredSecrets(store, box, logger);
    const { resealed, untouched } = await store.resealSecrets('all');
    const aofRewritten = opts.rewriteAof === true ? await rewriteAof(redis) : false;
    return { keyId: box.keyId as string, resealed: resealed.length + report.encrypted, untouched: untouched - report.encrypted, aofRewritten };
  });
}

/** `regsync secrets status`: where every stored secret is, and in clear or under which key; decrypts nothing. */
export async function secretsStatus(opts: SecretsCommandOptions, logger: Logger): Promise<StoredSecret[]> {
  return withStore(opts, SecretBox.none, logger, (store) => store.inspectSecrets());
}

/** Adds `regsync secrets` (`generate-key`, `status`, `rotate`) to the program. */
export function addSecretsCommand(program: Command, logger: () => Logger): void {
  const secrets = program.command('secrets').description('the key cluster secrets are encrypted with in Redis: make one, see what is under which key, rotate');
  secrets
    .command('generate-key')
    .description(`print a new random key (${SECRET_KEY_BYTES} bytes, base64) for REGSYNC_SECRET_KEY or --secret-key-file`)
    .action(() => {
      process.stdout.write(`${randomBytes(SECRET_KEY_BYTES).toString('base64')}\n`);
    });
  const withRedis = (command: Command): Command =>
    addRedisOptions(
      command
        .requiredOption('--redis <url>', 'Redis of the deployment, in any form the other commands take (also REGSYNC_REDIS_URL)', process.env.REGSYNC_REDIS_URL)
        .option('--prefix <prefix>', 'prefix of the deployment\'s keys', 'regsync'),
    );
  withRedis(secrets.command('status').description('list every stored cluster secret: in clear, or the id of the key it is encrypted with')).action(
    async (opts: SecretsCommandOptions) => {
      const found = await secretsStatus(opts, logger());
      for (const s of found) process.stdout.write(`${s.cluster} ${s.field} ${s.keyId === undefined ? 'clear' : `key ${s.keyId}`}\n`);
      process.stdout.write(`${found.length} secret${found.length === 1 ? '' : 's'}\n`);
    },
  );
  addSecretKeyOptions(
    withRedis(secrets.command('rotate').description('re-encrypt every stored cluster secret with the current key (give the old one as previous)'))
      .option('--rewrite-aof', 'then have Redis rewrite its append-only file (BGREWRITEAOF), so that older values leave it too, and wait for it'),
  ).action(async (opts: SecretsCommandOptions) => {
    const result = await rotateSecrets(opts, logger());
    const aof = result.aofRewritten ? '; append-only file rewritten' : '; older values stay in Redis\' append-only file until it is rewritten (--rewrite-aof)';
    process.stdout.write(`re-encrypted ${result.resealed} secret(s) with key ${result.keyId}; ${result.untouched} already under it${aof}\n`);
  });
}

/**
 * Runs `use` on the deployment's store, over a connection made as every other command makes its
 * own: the URL forms of `--redis` (Sentinel included), the TLS flags, and the start bound, with a
 * clear error (`cannot reach Redis at ...`) when Redis does not answer.
 */
async function withStore<T>(opts: SecretsCommandOptions, box: SecretBox, logger: Logger, use: (store: RegsyncStore, redis: Redis) => Promise<T>): Promise<T> {
  const target = parseRedisUrl(opts.redis);
  const settings = redisClientSettings(opts);
  const log = logger.child({ component: 'redis' });
  const redis = openRedis(target, settings, { maxRetriesPerRequest: 2 }, new RedisErrorLog(log, target), log);
  try {
    await waitForRedis(redis, target, settings.connectTimeoutMs ?? DEFAULT_REDIS_CONNECT_TIMEOUT_MS);
    return await use(new RegsyncStore(redis, opts.prefix ?? 'regsync', box), redis);
  } finally {
    redis.disconnect();
  }
}

/** BGREWRITEAOF, then waits until Redis reports no rewrite in progress or scheduled. */
async function rewriteAof(redis: Redis): Promise<boolean> {
  const persistence = async (): Promise<Record<string, string>> =>
    Object.fromEntries(
      (await redis.info('persistence'))
        .split(/\r?\n/)
        .filter((l) => l.includes(':'))
        .map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1)]),
    );
  if ((await persistence()).aof_enabled !== '1') return false;
  const idle = async (): Promise<Record<string, string>> => {
    for (;;) {
      const p = await persistence();
      if (p.aof_rewrite_in_progress === '0' && p.aof_rewrite_scheduled === '0') return p;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };
  // A rewrite already running may have started before the last write: ours starts after it.
  await idle();
  await redis.bgrewriteaof();
  const done = await idle();
  if (done.aof_last_bgrewrite_status !== 'ok') throw new Error(`Redis could not rewrite its append-only file (aof_last_bgrewrite_status ${done.aof_last_bgrewrite_status})`);
  return true;
}
