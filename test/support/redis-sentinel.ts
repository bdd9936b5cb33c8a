import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';
import { makeCertificates, type TestCertificates } from './redis-tls.js';
import { findExecutable, makeTempDir, ManagedProcess, removeTempDir, waitForReady } from './server-process.js';
import { waitUntil } from './wait-until.js';

/** Options of {@link startRedisSentinel}. */
export interface StartRedisSentinelOptions {
  /** Master name the sentinels watch; default `regsync`. */
  masterName?: string;
  /** How long the sentinels wait before they call the primary down, ms; default 1000. */
  downAfterMs?: number;
  /** Everything over TLS only (data nodes, replication, sentinels), with certificates made in the set's dir. */
  tls?: boolean;
}

/** One redis-server (data node) of the set. */
export interface SentinelDataNode {
  readonly port: number;
  readonly running: boolean;
  /** SIGKILL, as a crash, and wait for the exit. */
  kill(): Promise<void>;
}

/**
 * A primary, a replica and three sentinels (Debian's `redis-sentinel`, quorum 2) on 127.0.0.1 with
 * free ports and configs in one temp dir, for one test file.
 *
 * Deliberately left out: passwords; restarting a killed node (the test of a failover needs
 * only the kill).
 */
export interface RedisSentinelSet {
  /** `redis+sentinel://127.0.0.1:<s1>,127.0.0.1:<s2>,127.0.0.1:<s3>/<master>` (`rediss+sentinel://` with TLS). */
  readonly url: string;
  /** The certificates, with `tls`. */
  readonly certs: TestCertificates | undefined;
  readonly masterName: string;
  readonly sentinelPorts: readonly number[];
  /** The two data nodes, the first one the primary at start. */
  readonly nodes: readonly SentinelDataNode[];
  readonly dir: string;
  /** The port of the primary as the sentinels tell it now. */
  primaryPort(): Promise<number>;
  /**
   * kill -9 of the current primary; resolves once a quorum of sentinels names the other node the
   * primary and it answers as one (role master). Answers the new primary's port.
   */
  killPrimaryAndWaitForFailover(timeoutMs?: number): Promise<number>;
  /** Stops every process and removes the dir. Idempotent. */
  cleanup(): Promise<void>;
}

/**
 * Starts the set and resolves once both sentinels see the replica in sync and all three know each
 * other (so that a failover can be voted). Throws naming the Debian package when `redis-sentinel`
 * or `redis-server` is missing.
 */
export async function startRedisSentinel(opts: StartRedisSentinelOptions = {}): Promise<RedisSentinelSet> {
  const server = findExecutable('redis-server');
  const sentinel = findExecutable('redis-sentinel');
  if (!server || !sentinel) {
    throw new Error('redis-server and redis-sentinel are needed: apt-get install -y redis-server redis-sentinel (or run node scripts/system-packages.mjs as root)');
  }
  const dir = makeTempDir('regsync-sentinel-');
  const set = new SentinelSet(server, sentinel, dir, opts.masterName ?? 'regsync', opts.downAfterMs ?? 1_000, opts.tls ? makeCertificates(dir) : undefined);
  try {
    await set.start();
    return set;
  } catch (err) {
    await set.cleanup();
    throw err;
  }
}

class DataNode implements SentinelDataNode {
  constructor(
    readonly port: number,
    readonly proc: ManagedProcess,
  ) {}
  get running(): boolean {
    return this.proc.running;
  }
  async kill(): Promise<void> {
    await this.proc.kill();
  }
}

class SentinelSet implements RedisSentinelSet {
  readonly nodes: DataNode[] = [];
  readonly sentinelPorts: number[] = [];
  private readonly sentinels: ManagedProcess[] = [];
  private removed = false;

  constructor(
    private readonly serverBinary: string,
    private readonly sentinelBinary: string,
    readonly dir: string,
    readonly masterName: string,
    private readonly downAfterMs: number,
    readonly certs: TestCertificates | undefined,
  ) {}

  get url(): string {
    return `${this.certs ? 'rediss' : 'redis'}+sentinel://${this.sentinelPorts.map((p) => `127.0.0.1:${p}`).join(',')}/${this.masterName}`;
  }

  async start(): Promise<void> {
    const primary = await this.startDataNode('primary', undefined);
    await this.startDataNode('replica', primary.port);
    for (let i = 1; i <= 3; i += 1) await this.startSentinel(i, primary.port);
    await waitUntil(
      async () => {
        const answers = await Promise.all(this.sentinelPorts.map((port) => this.ask(port, async (r) => {
          const master = (await r.call('SENTINEL', 'MASTER', this.masterName)) as string[];
          const info = fields(master);
          return Number(info['num-slaves']) >= 1 && Number(info['num-other-sentinels']) >= 2;
        })));
        return answers.every(Boolean);
      },
      { timeoutMs: 30_000, message: 'the sentinels to see the replica and each other' },
    );
  }

