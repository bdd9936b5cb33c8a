import { connect, createServer, type Server, type Socket } from 'node:net';
import { createClient, CreateMode, State, type Client, type Stat } from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createZooKeeperAdapter } from '../../adapters/zookeeper/index.js';
import { startNode } from '../../src/node.js';
import { api, startFixture, stopFixture, testLogger, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';
import { startZooKeeper, type ZooKeeperServer } from '../support/zookeeper.js';

function zk<T>(call: (cb: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value))));
}

async function connectedClient(server: ZooKeeperServer): Promise<Client> {
  const client = createClient(server.connectString, { sessionTimeout: 4_000, spinDelay: 100, retries: 0 });
  client.connect();
  await waitUntil(() => client.getState() === State.SYNC_CONNECTED, { timeoutMs: 30_000, message: 'test client connected' });
  return client;
}

/** Dubbo's node name for a URL (java.net.URLEncoder). */
const dubboNode = (url: string) => encodeURIComponent(url).replace(/[!'()~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/**
 * A TCP proxy in front of a ZooKeeper that can cut off whoever connects through it (a partition):
 * open connections are dropped and new ones refused until it is unblocked.
 */
class PartitionProxy {
  private readonly pairs = new Set<[Socket, Socket]>();
  private blocked = false;
  private server: Server | undefined;

  constructor(private readonly target: number) {}

  async listen(): Promise<number> {
    const server = createServer((client) => {
      if (this.blocked) {
        client.destroy();
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
      upstream.on('data', (chunk: Buffer) => client.write(chunk));
      for (const s of pair) {
        s.on('error', drop);
        s.on('close', drop);
      }
    });
    this.server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return (server.address() as { port: number }).port;
  }

  block(): void {
    this.blocked = true;
    for (const [a, b] of this.pairs) {
      a.destroy();
      b.destroy();
    }
    this.pairs.clear();
  }

  unblock(): void {
    this.blocked = false;
  }

  async close(): Promise<void> {
    this.block();
    const server = this.server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
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
 * than the session timeout does: the client is cut off, its session closed from outside with its id
 * and password (the server deletes its ephemeral nodes), and the client let back in, to be told
 * "expired". With the client cut off, nothing races the close.
 */
async function expireSessionBehind(proxy: PartitionProxy, server: ZooKeeperServer, victim: Client): Promise<void> {
  const sessionId = victim.getSessionId();
  const password = victim.getSessionPassword();
  proxy.block();
  try {
    await closeSession(server.port, sessionId, password);
  } finally {
    proxy.unblock();
  }
}

/**
 * ZooKeeper (Dubbo) -> ZooKeeper (Dubbo) through a regsync node, across restarts of both servers
 * and forced expiries of regsync's sessions to each. regsync reaches each server through a proxy
 * (so that a test can partition it off); the test's own clients connect directly. The source
 * providers are persistent nodes, so that only regsync's sessions are at stake.
 */
describe('ZooKeeper -> ZooKeeper', () => {
  let fx: SyncFixture;
  let a: ZooKeeperServer;
  let b: ZooKeeperServer;
  let clientA: Client;
  let clientB: Client;
  const proxies = new Map<string, { proxy: PartitionProxy; server: ZooKeeperServer }>();
  /** The ZooKeeper clients regsync opened, per cluster id, oldest first. */
  const sessions = new Map<string, Client[]>();
  const DIR = '/dubbo/com.acme.Echo/providers';
  const provider = (ip: string) => `${DIR}/${dubboNode(`dubbo://${ip}:20880/com.acme.Echo?interface=com.acme.Echo&dynamic=false&side=provider`)}`;
  const addProvider = async (ip: string) => {
    await zk<string>((cb) => clientA.mkdirp(DIR, cb));
    await zk<string>((cb) => clientA.create(provider(ip), Buffer.alloc(0), CreateMode.PERSISTENT, cb));
  };
  const removeProvider = (ip: string) => zk<void>((cb) => clientA.remove(provider(ip), -1, (e) => cb(e, undefined)));
  /** regsync's live client to a cluster. */
  const regsyncClient = (cluster: string) => sessions.get(cluster)?.at(-1) as Client;
  /** Copies in B: `ip -> owner session` for each copy node, sorted by ip. */
  const copiesInB = async (): Promise<Array<[string, string]>> => {
    const stat = await zk<Stat | null>((cb) => clientB.exists(DIR, cb));
    if (!stat) return [];
    const names = await zk<string[]>((cb) => clientB.getChildren(DIR, cb));
    const out: Array<[string, string]> = [];
    for (const name of names) {
      const url = decodeURIComponent(name);
      if (!url.includes('regsync.task=ab')) continue;
      const node = await zk<Stat | null>((cb) => clientB.exists(`${DIR}/${name}`, cb));
      if (node) out.push([/\/\/([^:]+):/.exec(url)?.[1] as string, node.ephemeralOwner.toString('hex')]);
    }
    return out.sort((x, y) => x[0].localeCompare(y[0]));
  };
  /** True when B holds exactly one copy of each of `ips`, each owned by regsync's live session to B. */
  const exactlyOnce = async (ips: string[]): Promise<boolean> => {
    const live = regsyncClient('zkb')?.getSessionId().toString('hex');
    const copies = await copiesInB();
    return copies.map(([ip]) => ip).join() === [...ips].sort().join() && copies.every(([, owner]) => owner === live);
  };

  beforeAll(async () => {
    [a, b] = await Promise.all([startZooKeeper(), startZooKeeper()]);
    [clientA, clientB] = await Promise.all([connectedClient(a), connectedClient(b)]);
    fx = await startFixture();
    // As startSync, plus a client factory that records regsync's ZooKeeper sessions (to expire them).
    fx.node = await startNode({
      redisUrl: fx.redis.url,
      prefix: fx.prefix,
      listen: { host: '127.0.0.1', port: 0 },
      logger: testLogger(),
      confirmEmptyMs: 1_000,
      adapters: {
        zookeeper: (spec, deps) =>
          createZooKeeperAdapter(spec, {
            ...deps,
            clientFactory: (connectionString, options) => {
              const client = createClient(connectionString, options);
              sessions.set(spec.id, [...(sessions.get(spec.id) ?? []), client]);
              return client;
            },
          }),
      },
    });
    const url = fx.node.url as string;
    for (const [id, server] of [['zka', a], ['zkb', b]] as const) {
      const proxy = new PartitionProxy(server.port);
      const port = await proxy.listen();
      proxies.set(id, { proxy, server });
      const res = await api(url, 'POST', '/api/v1/clusters', {
        id,
        kind: 'zookeeper',
        endpoints: [`127.0.0.1:${port}`],
        options: { layout: 'dubbo', sessionTimeoutMs: 4_000, connectTimeoutMs: 3_000, spinDelayMs: 200 },
      });
      expect(res.status).toBe(201);
    }
    expect((await api(url, 'POST', '/api/v1/tasks', { id: 'ab', source: 'zka', destination: 'zkb', service: '*' })).status).toBe(201);
  });
  afterAll(async () => {
    await stopFixture(fx);
    await Promise.all([...proxies.values()].map((p) => p.proxy.close()));
    clientA?.close();
    clientB?.close();
    await Promise.all([a?.cleanup(), b?.cleanup()]);
  });

  it('copies providers as ephemeral nodes of its session, once each, with the marks in the URL', async () => {
    await addProvider('10.80.0.1');
    await waitUntil(() => exactlyOnce(['10.80.0.1']), { message: 'provider copied into B' });
    const [name] = await zk<string[]>((cb) => clientB.getChildren(DIR, cb));
    expect(decodeURIComponent(name as string)).toBe(
      'dubbo://10.80.0.1:20880/com.acme.Echo?dynamic=false&interface=com.acme.Echo&protocol=dubbo&regsync.origin=zka&regsync.path=zka&regsync.task=ab&side=provider'
        // protocol is the scheme, not a parameter
        .replace('&protocol=dubbo', ''),
    );
  });

  it('destination restarted: the copies are there exactly once afterwards, and syncing goes on', async () => {
    await b.restart();
    clientB.close();
    clientB = await connectedClient(b);
    await waitUntil(() => exactlyOnce(['10.80.0.1']), { timeoutMs: 60_000, message: 'copy in B after its restart' });
    await addProvider('10.80.0.2');
    await waitUntil(() => exactlyOnce(['10.80.0.1', '10.80.0.2']), { timeoutMs: 60_000, message: 'new provider copied after the restart' });
  });

  it('source restarted: regsync watches it again by itself', async () => {
    await a.restart();
    clientA.close();
    clientA = await connectedClient(a);
    await addProvider('10.80.0.3');
    await waitUntil(() => exactlyOnce(['10.80.0.1', '10.80.0.2', '10.80.0.3']), { timeoutMs: 60_000, message: 'provider added after the source restart' });
    await removeProvider('10.80.0.1');
    await waitUntil(() => exactlyOnce(['10.80.0.2', '10.80.0.3']), { timeoutMs: 60_000, message: 'provider removed after the source restart' });
  });

  it('destination session expired: the copies come back exactly once, in the new session', async () => {
    const before = sessions.get('zkb')?.length ?? 0;
    await expireSessionBehind(proxies.get('zkb')?.proxy as PartitionProxy, b, regsyncClient('zkb'));
    await waitUntil(() => (sessions.get('zkb')?.length ?? 0) === before + 1 && regsyncClient('zkb').getState() === State.SYNC_CONNECTED, {
      timeoutMs: 30_000,
      message: 'regsync in a new session with B',
    });
    await waitUntil(() => exactlyOnce(['10.80.0.2', '10.80.0.3']), { timeoutMs: 60_000, message: 'copies re-created in the new session' });
    await addProvider('10.80.0.4');
    await waitUntil(() => exactlyOnce(['10.80.0.2', '10.80.0.3', '10.80.0.4']), { timeoutMs: 60_000, message: 'syncing goes on' });
  });

  it('source session expired: regsync watches the source again in its new session', async () => {
    const before = sessions.get('zka')?.length ?? 0;
    await expireSessionBehind(proxies.get('zka')?.proxy as PartitionProxy, a, regsyncClient('zka'));
    await waitUntil(() => (sessions.get('zka')?.length ?? 0) === before + 1 && regsyncClient('zka').getState() === State.SYNC_CONNECTED, {
      timeoutMs: 30_000,
      message: 'regsync in a new session with A',
    });
    await addProvider('10.80.0.5');
    await waitUntil(() => exactlyOnce(['10.80.0.2', '10.80.0.3', '10.80.0.4', '10.80.0.5']), { timeoutMs: 60_000, message: 'provider added after the source expiry' });
    await removeProvider('10.80.0.2');
    await waitUntil(() => exactlyOnce(['10.80.0.3', '10.80.0.4', '10.80.0.5']), { timeoutMs: 60_000, message: 'provider removed after the source expiry' });
  });
});
