import { createHash } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { ACL, createClient, CreateMode, Exception, Id, Permission, State, type Client, type Stat } from 'node-zookeeper-client';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterSpec, Instance, ServiceKey } from '../../src/model/index.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { startZooKeeper, type ZooKeeperServer } from '../../test/support/zookeeper.js';
import { encodeNodeName } from './dubbo-url.js';
import { createZooKeeperAdapter, type ZooKeeperAdapter } from './zookeeper-adapter.js';
import { ZooKeeperConnection, defaultClientFactory, type ConnectedInfo, type ZooKeeperClientFactory } from './zookeeper-connection.js';
import { ZooKeeperRequestError } from './zookeeper-request-error.js';

const silent = pino({ level: 'silent' });

function zk<T>(call: (cb: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value))));
}

async function connected(client: Client): Promise<Client> {
  client.connect();
  await waitUntil(() => client.getState() === State.SYNC_CONNECTED, { timeoutMs: 30_000, message: 'test client connected' });
  return client;
}

const children = async (client: Client, path: string): Promise<string[]> =>
  (await zk<Stat | null>((cb) => client.exists(path, cb))) ? (await zk<string[]>((cb) => client.getChildren(path, cb))).sort() : [];
const owners = async (client: Client, dir: string): Promise<string[]> =>
  Promise.all((await children(client, dir)).map(async (name) => (await zk<Stat>((cb) => client.exists(`${dir}/${name}`, cb))).ephemeralOwner.toString('hex')));

/**
 * A TCP proxy in front of ZooKeeper with faults on demand: cut the server's next answer in the
 * middle of a packet (a server killed while writing); swallow the next connection (accept it, never
 * answer, never close: what ZooKeeper 3.8 does to a connection that arrives while it starts); block
 * (drop every connection and refuse new ones: a partition).
 */
class FaultyProxy {
  private readonly pairs = new Set<[Socket, Socket]>();
  private readonly swallowed = new Set<Socket>();
  private cutNext = false;
  private swallowNext = false;
  private blocked = false;
  private server: Server | undefined;

  constructor(private readonly target: number) {}

