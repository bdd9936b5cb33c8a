import { connect } from 'node:net';
import { join } from 'node:path';
import { freePort } from './ports.js';
import {
  findExecutable,
  makeTempDir,
  ManagedProcess,
  ManagedServer,
  ServerStartError,
  waitForReady,
} from './server-process.js';

/** Options of {@link startRedis}. */
export interface StartRedisOptions {
  /** Turn on the append-only file, so that data survives `restart()` (and, mostly, `kill()`). Default false. */
  appendonly?: boolean;
}

/**
 * A real redis-server started for one test file.
 *
 * Deliberately left out: RDB snapshots (`--save ''`), so without `appendonly` a restart starts empty;
 * passwords, TLS and clustering.
 */
export interface RedisServer {
  /** TCP port on 127.0.0.1. */
  readonly port: number;
  /** `redis://127.0.0.1:<port>`. */
  readonly url: string;
  /** Temporary directory (under os.tmpdir()) holding the data files and `redis.log`. */
  readonly dataDir: string;
  /** stdout/stderr of redis-server, appended across restarts. */
  readonly logFile: string;
  /** Whether the redis-server process is currently alive. */
  readonly running: boolean;
  /** SIGTERM (Redis flushes the AOF and exits), wait for the exit; SIGKILL after 5 s. No-op when stopped. */
  stop(): Promise<void>;
  /** stop(), then start again on the same port and data dir and wait until it answers PING. */
  restart(): Promise<void>;
  /** SIGKILL, as in a crash, and wait for the exit. */
  kill(): Promise<void>;
  /** stop() and remove the data dir. Idempotent; call it from afterAll. */
  cleanup(): Promise<void>;
}

const START_TIMEOUT_MS = 20_000;
const PORT_ATTEMPTS = 3;

/**
 * Starts `redis-server` bound to 127.0.0.1 on a free port, with its own temp data dir, and resolves once it
 * answers PING. The process is SIGKILLed when the test process exits even if `cleanup()` is never called.
 *
 * Throws an Error naming the Debian package (`apt-get install -y redis-server`) when the binary is missing.
 */
export async function startRedis(opts: StartRedisOptions = {}): Promise<RedisServer> {
  const binary = findExecutable('redis-server');
  if (binary === undefined) {
    throw new Error(
      'redis-server was not found on PATH. Install it with `apt-get install -y redis-server` ' +
        '(or run `node scripts/system-packages.mjs` as root to install everything the tests need).',
    );
  }
  const dataDir = makeTempDir('regsync-redis-');
  const server = new LocalRedis(binary, dataDir, opts.appendonly ?? false);
  try {
    for (let attempt = 1; ; attempt += 1) {
      try {
        await server.startOn(await freePort());
        return server;
      } catch (error) {
        // Another process may grab the port between freePort() and the bind; pick another one.
        const portTaken =
          error instanceof ServerStartError && error.exited && /Address already in use/i.test(error.log);
        if (!portTaken || attempt >= PORT_ATTEMPTS) throw error;
      }
    }
  } catch (error) {
    await server.cleanup();
    throw error;
  }
}

class LocalRedis extends ManagedServer implements RedisServer {
  readonly logFile: string;

  constructor(
    private readonly binary: string,
    readonly dataDir: string,
    private readonly appendonly: boolean,
  ) {
    super(dataDir);
    this.logFile = join(dataDir, 'redis.log');
  }

  get url(): string {
    return `redis://127.0.0.1:${this.portNumber}`;
  }

  async startOn(port: number): Promise<void> {
    this.checkNotRemoved('redis-server', port);
    this.portNumber = port;
    const args = [
      '--port', String(port),
      '--bind', '127.0.0.1',
      '--protected-mode', 'yes',
      '--dir', this.dataDir,
      '--save', '',
      '--appendonly', this.appendonly ? 'yes' : 'no',
      '--daemonize', 'no',
      '--logfile', '',
      '--loglevel', 'notice',
    ];
    const proc = new ManagedProcess(this.binary, args, { logFile: this.logFile, cwd: this.dataDir });
    this.proc = proc;
    await waitForReady(proc, () => ping(port), {
      what: `redis-server on 127.0.0.1:${port} to answer PING`,
      timeoutMs: START_TIMEOUT_MS,
      logFiles: [this.logFile],
    });
  }

}

/** One raw RESP PING; true on +PONG (false while Redis is still loading its data). */
function ping(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let reply = '';
    socket.setTimeout(1_000, () => socket.destroy(new Error('PING timed out')));
    socket.once('error', reject);
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString('utf8');
      if (reply.includes('\r\n')) {
        socket.destroy();
        resolve(reply.startsWith('+PONG'));
      }
    });
    socket.once('connect', () => socket.write('PING\r\n'));
    socket.once('close', () => resolve(false));
  });
}
