import { connect } from 'node:net';
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
 * Ends a session from outside, as a long partition would: a raw connection re-attaches to the
 * session and closes it in the same write (ConnectRequest, then CloseSession). The server deletes
 * the session's ephemeral nodes and the owner's next connection is told "expired".
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
    await closeSessionOf(server.port, victim);
    try {
      await waitUntil(() => owner() !== victim, { timeoutMs: 3_000, message: 'the owner on a new client' });
    } catch (err) {
      if (attempt >= 10) throw err;
    }
  }
  await waitUntil(expired, { timeoutMs: 30_000, message: 'the owner connected in a new session' });
}

/**
 * ZooKeeper (Dubbo) -> ZooKeeper (Dubbo) through a regsync node, across restarts of both servers
 * and forced expiries of regsync's sessions to each. The source providers are persistent nodes, so
 * that only regsync's sessions are at stake.
 */
describe('ZooKeeper -> ZooKeeper', () => {
  let fx: SyncFixture;
  let a: ZooKeeperServer;
  let b: ZooKeeperServer;
  let clientA: Client;
  let clientB: Client;
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
      const res = await api(url, 'POST', '/api/v1/clusters', {
        id,
        kind: 'zookeeper',
        endpoints: [server.connectString],
        options: { layout: 'dubbo', sessionTimeoutMs: 4_000, connectTimeoutMs: 3_000, spinDelayMs: 200 },
      });
      expect(res.status).toBe(201);
    }
    expect((await api(url, 'POST', '/api/v1/tasks', { id: 'ab', source: 'zka', destination: 'zkb', service: '*' })).status).toBe(201);
  });
  afterAll(async () => {
    await stopFixture(fx);
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
    await expireSession(b, () => regsyncClient('zkb'), () => (sessions.get('zkb')?.length ?? 0) > before && regsyncClient('zkb').getState() === State.SYNC_CONNECTED);
    await waitUntil(() => exactlyOnce(['10.80.0.2', '10.80.0.3']), { timeoutMs: 60_000, message: 'copies re-created in the new session' });
    await addProvider('10.80.0.4');
    await waitUntil(() => exactlyOnce(['10.80.0.2', '10.80.0.3', '10.80.0.4']), { timeoutMs: 60_000, message: 'syncing goes on' });
  });

  it('source session expired: regsync watches the source again in its new session', async () => {
    const before = sessions.get('zka')?.length ?? 0;
    await expireSession(a, () => regsyncClient('zka'), () => (sessions.get('zka')?.length ?? 0) > before && regsyncClient('zka').getState() === State.SYNC_CONNECTED);
    await addProvider('10.80.0.5');
    await waitUntil(() => exactlyOnce(['10.80.0.2', '10.80.0.3', '10.80.0.4', '10.80.0.5']), { timeoutMs: 60_000, message: 'provider added after the source expiry' });
    await removeProvider('10.80.0.2');
    await waitUntil(() => exactlyOnce(['10.80.0.3', '10.80.0.4', '10.80.0.5']), { timeoutMs: 60_000, message: 'provider removed after the source expiry' });
  });
});
