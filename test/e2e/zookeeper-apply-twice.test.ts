import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, State, type Client, type Stat } from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createZooKeeperAdapter } from '../../adapters/zookeeper/index.js';
import type { AdapterFactory } from '../../src/engine/adapter-pool.js';
import { applyDeclarations, readDeclarations } from '../../src/cli/apply-command.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { addRegistry, api, registerNative, startFixture, startSync, stopFixture, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';
import { startZooKeeper, type ZooKeeperServer } from '../support/zookeeper.js';

function zk<T>(call: (cb: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value))));
}

const ECHO = 'providers:com.acme.Echo:1.0.0:';
const ECHO_DIR = '/dubbo/com.acme.Echo/providers';
const USER = 'regsync';
const PASSWORD = 'zk-s3cret-digest';

/** An HTTP pass-through to `target` that counts requests by method. */
async function countingProxy(target: string): Promise<{ url: string; counts: Map<string, number>; server: Server }> {
  const counts = new Map<string, number>();
  const server = createServer((req, res) => {
    counts.set(req.method ?? '?', (counts.get(req.method ?? '?') ?? 0) + 1);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = chunks.length > 0 ? Buffer.concat(chunks) : undefined;
      const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => ['content-type', 'authorization'].includes(k))) as Record<string, string>;
      void fetch(`${target}${req.url ?? '/'}`, { method: req.method ?? 'GET', headers, ...(body ? { body } : {}) })
        .then(async (answer) => {
          res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain' });
          res.end(Buffer.from(await answer.arrayBuffer()));
        })
        .catch(() => res.destroy());
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  return { url: `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`, counts, server };
}

/**
 * `regsync apply` of the same files twice against a running regsync whose destination is a ZooKeeper
 * with digest auth (a cluster with a password, which the API never shows): the second run sends no
 * PUT, and the Dubbo provider nodes regsync wrote keep their ctime and session (consumers never see
 * them vanish).
 */
