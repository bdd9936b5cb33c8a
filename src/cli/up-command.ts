import type { Logger } from 'pino';
import { startNode, type RegsyncNode } from '../node.js';
import { startLocalRedis, type LocalRedis } from './local-redis.js';

export interface UpOptions extends ShardOptions {
  listen: string;
  redis?: string | undefined;
  dataDir: string;
}

/** Options every worker-running command takes. */
export interface ShardOptions {
  shards?: number | undefined;
  replicas?: number | undefined;
  workerId?: string | undefined;
  leaseTtlMs?: number | undefined;
}

/** Parses `host:port` (IPv6 in brackets). */
export function parseListen(value: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(value.trim());
  const port = Number(m?.[3]);
  if (!m || !Number.isInteger(port) || port > 65535) throw new Error(`invalid --listen "${value}": expected host:port`);
  return { host: (m[1] ?? m[2]) as string, port };
}

/** A running `regsync up`: the node and, when regsync started one, its local Redis. */
export interface UpHandle {
  node: RegsyncNode;
  localRedis: LocalRedis | undefined;
  close(): Promise<void>;
}

/**
 * `regsync up`: API and worker in one process. Without `--redis` (or `REGSYNC_REDIS_URL`) it starts
 * and supervises a local redis-server with its data under `--data-dir`.
 */
export async function runUp(opts: UpOptions, logger: Logger): Promise<UpHandle> {
  const listen = parseListen(opts.listen);
  const redisUrl = opts.redis ?? (process.env.REGSYNC_REDIS_URL || undefined);
  const localRedis = redisUrl ? undefined : await startLocalRedis(opts.dataDir, logger);
  let node: RegsyncNode;
  try {
    node = await startNode({
      redisUrl: redisUrl ?? (localRedis as LocalRedis).url,
      listen,
      logger,
      shards: opts.shards,
      replicas: opts.replicas,
      workerId: opts.workerId,
      leaseTtlMs: opts.leaseTtlMs,
    });
  } catch (err) {
    await localRedis?.stop();
    throw err;
  }
  return {
    node,
    localRedis,
    async close() {
      await node.close();
      await localRedis?.stop();
    },
  };
}

/** Stops `handle` on SIGINT/SIGTERM (a second signal while stopping is ignored) and exits. */
export function stopOnSignal(close: () => Promise<void>, logger: Logger): void {
  let closing = false;
  const stop = (signal: string) => {
    if (closing) return;
    closing = true;
    logger.info({ signal }, 'shutting down');
    close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, 'shutdown failed');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}
