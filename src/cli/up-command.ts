import type { Logger } from 'pino';
import { startNode, type NodeOptions, type RegsyncNode } from '../node.js';
import type { RunningCmdb } from '../cmdb/index.js';
import { startCmdbFromCli, type CmdbCliOptions } from './cmdb-options.js';
import { startLocalRedis, type LocalRedis } from './local-redis.js';

export interface UpOptions extends ShardOptions {
  listen: string;
  redis?: string | undefined;
  dataDir: string;
}

/** Options every worker-running command takes. */
export interface ShardOptions extends CmdbCliOptions {
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
  const cmdb = await startCmdbFromCli(opts, logger);
  let localRedis: LocalRedis | undefined;
  let node: RegsyncNode;
  try {
    localRedis = redisUrl ? undefined : await startLocalRedis(opts.dataDir, logger);
    node = await startWorkerNode({ redisUrl: redisUrl ?? (localRedis as LocalRedis).url, listen }, opts, cmdb, logger);
  } catch (err) {
    await localRedis?.stop();
    await cmdb?.close();
    throw err;
  }
  return {
    node,
    localRedis,
    async close() {
      await node.close();
      await cmdb?.close();
      await localRedis?.stop();
    },
  };
}

/** `regsync worker`: a sync worker without HTTP; closing it also closes its CMDB. */
export async function runWorker(opts: ShardOptions & { redis: string }, logger: Logger): Promise<{ node: RegsyncNode; close(): Promise<void> }> {
  const cmdb = await startCmdbFromCli(opts, logger);
  let node: RegsyncNode;
  try {
    node = await startWorkerNode({ redisUrl: opts.redis, roles: ['worker'] }, opts, cmdb, logger);
  } catch (err) {
    await cmdb?.close();
    throw err;
  }
  return {
    node,
    async close() {
      await node.close();
      await cmdb?.close();
    },
  };
}

function startWorkerNode(
  base: Pick<NodeOptions, 'redisUrl' | 'listen' | 'roles'>,
  opts: ShardOptions,
  cmdb: RunningCmdb | undefined,
  logger: Logger,
): Promise<RegsyncNode> {
  return startNode({
    ...base,
    logger,
    shards: opts.shards,
    replicas: opts.replicas,
    workerId: opts.workerId,
    leaseTtlMs: opts.leaseTtlMs,
    cmdb: cmdb && { cache: cmdb.cache, describe: cmdb.describe },
  });
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