describe('regsync apply twice with a ZooKeeper destination that has a password', () => {
  let fx: SyncFixture;
  let nacos: RunningRegistry;
  let server: ZooKeeperServer;
  let client: Client;
  let url: string;
  let dir: string;
  let proxy: Awaited<ReturnType<typeof countingProxy>>;
  const natives: NativeInstance[] = [];
  /** The provider nodes as they were when an adapter of cluster zk started closing (once armed). */
  let atClose: Map<string, { ctime: string; owner: string }> | undefined;
  let armed = false;
  const zookeeper: AdapterFactory = (spec, deps) => {
    const adapter = createZooKeeperAdapter(spec, deps);
    const close = adapter.close.bind(adapter);
    adapter.close = async () => {
      if (armed && atClose === undefined) atClose = await providerNodes();
      return close();
    };
    return adapter;
  };
  let before: Map<string, { ctime: string; owner: string }>;

  beforeAll(async () => {
    server = await startZooKeeper();
    client = createClient(server.connectString, { sessionTimeout: 4_000, spinDelay: 100, retries: 0 });
    client.addAuthInfo('digest', Buffer.from(`${USER}:${PASSWORD}`));
    client.connect();
    await waitUntil(() => client.getState() === State.SYNC_CONNECTED, { message: 'test client connected' });
    fx = await startFixture();
    nacos = await addRegistry(fx, 'nacos');
    url = (await startSync(fx, undefined, { adapters: { zookeeper } })).url as string;
    proxy = await countingProxy(url);
    dir = mkdtempSync(join(tmpdir(), 'regsync-apply-zk-'));
    writeFileSync(
      join(dir, 'clusters.yaml'),
      [
        'clusters:',
        `  - { id: nacos, kind: nacos, endpoints: ["${nacos.endpoint}"], labels: { site: a, region: eu } }`,
        `  - id: zk`,
        `    kind: zookeeper`,
        `    endpoints: ["${server.connectString}"]`,
        `    username: ${USER}`,
        `    password: ${PASSWORD}`,
        '    options: { sessionTimeoutMs: 4000, layout: dubbo, connectTimeoutMs: 3000 }',
      ].join('\n'),
    );
    writeFileSync(join(dir, 'tasks.yaml'), ['tasks:', `  - { id: nacos-to-zk, source: nacos, destination: zk, service: "${ECHO}", options: { fullSyncIntervalMs: 60000 } }`].join('\n'));
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    proxy?.server.close();
    await stopFixture(fx);
    client?.close();
    await server?.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  async function providerNodes(): Promise<Map<string, { ctime: string; owner: string }>> {
    const nodes = new Map<string, { ctime: string; owner: string }>();
    const names = (await zk<Stat | null>((cb) => client.exists(ECHO_DIR, cb))) ? await zk<string[]>((cb) => client.getChildren(ECHO_DIR, cb)) : [];
    for (const name of names) {
      const stat = await zk<Stat | null>((cb) => client.exists(`${ECHO_DIR}/${name}`, cb));
      if (stat) nodes.set(name, { ctime: stat.ctime.toString('hex'), owner: stat.ephemeralOwner.toString('hex') });
    }
    return nodes;
  }

  async function lastSyncAt(): Promise<string | null | undefined> {
    return ((await api(url, 'GET', '/api/v1/tasks/nacos-to-zk')).body.status?.services?.[0] as { lastSyncAt: string | null } | undefined)?.lastSyncAt;
  }

  it('sends no PUT the second time, and the provider nodes keep their ctime and session', async () => {
    const first = await applyDeclarations(proxy.url, readDeclarations(dir));
    expect(first.map((r) => `${r.kind} ${r.id} ${r.action}`)).toEqual(['cluster nacos created', 'cluster zk created', 'task nacos-to-zk created']);
    for (const ip of ['10.80.0.1', '10.80.0.2']) {
      natives.push(await registerNative(() => nacos, ECHO, ip, 20880, { protocol: 'dubbo', interface: 'com.acme.Echo', version: '1.0.0', side: 'provider' }));
    }
    before = await waitUntil(async () => {
      const nodes = await providerNodes();
      return nodes.size === 2 && [...nodes.values()].every((n) => n.owner !== '0000000000000000') ? nodes : undefined;
    }, { message: 'both providers written to ZooKeeper', timeoutMs: 20_000 });
    const synced = await waitUntil(lastSyncAt, { message: 'a first reconcile' });

    proxy.counts.clear();
    const again = await applyDeclarations(proxy.url, readDeclarations(dir));
    expect(again.map((r) => `${r.kind} ${r.id} ${r.action}`)).toEqual(['cluster nacos unchanged', 'cluster zk unchanged', 'task nacos-to-zk unchanged']);
    expect(proxy.counts.get('PUT') ?? 0).toBe(0);

    // Whatever the apply set going, a reconcile after it finds the nodes as they were.
    expect((await api(url, 'POST', '/api/v1/tasks/nacos-to-zk/resync')).status).toBe(202);
    await waitUntil(async () => ((await lastSyncAt()) ?? '') > (synced ?? ''), { message: 'a reconcile after the second apply' });
    expect(await providerNodes()).toEqual(before);
    expect((await api(url, 'GET', '/api/v1/clusters/zk')).body).toMatchObject({ hasPassword: true });
  });

  it('keeps the provider nodes while a change of the connection settings replaces the adapter', async () => {
    armed = true;
    const res = await api(url, 'PUT', '/api/v1/clusters/zk', {
      kind: 'zookeeper',
      endpoints: [server.connectString],
      username: USER,
      password: PASSWORD,
      options: { sessionTimeoutMs: 5000, layout: 'dubbo', connectTimeoutMs: 3000 },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // When the old session started closing, the new one held the nodes already.
    expect(atClose, 'the old adapter was closed').toBeDefined();
    expect([...(atClose ?? new Map()).keys()].sort()).toEqual([...before.keys()].sort());
    for (const [name, node] of atClose ?? []) expect(node.owner, name).not.toBe(before.get(name)?.owner);
    // And so they are right after the PUT, the old session gone.
    expect(await providerNodes()).toEqual(atClose);
  });
});
