import { randomUUID } from 'node:crypto';
import { createClient, CreateMode, State, type Client, type Stat } from 'node-zookeeper-client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startZooKeeper, zkFourLetterWord, type ZooKeeperServer } from '../support/zookeeper.js';
import { waitUntil } from '../support/wait-until.js';

const clients: Client[] = [];

async function connected(server: ZooKeeperServer, sessionTimeout = 4_000): Promise<Client> {
  const client = createClient(server.connectString, { sessionTimeout, spinDelay: 100, retries: 0 });
  clients.push(client);
  client.connect();
  await waitUntil(() => client.getState() === State.SYNC_CONNECTED, {
    message: `a ZooKeeper session with ${server.connectString}`,
  });
  return client;
}

function create(client: Client, path: string, data: string, mode: number): Promise<string> {
  return new Promise((resolve, reject) => {
    client.create(path, Buffer.from(data), mode, (error, created) => (error ? reject(error) : resolve(created)));
  });
}

function getData(client: Client, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    client.getData(path, (error, data) => (error ? reject(error) : resolve(data.toString('utf8'))));
  });
}

/** The node's Stat, or null when it does not exist. */
function exists(client: Client, path: string): Promise<Stat | null> {
  return new Promise((resolve, reject) => {
    client.exists(path, (error, stat) => (error ? reject(error) : resolve(stat ?? null)));
  });
}

afterEach(() => {
  for (const client of clients.splice(0)) client.close();
});

describe('startZooKeeper()', () => {
  let server: ZooKeeperServer;

  beforeAll(async () => {
    server = await startZooKeeper();
  });

  afterAll(async () => {
    await server?.cleanup();
  });

  it('serves a standalone ZooKeeper on 127.0.0.1', async () => {
    expect(server.connectString).toBe(`127.0.0.1:${server.port}`);
    const srvr = await zkFourLetterWord(server.port, 'srvr');
    expect(srvr).toContain('Mode: standalone');
    expect(srvr).toMatch(/Zookeeper version: 3\.8\./);
  });

  it('creates a node and reads its data back', async () => {
    const client = await connected(server);
    const path = `/smoke-${randomUUID()}`;
    expect(await create(client, path, 'hello', CreateMode.PERSISTENT)).toBe(path);
    expect(await getData(client, path)).toBe('hello');
  });

  it('removes an EPHEMERAL node once its session is closed, as seen from another client', async () => {
    const owner = await connected(server);
    const observer = await connected(server);
    const path = `/smoke-ephemeral-${randomUUID()}`;
    await create(owner, path, 'mine', CreateMode.EPHEMERAL);

    const stat = await exists(observer, path);
    expect(stat).not.toBeNull();
    expect(stat?.ephemeralOwner.equals(owner.getSessionId())).toBe(true);

    owner.close();
    await waitUntil(async () => (await exists(observer, path)) === null, {
      message: `ephemeral ${path} to vanish after its session closed`,
    });
  });

  it('keeps a persistent node across restart()', async () => {
    const path = `/smoke-persistent-${randomUUID()}`;
    const before = await connected(server);
    await create(before, path, 'durable', CreateMode.PERSISTENT);
    before.close();

    await server.restart();

    const after = await connected(server);
    expect(await getData(after, path)).toBe('durable');
  });
});