  async listen(): Promise<number> {
    const server = createServer((client) => {
      if (this.blocked) {
        client.destroy();
        return;
      }
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
      for (const s of pair) {
        s.on('error', drop);
        s.on('close', drop);
      }
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as { port: number }).port;
  }

  cutNextAnswer(): void {
    this.cutNext = true;
  }

  /** Drops every open connection, and leaves the next one hanging. */
  dropAllAndSwallowNext(): void {
    this.swallowNext = true;
    this.dropAll();
  }

  block(): void {
    this.blocked = true;
    this.dropAll();
  }

  unblock(): void {
    this.blocked = false;
  }

  async close(): Promise<void> {
    for (const s of this.swallowed) s.destroy();
    this.dropAll();
    const server = this.server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private dropAll(): void {
    for (const [a, b] of this.pairs) {
      a.destroy();
      b.destroy();
    }
    this.pairs.clear();
  }
}

/**
 * Closes a session from outside: a raw connection re-attaches to it and closes it in the same write
 * (ConnectRequest, then CloseSession). Resolves when the server hangs up.
 */
function closeSession(port: number, sessionId: Buffer, password: Buffer): Promise<void> {
  const connectRequest = Buffer.alloc(4 + 4 + 8 + 4 + 8 + 4 + 16 + 1);
  let offset = connectRequest.writeInt32BE(connectRequest.length - 4, 0);
  offset = connectRequest.writeInt32BE(0, offset); // protocol version
  offset = connectRequest.writeBigInt64BE(0n, offset); // last zxid seen
  offset = connectRequest.writeInt32BE(4_000, offset); // session timeout
  offset += sessionId.copy(connectRequest, offset);
  offset = connectRequest.writeInt32BE(16, offset);
  offset += password.copy(connectRequest, offset);
  connectRequest.writeUInt8(0, offset); // not read-only
  const closeRequest = Buffer.alloc(12);
  closeRequest.writeInt32BE(8, 0);
  closeRequest.writeInt32BE(1, 4); // xid
  closeRequest.writeInt32BE(-11, 8); // OpCode.closeSession
  return new Promise<void>((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => socket.write(Buffer.concat([connectRequest, closeRequest])));
    socket.on('data', () => {});
    socket.once('error', reject);
    socket.once('close', () => resolve());
  });
}

/**
 * Expires the session of a client that reaches ZooKeeper through `proxy`, as a partition longer
 * than the session timeout does: the client is cut off, the session closed from outside (the
 * server deletes its ephemeral nodes), and the client let back in, to be told "expired". With the
 * client cut off, nothing races the close.
 */
async function expireSessionBehind(proxy: FaultyProxy, server: ZooKeeperServer, victim: Client): Promise<void> {
  const sessionId = victim.getSessionId();
  const password = victim.getSessionPassword();
  proxy.block();
  try {
    await closeSession(server.port, sessionId, password);
  } finally {
    proxy.unblock();
  }
}

describe('ZooKeeperConnection', () => {
  let server: ZooKeeperServer;
  const proxies: FaultyProxy[] = [];
  const connections: ZooKeeperConnection[] = [];
  /** A proxy of its own for one test, so that its faults hit that test's connection only. */
  const proxy = async (): Promise<{ proxy: FaultyProxy; port: number }> => {
    const p = new FaultyProxy(server.port);
    proxies.push(p);
    return { proxy: p, port: await p.listen() };
  };
  const open = (
    port: number,
    onConnected: (info: ConnectedInfo) => void = () => {},
    overrides: { connectTimeoutMs?: number; sessionTimeoutMs?: number; clientFactory?: ZooKeeperClientFactory } = {},
  ) => {
    const conn = new ZooKeeperConnection({
      clusterId: 'zk-conn',
      connectionString: `127.0.0.1:${port}`,
      sessionTimeoutMs: overrides.sessionTimeoutMs ?? 6_000,
      connectTimeoutMs: overrides.connectTimeoutMs ?? 5_000,
      operationTimeoutMs: 5_000,
      spinDelayMs: 100,
      digest: undefined,
      clientFactory: overrides.clientFactory ?? defaultClientFactory,
      log: silent,
      onConnected,
    });
    connections.push(conn);
    return conn;
  };

  beforeAll(async () => {
    server = await startZooKeeper();
  });
  afterAll(async () => {
    await Promise.all(connections.map((c) => c.close()));
    await Promise.all(proxies.map((p) => p.close()));
    await server?.cleanup();
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
    // The client library kept the cut packet's first bytes; without dropping them the next
    // handshake is misread and the client never connects again.
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

  it('opens a new session when the server answers "session expired" on a connection it kept open', async () => {
    // A stand-in for a client whose session the server closed without closing its connection
    // (ZooKeeper does that when the session is closed while the client re-attaches): pings go on,
    // requests are refused.
    const made: string[] = [];
    const factory: ZooKeeperClientFactory = () => {
      const id = `00000000000000${String(made.length + 1).padStart(2, '0')}`;
      made.push(id);
      const fake = new EventEmitter() as EventEmitter & Record<string, unknown>;
      const expired = made.length === 1;
      Object.assign(fake, {
        connect: () => setImmediate(() => fake.emit('state', State.SYNC_CONNECTED)),
        close: () => {},
        getSessionId: () => Buffer.from(id, 'hex'),
        getSessionTimeout: () => 6_000,
        getChildren: (_path: string, cb: (error: unknown, children?: string[]) => void) =>
          setImmediate(() => (expired ? cb(Object.assign(new Error('SESSION_EXPIRED'), { code: Exception.SESSION_EXPIRED, name: 'SESSION_EXPIRED' })) : cb(null, ['a']))),
      });
      return fake as unknown as Client;
    };
    const events: ConnectedInfo[] = [];
    const conn = open(1, (info) => events.push(info), { clientFactory: factory });
    await expect(conn.getChildren('/')).rejects.toMatchObject({ code: 'zookeeper-unavailable', zkCode: 'SESSION_EXPIRED' });
    await waitUntil(() => events.length === 2, { message: 'a new session' });
    expect(events.map((e) => e.newSession)).toEqual([true, true]);
    expect(await conn.getChildren('/')).toEqual(['a']);
    expect(conn.stats()).toEqual({ sessions: 2, expiries: 1 });
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
    const conn = open(server.port);
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

const key = (name: string): ServiceKey => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });

const copy = (iface: string, ip: string): Instance => ({
  ip,
  port: 20880,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: { protocol: 'dubbo', interface: iface, 'regsync.origin': 'a', 'regsync.path': 'a', 'regsync.task': 't1' },
});

describe('ZooKeeperAdapter recovery', () => {
  let server: ZooKeeperServer;
  let proxy: FaultyProxy;
  let client: Client;
  let adapter: ZooKeeperAdapter;
  const made: Client[] = [];
  const factory: ZooKeeperClientFactory = (connectionString, options) => {
    const c = createClient(connectionString, options);
    made.push(c);
    return c;
  };
  const dirA = '/dubbo/com.acme.A/providers';
  const dirB = '/dubbo/com.acme.B/providers';
  let watchCalls = 0;

  beforeAll(async () => {
    server = await startZooKeeper();
    proxy = new FaultyProxy(server.port);
    const proxyPort = await proxy.listen();
    client = await connected(createClient(server.connectString, { sessionTimeout: 4_000, spinDelay: 100, retries: 0 }));
    // The adapter reaches ZooKeeper through the proxy, so that a test can cut it off.
    const spec: ClusterSpec = {
      id: 'zk-recovery',
      kind: 'zookeeper',
      endpoints: [`127.0.0.1:${proxyPort}`],
      labels: {},
      options: { sessionTimeoutMs: 4_000, connectTimeoutMs: 3_000, spinDelayMs: 200 },
    };
    adapter = createZooKeeperAdapter(spec, { logger: silent, clientFactory: factory });
    await adapter.apply(key('com.acme.A'), { upsert: [copy('com.acme.A', '10.3.0.1'), copy('com.acme.A', '10.3.0.2')], remove: [] });
    await adapter.apply(key('com.acme.B'), { upsert: [copy('com.acme.B', '10.3.0.3')], remove: [] });
    adapter.watch(key('com.acme.A'), () => (watchCalls += 1));
  });
  afterAll(async () => {
    await adapter?.close();
    client?.close();
    await proxy?.close();
    await server?.cleanup();
  });

  it('re-creates every copy exactly once in a new session after its session expired, and watches again', async () => {
    const before = adapter.stats().sessionId as string;
    expect(await owners(client, dirA)).toEqual([before, before]);
    await expireSessionBehind(proxy, server, made.at(-1) as Client);

    await waitUntil(() => adapter.stats().sessions === 2 && adapter.stats().connected, { timeoutMs: 30_000, message: 'a new session' });
    const after = adapter.stats().sessionId as string;
    expect(after).not.toBe(before);
    await waitUntil(async () => (await owners(client, dirA)).join() === [after, after].join() && (await owners(client, dirB)).join() === after, {
      timeoutMs: 30_000,
      message: 'copies re-created in the new session',
    });
    await waitUntil(() => adapter.stats().recreatedNodes === 3, { message: 'three nodes counted as re-created' });
    expect(adapter.stats()).toMatchObject({ expiries: 1, ownedNodes: 3, recreatedNodes: 3 });
    expect((await adapter.listInstances(key('com.acme.A'))).map((i) => i.ip)).toEqual(['10.3.0.1', '10.3.0.2']);

    const calls = watchCalls;
    await zk<string>((cb) =>
      client.create(`${dirA}/${encodeNodeName('dubbo://10.3.9.1:20880/com.acme.A?interface=com.acme.A')}`, Buffer.alloc(0), CreateMode.PERSISTENT, cb),
    );
    await waitUntil(() => watchCalls > calls, { message: 'watch fires in the new session' });
    expect(await children(client, dirA)).toHaveLength(3);
  });

  it('keeps its copies, once each, and its watches through a server restart', async () => {
    await server.restart();
    // The test's own client may have lost its session in the restart; take a new one.
    client.close();
    client = await connected(createClient(server.connectString, { sessionTimeout: 4_000, spinDelay: 100, retries: 0 }));
    await waitUntil(async () => (await adapter.listInstances(key('com.acme.B'))).length === 1, { timeoutMs: 30_000, message: 'reads after restart' });
    const mine = async () => (await adapter.listInstances(key('com.acme.A'))).filter((i) => i.metadata['regsync.task'] === 't1').map((i) => i.ip);
    await waitUntil(async () => (await mine()).join() === '10.3.0.1,10.3.0.2', { timeoutMs: 30_000, message: 'both copies in A' });
    const session = adapter.stats().sessionId as string;
    await waitUntil(async () => (await owners(client, dirB)).join() === session, { timeoutMs: 30_000, message: 'copy in B owned by the live session' });

    const calls = watchCalls;
    await zk<string>((cb) =>
      client.create(`${dirA}/${encodeNodeName('dubbo://10.3.9.2:20880/com.acme.A?interface=com.acme.A')}`, Buffer.alloc(0), CreateMode.PERSISTENT, cb),
    );
    await waitUntil(() => watchCalls > calls, { message: 'watch fires after the restart' });
  });

  it('drops a copy on remove even when its node vanished meanwhile, so it is not re-created after an expiry', async () => {
    const gone = copy('com.acme.B', '10.3.0.3');
    const [name] = await children(client, dirB);
    await zk<void>((cb) => client.remove(`${dirB}/${name}`, -1, (e) => cb(e, undefined)));
    await adapter.apply(key('com.acme.B'), { upsert: [], remove: [gone] });
    expect(adapter.stats().ownedNodes).toBe(2);
    const sessions = adapter.stats().sessions;
    await expireSessionBehind(proxy, server, made.at(-1) as Client);
    await waitUntil(() => adapter.stats().sessions === sessions + 1 && adapter.stats().connected, { timeoutMs: 30_000, message: 'another session' });
    const session = adapter.stats().sessionId as string;
    await waitUntil(async () => (await owners(client, dirA)).filter((o) => o === session).length === 2, { timeoutMs: 30_000, message: 'A copies back' });
    expect(await children(client, dirB)).toEqual([]);
  });
});

describe('ZooKeeperAdapter with digest authentication', () => {
  let server: ZooKeeperServer;
  let admin: Client;
  const adapters: ZooKeeperAdapter[] = [];
  const spec = (password: string): ClusterSpec => ({
    id: 'zk-auth',
    kind: 'zookeeper',
    endpoints: [server.connectString],
    username: 'sync',
    password,
    labels: {},
    options: { layout: 'curator', root: '/secure', sessionTimeoutMs: 4_000, connectTimeoutMs: 3_000 },
  });

  beforeAll(async () => {
    server = await startZooKeeper();
    admin = createClient(server.connectString, { sessionTimeout: 4_000, spinDelay: 100, retries: 0 });
    admin.addAuthInfo('digest', Buffer.from('sync:s3cret'));
    await connected(admin);
    const digest = createHash('sha1').update('sync:s3cret').digest('base64');
    await zk<string>((cb) => admin.create('/secure', Buffer.alloc(0), [new ACL(Permission.ALL, new Id('digest', `sync:${digest}`))], CreateMode.PERSISTENT, cb));
  });
  afterAll(async () => {
    await Promise.all(adapters.map((a) => a.close()));
    admin?.close();
    await server?.cleanup();
  });

  it('reads and writes with the cluster username and password as digest credentials', async () => {
    const adapter = createZooKeeperAdapter(spec('s3cret'), { logger: silent });
    adapters.push(adapter);
    const orders = { ...copy('x', '10.4.0.1'), metadata: { 'regsync.task': 't1' } };
    await adapter.apply(key('orders'), { upsert: [orders], remove: [] });
    expect(await adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).toEqual([key('orders')]);
    expect(await adapter.listInstances(key('orders'))).toEqual([orders]);
  });

  it('fails with NO_AUTH, naming the path, when the credentials are wrong', async () => {
    const adapter = createZooKeeperAdapter(spec('wrong'), { logger: silent });
    adapters.push(adapter);
    const failure = await adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(ZooKeeperRequestError);
    expect(failure).toMatchObject({ code: 'zookeeper-error', zkCode: 'NO_AUTH', path: '/secure' });
    expect(String((failure as Error).message)).not.toContain('wrong');
  });
});