  async primaryPort(): Promise<number> {
    for (const port of this.sentinelPorts) {
      const answer = await this.ask(port, (r) => r.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.masterName) as Promise<string[] | null>).catch(() => null);
      if (answer) return Number(answer[1]);
    }
    throw new Error('no sentinel names a primary');
  }

  async killPrimaryAndWaitForFailover(timeoutMs = 30_000): Promise<number> {
    const old = await this.primaryPort();
    const node = this.nodes.find((n) => n.port === old);
    if (!node) throw new Error(`the primary ${old} is not one of this set's nodes`);
    await node.kill();
    return waitUntil(
      async () => {
        const named = await Promise.all(this.sentinelPorts.map((port) => this.ask(port, (r) => r.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', this.masterName) as Promise<string[] | null>).catch(() => null)));
        const ports = named.filter((a): a is string[] => Array.isArray(a)).map((a) => Number(a[1])).filter((p) => p !== old);
        const port = ports[0];
        if (port === undefined || ports.length < 2) return false;
        const role = await this.ask(port, (r) => r.call('ROLE') as Promise<unknown[]>).catch(() => undefined);
        return role?.[0] === 'master' ? port : false;
      },
      { timeoutMs, intervalMs: 100, message: 'the sentinels to promote the replica' },
    );
  }

  async cleanup(): Promise<void> {
    await Promise.all([...this.sentinels, ...this.nodes.map((n) => n.proc)].map((p) => p.stop(2_000)));
    if (!this.removed) {
      this.removed = true;
      removeTempDir(this.dir);
    }
  }

  private async startDataNode(name: string, primaryPort: number | undefined): Promise<DataNode> {
    const port = await freePort();
    const dir = join(this.dir, name);
    const logFile = join(this.dir, `${name}.log`);
    mkdirSync(dir, { recursive: true });
    const args = [...this.listen(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--logfile', ''];
    if (primaryPort !== undefined) args.push('--replicaof', '127.0.0.1', String(primaryPort));
    const proc = new ManagedProcess(this.serverBinary, args, { logFile, cwd: dir });
    await waitForReady(proc, () => this.ask(port, async (r) => (await r.ping()) === 'PONG').catch(() => false), {
      what: `redis-server ${name} on 127.0.0.1:${port}`,
      timeoutMs: 20_000,
      logFiles: [logFile],
    });
    const node = new DataNode(port, proc);
    this.nodes.push(node);
    return node;
  }

  private async startSentinel(i: number, primaryPort: number): Promise<void> {
    const port = await freePort();
    const config = join(this.dir, `sentinel-${i}.conf`);
    const logFile = join(this.dir, `sentinel-${i}.log`);
    // Sentinels rewrite their config file (known replicas and sentinels, epochs): each has its own.
    writeFileSync(
      config,
      [
        ...this.listen(port).reduce<string[]>((lines, arg, i, all) => (i % 2 === 0 ? [...lines, `${arg.slice(2)} ${all[i + 1]}`] : lines), []),
        'bind 127.0.0.1',
        'daemonize no',
        `dir ${this.dir}`,
        `sentinel monitor ${this.masterName} 127.0.0.1 ${primaryPort} 2`,
        `sentinel down-after-milliseconds ${this.masterName} ${this.downAfterMs}`,
        `sentinel failover-timeout ${this.masterName} 10000`,
        `sentinel parallel-syncs ${this.masterName} 1`,
        '',
      ].join('\n'),
    );
    const proc = new ManagedProcess(this.sentinelBinary, [config], { logFile, cwd: this.dir });
    this.sentinels.push(proc);
    await waitForReady(proc, () => this.ask(port, async (r) => (await r.ping()) === 'PONG').catch(() => false), {
      what: `redis-sentinel ${i} on 127.0.0.1:${port}`,
      timeoutMs: 20_000,
      logFiles: [logFile],
    });
    this.sentinelPorts.push(port);
  }

  /** The listening arguments of a data node or sentinel: a plain port, or a TLS port only. */
  private listen(port: number): string[] {
    if (!this.certs) return ['--port', String(port)];
    const c = this.certs;
    return ['--port', '0', '--tls-port', String(port), '--tls-cert-file', c.serverCert, '--tls-key-file', c.serverKey, '--tls-ca-cert-file', c.ca, '--tls-auth-clients', 'no', '--tls-replication', 'yes'];
  }

  /** One short-lived connection that fails at once instead of retrying. */
  private async ask<T>(port: number, fn: (redis: Redis) => Promise<T>): Promise<T> {
    const tls = this.certs ? { tls: { ca: readFileSync(this.certs.ca) } } : {};
    const redis = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null, connectTimeout: 1_000, enableReadyCheck: false, ...tls });
    redis.on('error', () => undefined);
    try {
      await redis.connect();
      return await fn(redis);
    } finally {
      redis.disconnect();
    }
  }
}

function fields(flat: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) out[flat[i] as string] = flat[i + 1] as string;
  return out;
}
