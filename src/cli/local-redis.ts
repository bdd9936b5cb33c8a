import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/** A redis-server regsync started for itself (`regsync up` without `--redis`). */
export interface LocalRedis {
  url: string;
  dataDir: string;
  stop(): Promise<void>;
}

function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolvePort(address.port) : reject(new Error('no port'))));
    });
  });
}

async function answersPing(url: string): Promise<boolean> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 500 });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/**
 * Starts and supervises a local redis-server on 127.0.0.1 with its data (AOF) under `dir`, so a
 * single-machine `regsync up` keeps its tasks across restarts with nothing else to run. It is
 * restarted if it dies, and stopped with regsync.
 */
export async function startLocalRedis(dir: string, logger: Logger): Promise<LocalRedis> {
  const found = spawnSync('redis-server', ['--version'], { stdio: 'ignore' });
  if (found.error) {
    throw new Error('redis-server is not installed: install it (apt-get install -y redis-server) or pass --redis <url>');
  }
  const dataDir = resolve(dir, 'redis');
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const url = `redis://127.0.0.1:${port}`;
  const log = logger.child({ component: 'local-redis' });
  let child: ChildProcess | undefined;
  let stopping = false;
  const launch = () => {
    child = spawn(
      'redis-server',
      ['--bind', '127.0.0.1', '--port', String(port), '--dir', dataDir, '--appendonly', 'yes', '--save', '', '--daemonize', 'no', '--logfile', join(dataDir, 'redis.log')],
      { stdio: 'ignore' },
    );
    child.once('exit', (code, signal) => {
      if (stopping) return;
      log.error({ code, signal }, 'local redis-server exited; restarting');
      setTimeout(launch, 500).unref();
    });
  };
  const onExit = () => child?.kill('SIGKILL');
  process.once('exit', onExit);
  launch();
  const deadline = Date.now() + 10_000;
  while (!(await answersPing(url))) {
    if (Date.now() > deadline) {
      stopping = true;
      child?.kill('SIGKILL');
      throw new Error(`local redis-server did not start; see ${join(dataDir, 'redis.log')}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  log.info({ url, dataDir }, 'local redis-server started');
  return {
    url,
    dataDir,
    async stop() {
      stopping = true;
      process.off('exit', onExit);
      const proc = child;
      if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
      await new Promise<void>((done) => {
        const timer = setTimeout(() => proc.kill('SIGKILL'), 5_000);
        proc.once('exit', () => {
          clearTimeout(timer);
          done();
        });
        proc.kill('SIGTERM');
      });
    },
  };
}
