import { createServer, connect, type Server, type Socket } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from '../../test/support/wait-until.js';
import { startZooKeeper, type ZooKeeperServer } from '../../test/support/zookeeper.js';
import { ZooKeeperConnection, defaultClientFactory, type ConnectedInfo } from './zookeeper-connection.js';
import { ZooKeeperRequestError } from './zookeeper-request-error.js';

const silent = pino({ level: 'silent' });

/**
 * A TCP proxy in front of ZooKeeper with two faults on demand: cut the server's next answer in the
 * middle of a packet (a server killed while writing), and swallow the next connection (accept it,
 * never answer, never close: what ZooKeeper 3.8 does to a connection that arrives while it starts).
 */
class FaultyProxy {
  private readonly pairs = new Set<[Socket, Socket]>();
  private readonly swallowed = new Set<Socket>();
  private cutNext = false;
  private swallowNext = false;
  server!: Server;

  constructor(private readonly target: number) {}

  async listen(): Promise<number> {
    this.server = createServer((client) => {
      if (this.swallowNext) {
        this.swallowNext = false;
        this.swallowed.add(client);
        client.on('data', () => {});
        client.on('error', () => {});
        return;
      }
      const upstream = connect({ host: '127.0.0.1', port: this.target });
      const pair: [Socket, Socket] = [client, upstream];
      this.pairs.add(pair);
      const drop = () => {
        client.destroy();
        upstream.destroy();
        this.pairs.delete(pair);
      };
      client.on('data', (chunk: Buffer) => upstream.write(chunk));
      upstream.on('data', (chunk: Buffer) => {
        if (this.cutNext && chunk.length > 8) {
          this.cutNext = false;
          // The length prefix and a little more, then the connection dies.
          client.write(chunk.subarray(0, 8), () => drop());
          return;
        }
        client.write(chunk);
      });
      client.on('error', drop);
      upstream.on('error', drop);
      client.on('close', drop);
      upstream.on('close', drop);
    });
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return (this.server.address() as { port: number }).port;
  }

  cutNextAnswer(): void {
    this.cutNext = true;
  }

  /** Drops every open connection, and leaves the next one hanging. */
  dropAllAndSwallowNext(): void {
    this.swallowNext = true;
    for (const [a, b] of this.pairs) {
      a.destroy();
      b.destroy();
    }
    this.pairs.clear();
  }

  async close(): Promise<void> {
    for (const s of this.swallowed) s.destroy();
    for (const [a, b] of this.pairs) {
      a.destroy();
      b.destroy();
    }
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

describe('ZooKeeperConnection', () => {
  let zk: ZooKeeperServer;
  const proxies: FaultyProxy[] = [];
  const connections: ZooKeeperConnection[] = [];
  /** A proxy of its own for one test, so that its faults hit that test's connection only. */
  const proxy = async (): Promise<{ proxy: FaultyProxy; port: number }> => {
    const p = new FaultyProxy(zk.port);
    proxies.push(p);
    return { proxy: p, port: await p.listen() };
  };
  const open = (port: number, onConnected: (info: ConnectedInfo) => void = () => {}, overrides: { connectTimeoutMs?: number; sessionTimeoutMs?: number } = {}) => {
    const conn = new ZooKeeperConnection({
      clusterId: 'zk-conn',
      connectionString: `127.0.0.1:${port}`,
      sessionTimeoutMs: overrides.sessionTimeoutMs ?? 6_000,
      connectTimeoutMs: overrides.connectTimeoutMs ?? 5_000,
      operationTimeoutMs: 5_000,
      spinDelayMs: 100,
      digest: undefined,
      clientFactory: defaultClientFactory,
      log: silent,
      onConnected,
    });
    connections.push(conn);
    return conn;
  };

  beforeAll(async () => {
    zk = await startZooKeeper();
  });
  afterAll(async () => {
    await Promise.all(connections.map((c) => c.close()));
    await Promise.all(proxies.map((p) => p.close()));
    await zk?.cleanup();
  });

  it('reconnects on the same session after the connection died in the middle of an answer', async () => {
    const { proxy: cutter, port } = await proxy();
    const events: ConnectedInfo[] = [];
    const conn = open(port, (info) => events.push(info));
    await conn.mkdirp('/cut/dir');
    for (let i = 0; i < 40; i += 1) await conn.create(`/cut/dir/child-with-a-long-name-${i}`, Buffer.alloc(0), 'persistent');
    await waitUntil(() => events.length === 1, { message: 'first connection' });

    cutter.cutNextAnswer();
    await expect(conn.getChildren('/cut/dir')).rejects.toBeInstanceOf(ZooKeeperRequestError);
    // The client library kept the cut packet's first bytes; without clearing them the next
    // handshake is misread and the client waits forever.
    await waitUntil(() => events.length === 2, { timeoutMs: 20_000, message: 'reconnected after the cut' });
    expect(events[1]).toEqual({ newSession: false, sessionId: events[0]?.sessionId });
    expect(await conn.getChildren('/cut/dir')).toHaveLength(40);
  });

  it('gives up on a connection attempt that gets no handshake answer, and connects on the next one', async () => {
    const { proxy: swallower, port } = await proxy();
    const events: ConnectedInfo[] = [];
    const conn = open(port, (info) => events.push(info), { sessionTimeoutMs: 3_000 });
    await conn.exists('/');
    expect(events).toHaveLength(1);
    swallower.dropAllAndSwallowNext();
    // The library alone would wait on the swallowed connection forever.
    await waitUntil(() => events.length === 2, { timeoutMs: 30_000, message: 'connected again after the swallowed attempt' });
    expect(await conn.exists('/')).toBeDefined();
  });

  it('fails a call with zookeeper-unavailable when no server answers, instead of waiting forever', async () => {
    const dead = createServer((s) => s.destroy());
    await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve));
    const port = (dead.address() as { port: number }).port;
    try {
      const conn = open(port, () => {}, { connectTimeoutMs: 500 });
      const failure = await conn.getChildren('/').then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(failure).toBeInstanceOf(ZooKeeperRequestError);
      expect((failure as ZooKeeperRequestError).code).toBe('zookeeper-unavailable');
      await conn.close();
      await expect(conn.getChildren('/')).rejects.toMatchObject({ code: 'zookeeper-closed' });
    } finally {
      await new Promise<void>((resolve) => dead.close(() => resolve()));
    }
  });

  it('answers NO_NODE as "absent" and NODE_EXISTS / a missing parent as outcomes, not errors', async () => {
    const conn = open(zk.port);
    expect(await conn.getChildren('/nowhere')).toBeUndefined();
    expect(await conn.getData('/nowhere')).toBeUndefined();
    expect(await conn.exists('/nowhere')).toBeUndefined();
    expect(await conn.create('/nowhere/child', Buffer.alloc(0), 'ephemeral')).toBe('no-parent');
    expect(await conn.create('/here', Buffer.from('x'), 'ephemeral')).toBe('created');
    expect(await conn.create('/here', Buffer.from('y'), 'ephemeral')).toBe('exists');
    const here = await conn.getData('/here');
    expect(here?.data.toString()).toBe('x');
    expect(here && conn.ownsEphemeral(here.stat)).toBe(true);
    expect(await conn.remove('/here')).toBe(true);
    expect(await conn.remove('/here')).toBe(false);
    expect(await conn.setData('/here', Buffer.alloc(0))).toBe(false);
  });
});
