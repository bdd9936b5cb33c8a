import { createHash } from 'node:crypto';
import { connect } from 'node:net';
import { ACL, createClient, CreateMode, Id, Permission, State, type Client, type Stat } from 'node-zookeeper-client';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterSpec, Instance, ServiceKey } from '../../src/model/index.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { startZooKeeper, type ZooKeeperServer } from '../../test/support/zookeeper.js';
import { encodeNodeName } from './dubbo-url.js';
import { createZooKeeperAdapter, type ZooKeeperAdapter } from './zookeeper-adapter.js';
import type { ZooKeeperClientFactory } from './zookeeper-connection.js';
import { ZooKeeperRequestError } from './zookeeper-request-error.js';

const silent = pino({ level: 'silent' });

function zk<T>(call: (cb: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value))));
}

async function connected(client: Client): Promise<Client> {
  client.connect();
  await waitUntil(() => client.getState() === State.SYNC_CONNECTED, { message: 'test client connected' });
  return client;
}

const children = async (client: Client, path: string): Promise<string[]> =>
  (await zk<Stat | null>((cb) => client.exists(path, cb))) ? (await zk<string[]>((cb) => client.getChildren(path, cb))).sort() : [];
const owners = async (client: Client, dir: string): Promise<string[]> =>
  Promise.all((await children(client, dir)).map(async (name) => (await zk<Stat>((cb) => client.exists(`${dir}/${name}`, cb))).ephemeralOwner.toString('hex')));

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

/**
 * Ends a session from outside, as a long partition would: a raw connection re-attaches to the
 * session and closes it in the same write (ConnectRequest, then CloseSession), so the server has
 * closed the session before the owner, whose connection it dropped, can reconnect. The server then
 * deletes the session's ephemeral nodes, and the owner's next connection is told "expired". Resolves
 * when the server hangs up.
 */
function closeSessionOf(port: number, owner: Client): Promise<void> {
  const connectRequest = Buffer.alloc(4 + 4 + 8 + 4 + 8 + 4 + 16 + 1);
  let offset = connectRequest.writeInt32BE(connectRequest.length - 4, 0);
  offset = connectRequest.writeInt32BE(0, offset); // protocol version
  offset = connectRequest.writeBigInt64BE(0n, offset); // last zxid seen
  offset = connectRequest.writeInt32BE(4_000, offset); // session timeout
  offset += owner.getSessionId().copy(connectRequest, offset);
  offset = connectRequest.writeInt32BE(16, offset);
  offset += owner.getSessionPassword().copy(connectRequest, offset);
  connectRequest.writeUInt8(0, offset); // not read-only
  const closeSession = Buffer.alloc(12);
  closeSession.writeInt32BE(8, 0);
  closeSession.writeInt32BE(1, 4); // xid
  closeSession.writeInt32BE(-11, 8); // OpCode.closeSession
  return new Promise<void>((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => socket.write(Buffer.concat([connectRequest, closeSession])));
    socket.on('data', () => {});
    socket.once('error', reject);
    socket.once('close', () => resolve());
  });
}

/**
 * {@link closeSessionOf} on the owner's current session until the owner has moved on to another
 * client (its session was closed), then waits for `expired()`. The owner reconnects at once when the
 * server drops its connection and now and then wins the session back before the close is read;
 * trying again is harmless. Only the original session is ever attacked.
 */
async function expireSession(server: ZooKeeperServer, owner: () => Client, expired: () => boolean | Promise<boolean>): Promise<void> {
  const victim = owner();
  for (let attempt = 1; owner() === victim; attempt += 1) {
    console.log('ATTEMPT', attempt, victim.getSessionId().toString('hex'), String(victim.getState()), Date.now());
    await closeSessionOf(server.port, victim);
    console.log('CLOSED', Date.now());
    try {
      await waitUntil(() => owner() !== victim, { timeoutMs: 3_000, message: 'the owner on a new client' });
    } catch (err) {
      if (attempt >= 10) throw err;
    }
  }
  await waitUntil(expired, { timeoutMs: 30_000, message: 'the owner connected in a new session' });
}

describe('ZooKeeperAdapter recovery', () => {
  let server: ZooKeeperServer;
  let client: Client;
  let adapter: ZooKeeperAdapter;
  const made: Client[] = [];
  const factory: ZooKeeperClientFactory = (connectionString, options) => {
    const c = createClient(connectionString, options);
    c.on('state', (st: State) => console.log('OWNER', made.indexOf(c), String(st), c.getSessionId().toString('hex'), Date.now()));
    made.push(c);
    return c;
  };
  const spec: () => ClusterSpec = () => ({
    id: 'zk-recovery',
    kind: 'zookeeper',
    endpoints: [server.connectString],
    labels: {},
    options: { sessionTimeoutMs: 4_000, connectTimeoutMs: 3_000, spinDelayMs: 200 },
  });
  const dirA = '/dubbo/com.acme.A/providers';
  const dirB = '/dubbo/com.acme.B/providers';
  let watchCalls = 0;

  beforeAll(async () => {
    server = await startZooKeeper();
    client = await connected(createClient(server.connectString, { sessionTimeout: 4_000, spinDelay: 100, retries: 0 }));
    adapter = createZooKeeperAdapter(spec(), { logger: silent, clientFactory: factory });
    await adapter.apply(key('com.acme.A'), { upsert: [copy('com.acme.A', '10.3.0.1'), copy('com.acme.A', '10.3.0.2')], remove: [] });
    await adapter.apply(key('com.acme.B'), { upsert: [copy('com.acme.B', '10.3.0.3')], remove: [] });
    adapter.watch(key('com.acme.A'), () => (watchCalls += 1));
  });
  afterAll(async () => {
    const { copyFileSync } = await import('node:fs');
    try { copyFileSync(server.logFile, '/tmp/zk-r.log'); } catch { /* */ }
    await adapter?.close();
    client?.close();
    await server?.cleanup();
  });

  it('re-creates every copy exactly once in a new session after its session expired, and watches again', async () => {
    const before = adapter.stats().sessionId as string;
    expect(await owners(client, dirA)).toEqual([before, before]);
    await expireSession(server, () => made.at(-1) as Client, () => adapter.stats().sessions === 2 && adapter.stats().connected);
    const after = adapter.stats().sessionId as string;
    expect(after).not.toBe(before);
    await waitUntil(async () => (await owners(client, dirA)).join() === [after, after].join() && (await owners(client, dirB)).join() === after, {
      timeoutMs: 30_000,
      message: 'copies re-created in the new session',
    });
    expect(adapter.stats()).toMatchObject({ expiries: 1, ownedNodes: 3, recreatedNodes: 3 });
    expect((await adapter.listInstances(key('com.acme.A'))).map((i) => i.ip)).toEqual(['10.3.0.1', '10.3.0.2']);

    const calls = watchCalls;
    await zk<string>((cb) =>
      client.create(`${dirA}/${encodeNodeName('dubbo://10.3.9.1:20880/com.acme.A?interface=com.acme.A')}`, Buffer.alloc(0), CreateMode.EPHEMERAL, cb),
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
    await waitUntil(async () => (await children(client, dirA)).length >= 2, { timeoutMs: 30_000, message: 'copies in A after restart' });
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
    await expireSession(server, () => made.at(-1) as Client, () => adapter.stats().sessions === sessions + 1 && adapter.stats().connected);
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
