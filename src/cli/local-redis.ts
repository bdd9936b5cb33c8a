import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
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

/** The first port the local redis-server tries (then the next nine, then any free one). */
export const LOCAL_REDIS_PORT = 6380;

/** Binds `port` on 127.0.0.1 (0: any) and frees it again; answers the port, or undefined when it is taken. */
function tryPort(port: number): Promise<number | undefined> {
  return new Promise((resolvePort) => {
    const server = createServer();
    server.once('error', () => resolvePort(undefined));
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolvePort(typeof address === 'object' && address ? address.port : undefined));
    });
  });
}

/**
 * The port of the data dir's redis-server: the one it had last time (kept in `redis/port`), so
 * that its URL stays the same across restarts; else the first free one of 6380-6389; else any.
 */
async function stablePort(dataDir: string, log: Logger): Promise<number> {
  const file = join(dataDir, 'port');
  let recorded: number | undefined;
  try {
    const n = Number(readFileSync(file, 'utf8').trim());
    if (Number.isInteger(n) && n > 0 && n < 65536) recorded = n;
  } catch {
    // First start of this data dir.
  }
  const candidates = [...(recorded ? [recorded] : []), ...Array.from({ length: 10 }, (_, i) => LOCAL_REDIS_PORT + i).filter((p) => p !== recorded), 0];
  for (const candidate of candidates) {
    const port = await tryPort(candidate);
    if (port === undefined) continue;
    if (recorded !== undefined && port !== recorded) log.warn({ was: recorded, now: port }, 'the local redis-server\'s port is taken: it moves to another (its URL changes)');
    writeFileSync(file, `${port}\n`);
    return port;
  }
  throw new Error('no free port on 127.0.0.1 for the local redis-server');
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
 * restarted if it dies, and stopped with regsync. Its port stays the same across restarts of the
 * data dir (see {@link stablePort}). The caller holds the data dir's lock ({@link lockDataDir}).
 */
export async function startLocalRedis(dir: string, logger: Logger, options: { fresh?: boolean } = {}): Promise<LocalRedis> {
  const found = spawnSync('redis-server', ['--version'], { stdio: 'ignore' });
  if (found.error) {
    throw new Error('redis-server is not installed: install it (apt-get install -y redis-server) or pass --redis <url>');
  }
  const dataDir = resolve(dir, 'redis');
  const log = logger.child({ component: 'local-redis' });
  // A fresh start (the demo) begins from nothing; the port file goes too, and the same port is likely found again.
  if (options.fresh) rmSync(dataDir, { recursive: true, force: true });
  mkdirSync(dataDir, { recursive: true });
  const port = await stablePort(dataDir, log);
  const url = `redis://127.0.0.1:${port}`;
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
