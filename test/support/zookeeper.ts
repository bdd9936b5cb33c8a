import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
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

/** Options of {@link startZooKeeper}. */
export interface StartZooKeeperOptions {
  /**
   * ZooKeeper's tick in milliseconds (default 500). Sessions may last between 2 and 20 ticks, so the
   * default allows session timeouts from 1 s to 10 s; a client asking for more gets 20 ticks.
   */
  tickTime?: number;
}

/**
 * A real standalone ZooKeeper (Debian's 3.8) started for one test file.
 *
 * Deliberately left out: quorums, SASL/TLS, the admin server, JMX remote access.
 */
export interface ZooKeeperServer {
  /** Client port on 127.0.0.1. */
  readonly port: number;
  /** `127.0.0.1:<port>`, as node-zookeeper-client's createClient() wants it. */
  readonly connectString: string;
  /** The server's tickTime in milliseconds. */
  readonly tickTime: number;
  /** Temporary directory (under os.tmpdir()) with zoo.cfg, log4j.properties, the logs and `data/`. */
  readonly dir: string;
  /** ZooKeeper's dataDir (snapshots and transaction log); kept across restart(). */
  readonly dataDir: string;
  /** ZooKeeper's own log (log4j, INFO). JVM stdout/stderr go to `stdout.log` next to it. */
  readonly logFile: string;
  /** Whether the JVM is currently alive. */
  readonly running: boolean;
  /** SIGTERM, wait for the JVM to exit; SIGKILL after 5 s. No-op when stopped. */
  stop(): Promise<void>;
  /** stop(), then start again on the same port and dataDir and wait until it serves. */
  restart(): Promise<void>;
  /** SIGKILL, as in a crash, and wait for the exit. */
  kill(): Promise<void>;
  /** stop() and remove the temp dir. Idempotent; call it from afterAll. */
  cleanup(): Promise<void>;
}

const ZOOKEEPER_JAR = '/usr/share/java/zookeeper.jar';
// zookeeper.jar's manifest Class-Path pulls in jute, netty, jetty, jackson, metrics, slf4j-api and the rest.
// Only a logging backend is missing; Debian's libzookeeper-java depends on these two for it.
const LOGGING_JARS = ['/usr/share/java/slf4j-log4j12.jar', '/usr/share/java/log4j-1.2.jar'];
const MAIN_CLASS = 'org.apache.zookeeper.server.quorum.QuorumPeerMain';
const FOUR_LETTER_WORDS = 'srvr,ruok,stat,mntr,cons,conf';
const START_TIMEOUT_MS = 60_000;
const PORT_ATTEMPTS = 3;

/**
 * Starts a standalone ZooKeeper bound to 127.0.0.1 on a free port with its own dataDir and resolves once
 * it serves requests (the `srvr` four-letter word reports `Mode: standalone`). The JVM is SIGKILLed when
 * the test process exits even if `cleanup()` is never called.
 *
 * Throws an Error naming the Debian package (`apt-get install -y zookeeper`) when ZooKeeper or java is missing.
 */
export async function startZooKeeper(opts: StartZooKeeperOptions = {}): Promise<ZooKeeperServer> {
  const java = findExecutable('java');
  if (!existsSync(ZOOKEEPER_JAR)) {
    throw new Error(
      `ZooKeeper was not found (${ZOOKEEPER_JAR} is missing). Install it with \`apt-get install -y zookeeper\` ` +
        '(or run `node scripts/system-packages.mjs` as root to install everything the tests need).',
    );
  }
  if (java === undefined) {
    throw new Error(
      'java was not found on PATH; ZooKeeper needs it. Install it with `apt-get install -y default-jre-headless` ' +
        '(or run `node scripts/system-packages.mjs` as root to install everything the tests need).',
    );
  }
  const tickTime = opts.tickTime ?? 500;
  const dir = makeTempDir('regsync-zookeeper-');
  const server = new LocalZooKeeper(java, dir, tickTime);
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

/**
 * Sends a four-letter word (`srvr`, `ruok`, `stat`, `mntr`, `cons`, `conf` are whitelisted) to the
 * ZooKeeper on 127.0.0.1:`port` and resolves with the whole reply.
 */
export function zkFourLetterWord(port: number, word: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    socket.setTimeout(2_000, () => socket.destroy(new Error(`four-letter word ${word} timed out`)));
    socket.once('error', reject);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.once('connect', () => socket.write(word));
    socket.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.once('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

class LocalZooKeeper extends ManagedServer implements ZooKeeperServer {
  readonly dataDir: string;
  readonly logFile: string;
  private readonly stdoutFile: string;
  private readonly configFile: string;
  private readonly log4jFile: string;

  constructor(
    private readonly java: string,
    readonly dir: string,
    readonly tickTime: number,
  ) {
    super(dir);
    this.dataDir = join(dir, 'data');
    this.logFile = join(dir, 'zookeeper.log');
    this.stdoutFile = join(dir, 'stdout.log');
    this.configFile = join(dir, 'zoo.cfg');
    this.log4jFile = join(dir, 'log4j.properties');
    mkdirSync(this.dataDir, { recursive: true });
    writeFileSync(
      this.log4jFile,
      [
        'log4j.rootLogger=INFO, FILE',
        'log4j.appender.FILE=org.apache.log4j.FileAppender',
        `log4j.appender.FILE.File=${this.logFile}`,
        'log4j.appender.FILE.Append=true',
        'log4j.appender.FILE.layout=org.apache.log4j.PatternLayout',
        'log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n',
        '',
      ].join('\n'),
    );
  }

  get connectString(): string {
    return `127.0.0.1:${this.portNumber}`;
  }

  async startOn(port: number): Promise<void> {
    this.checkNotRemoved('ZooKeeper', port);
    this.portNumber = port;
    writeFileSync(
      this.configFile,
      [
        `tickTime=${this.tickTime}`,
        'initLimit=10',
        'syncLimit=5',
        `dataDir=${this.dataDir}`,
        `clientPort=${port}`,
        'clientPortAddress=127.0.0.1',
        // Every test client comes from 127.0.0.1; the default cap of 60 connections per IP is too low.
        'maxClientCnxns=0',
        'admin.enableServer=false',
        `4lw.commands.whitelist=${FOUR_LETTER_WORDS}`,
        // Writes still reach the OS before a request is answered, so a SIGKILL loses nothing; only fsync is skipped.
        'forceSync=no',
        '',
      ].join('\n'),
    );
    const classpath = [this.dir, ZOOKEEPER_JAR, ...LOGGING_JARS.filter((jar) => existsSync(jar))].join(':');
    const args = [
      '-Xms16m',
      '-Xmx256m',
      '-XX:+UseSerialGC',
      '-XX:TieredStopAtLevel=1',
      '-XX:-UsePerfData',
      '-Djava.awt.headless=true',
      '-Djava.net.preferIPv4Stack=true',
      `-Dlog4j.configuration=file:${this.log4jFile}`,
      `-Dzookeeper.log.dir=${this.dir}`,
      '-Dzookeeper.jmx.log4j.disable=true',
      '-cp',
      classpath,
      MAIN_CLASS,
      this.configFile,
    ];
    const proc = new ManagedProcess(this.java, args, { logFile: this.stdoutFile, cwd: this.dir });
    this.proc = proc;
    await waitForReady(proc, async () => (await zkFourLetterWord(port, 'srvr')).includes('Mode: standalone'), {
      what: `ZooKeeper on 127.0.0.1:${port} to serve requests`,
      timeoutMs: START_TIMEOUT_MS,
      logFiles: [this.stdoutFile, this.logFile],
    });
  }

}
