import { createClient, CreateMode, State, type Client, type Stat } from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_ORIGIN, MARK_PATH, MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import {
  addRegistry,
  api,
  copiesIn,
  defineClusters,
  defineTask,
  instancesIn,
  registerNative,
  startFixture,
  startSync,
  stopFixture,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { createSdkClient } from '../support/nacos-sdk.js';
import { waitUntil } from '../support/wait-until.js';
import { startZooKeeper, type ZooKeeperServer } from '../support/zookeeper.js';

/** Promisifies one node-zookeeper-client call. */
function zk<T>(call: (cb: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value))));
}
const children = async (client: Client, path: string): Promise<string[]> =>
  (await zk<Stat | null>((cb) => client.exists(path, cb))) ? (await zk<string[]>((cb) => client.getChildren(path, cb))).sort() : [];
const createNode = async (client: Client, path: string, data: Buffer, mode: number) => {
  await zk<string>((cb) => client.mkdirp(path.slice(0, path.lastIndexOf('/')), cb));
  return zk<string>((cb) => client.create(path, data, mode, cb));
};
const removeNode = (client: Client, path: string) => zk<void>((cb) => client.remove(path, -1, (e) => cb(e, undefined)));
/** Dubbo's node name for a URL (java.net.URLEncoder). */
const dubboNode = (url: string) => encodeURIComponent(url).replace(/[!'()~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

/** The status of one service of a task, found by the end of its `namespace/group/name`. */
async function serviceStatus(url: string, task: string, service: string): Promise<{ lastError: string | null; lastSyncAt: string | null } | undefined> {
  const services = (await api(url, 'GET', `/api/v1/tasks/${task}`)).body.status.services as Array<{ service: string; lastError: string | null; lastSyncAt: string | null }>;
  return services.find((s) => s.service.endsWith(`/${service}`));
}

async function defineZooKeeper(url: string, id: string, server: ZooKeeperServer, options: Record<string, unknown>): Promise<void> {
  const res = await api(url, 'POST', '/api/v1/clusters', {
    id,
    kind: 'zookeeper',
    endpoints: [server.connectString],
    options: { sessionTimeoutMs: 4_000, connectTimeoutMs: 3_000, spinDelayMs: 200, ...options },
  });
  if (res.status !== 201) throw new Error(`cannot define cluster ${id}: ${JSON.stringify(res.body)}`);
}

const ECHO = 'providers:com.acme.Echo:1.0.0:';
const ECHO_DIR = '/dubbo/com.acme.Echo/providers';
const echoUrl = (ip: string, extra = '') =>
  `dubbo://${ip}:20880/com.acme.Echo?application=echo&interface=com.acme.Echo&methods=echo&side=provider&version=1.0.0&weight=5${extra}`;

/**
 * A real ZooKeeper holding Dubbo providers (root /dubbo) and Spring Cloud services (root /services),
 * an embedded Nacos registry, and regsync syncing both ways, with clusters defined through the API.
 */
describe('ZooKeeper <-> Nacos', () => {
  let fx: SyncFixture;
  let nacos: RunningRegistry;
  let server: ZooKeeperServer;
  let client: Client;
  let url: string;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    server = await startZooKeeper();
    client = createClient(server.connectString, { sessionTimeout: 4_000, spinDelay: 100, retries: 0 });
    client.connect();
    await waitUntil(() => client.getState() === State.SYNC_CONNECTED, { message: 'test client connected' });
    fx = await startFixture();
    nacos = await addRegistry(fx, 'nacos');
    url = (await startSync(fx)).url as string;
    await defineClusters(url, fx);
    await defineZooKeeper(url, 'zk', server, { layout: 'dubbo' });
    await defineZooKeeper(url, 'zkc', server, { layout: 'curator' });
    await defineTask(url, 'zk-to-nacos', 'zk', 'nacos', ECHO);
    await defineTask(url, 'nacos-to-zk', 'nacos', 'zk', ECHO);
    await defineTask(url, 'zkc-to-nacos', 'zkc', 'nacos', 'orders');
    await defineTask(url, 'nacos-to-zkc', 'nacos', 'zkc', 'orders');
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await stopFixture(fx);
    client?.close();
    await server?.cleanup();
  });

  describe('Dubbo layout', () => {
    it('copies a provider created in ZooKeeper to Nacos under nacos-sync naming, with its URL parameters as metadata', async () => {
      await createNode(client, `${ECHO_DIR}/${dubboNode(echoUrl('10.60.0.1'))}`, Buffer.alloc(0), CreateMode.EPHEMERAL);
      await waitUntil(() => copiesIn(nacos, ECHO).length === 1, { message: 'provider copied to Nacos' });
      expect(copiesIn(nacos, ECHO)[0]).toMatchObject({
        ip: '10.60.0.1',
        port: 20880,
        weight: 5,
        healthy: true,
        metadata: {
          protocol: 'dubbo',
          interface: 'com.acme.Echo',
          version: '1.0.0',
          application: 'echo',
          methods: 'echo',
          side: 'provider',
          weight: '5',
          [MARK_ORIGIN]: 'zk',
          [MARK_PATH]: 'zk',
          [MARK_TASK]: 'zk-to-nacos',
        },
      });
      // The reverse task saw the copy in Nacos and wrote nothing back into ZooKeeper.
      await waitUntil(async () => (await serviceStatus(url, 'nacos-to-zk', ECHO))?.lastSyncAt, { message: 'reverse task ran' });
      expect(await children(client, ECHO_DIR)).toHaveLength(1);
    });

    it('writes a Nacos provider into ZooKeeper as a Dubbo URL carrying the marks, ephemeral, once', async () => {
      natives.push(
        await registerNative(() => nacos, ECHO, '10.60.1.1', 20881, { protocol: 'dubbo', interface: 'com.acme.Echo', version: '1.0.0', side: 'provider' }),
      );
      const copies = async () => (await children(client, ECHO_DIR)).map(decodeURIComponent).filter((u) => u.includes('10.60.1.1'));
      await waitUntil(async () => (await copies()).length === 1, { message: 'Nacos provider written into ZooKeeper' });
      const [copy] = await copies();
      expect(copy).toBe(
        'dubbo://10.60.1.1:20881/com.acme.Echo?interface=com.acme.Echo&regsync.origin=nacos&regsync.path=nacos&regsync.task=nacos-to-zk&side=provider&version=1.0.0',
      );
      const stat = await zk<Stat>((cb) => client.exists(`${ECHO_DIR}/${dubboNode(copy as string)}`, cb));
      expect(stat.ephemeralOwner.toString('hex')).not.toBe('0000000000000000');
      // Not copied back into Nacos: its path already holds nacos.
      await waitUntil(async () => (await serviceStatus(url, 'zk-to-nacos', ECHO))?.lastSyncAt, { message: 'forward task ran' });
      expect(instancesIn(nacos, ECHO).map((i) => i.ip).sort()).toEqual(['10.60.0.1', '10.60.1.1']);
    });

    it('removes the Nacos copy when the provider node is deleted', async () => {
      await createNode(client, `${ECHO_DIR}/${dubboNode(echoUrl('10.60.0.2'))}`, Buffer.alloc(0), CreateMode.EPHEMERAL);
      await waitUntil(() => copiesIn(nacos, ECHO).some((i) => i.ip === '10.60.0.2'), { message: 'second provider copied' });
      await removeNode(client, `${ECHO_DIR}/${dubboNode(echoUrl('10.60.0.2'))}`);
      await waitUntil(() => !copiesIn(nacos, ECHO).some((i) => i.ip === '10.60.0.2'), { message: 'copy removed from Nacos' });
      expect(copiesIn(nacos, ECHO).map((i) => i.ip)).toEqual(['10.60.0.1']);
    });

    it('syncs the good providers next to a malformed node and names the bad one in the task status', async () => {
      const bad = `${ECHO_DIR}/this-is-not-a-url`;
      await createNode(client, bad, Buffer.alloc(0), CreateMode.PERSISTENT);
      await createNode(client, `${ECHO_DIR}/${dubboNode(echoUrl('10.60.0.3'))}`, Buffer.alloc(0), CreateMode.EPHEMERAL);
      await waitUntil(() => copiesIn(nacos, ECHO).some((i) => i.ip === '10.60.0.3'), { message: 'good provider copied next to the bad one' });
      await waitUntil(async () => (await serviceStatus(url, 'zk-to-nacos', ECHO))?.lastError?.includes(bad), { message: 'bad node reported' });
      const task = (await api(url, 'GET', '/api/v1/tasks/zk-to-nacos')).body;
      expect(task.state).toBe('error');
      await removeNode(client, bad);
      await waitUntil(async () => (await serviceStatus(url, 'zk-to-nacos', ECHO))?.lastError === null, { message: 'status clear once the node is gone' });
    });

    it('reports a Nacos instance that cannot become a Dubbo URL, and writes the others', async () => {
      await defineTask(url, 'nacos-to-zk-bare', 'nacos', 'zk', 'com.acme.Bare');
      natives.push(await registerNative(() => nacos, 'com.acme.Bare', '10.60.2.1', 8080, { protocol: 'dubbo', interface: 'com.acme.Bare' }));
      natives.push(await registerNative(() => nacos, 'com.acme.Bare', '10.60.2.2', 8080, { note: 'no protocol, no interface' }));
      await waitUntil(async () => (await children(client, '/dubbo/com.acme.Bare/providers')).length === 1, { message: 'the writable one in ZooKeeper' });
      await waitUntil(async () => (await serviceStatus(url, 'nacos-to-zk-bare', 'com.acme.Bare'))?.lastError?.includes('no protocol'), {
        message: 'the other one reported',
      });
      expect(decodeURIComponent((await children(client, '/dubbo/com.acme.Bare/providers'))[0] as string)).toContain('10.60.2.1:8080');
    });

    it('a * task picks up an interface that appears, one Nacos service per version and group', async () => {
      await defineTask(url, 'zk-all', 'zk', 'nacos', '*', { group: 'ALL' });
      await waitUntil(() => (nacos.store.getService('public', 'ALL', ECHO)?.instances.size ?? 0) >= 2, { message: 'existing interface under *' });
      await createNode(
        client,
        `/dubbo/com.acme.Late/providers/${dubboNode('dubbo://10.60.3.1:20880/com.acme.Late?interface=com.acme.Late&group=blue')}`,
        Buffer.alloc(0),
        CreateMode.EPHEMERAL,
      );
      await waitUntil(() => nacos.store.getService('public', 'ALL', 'providers:com.acme.Late::blue')?.instances.size === 1, {
        message: 'new interface synced live',
      });
    });

    it('a task for a bare interface writes one Nacos service per version and group, as Dubbo consumers look them up, following new ones', async () => {
      const dir = '/dubbo/com.acme.Fan/providers';
      const node = (ip: string, query: string) =>
        `${dir}/${dubboNode(`dubbo://${ip}:20880/com.acme.Fan?application=fan&interface=com.acme.Fan&methods=fan&side=provider${query}`)}`;
      await createNode(client, node('10.60.4.1', '&version=1.0.0'), Buffer.alloc(0), CreateMode.EPHEMERAL);
      await createNode(client, node('10.60.4.2', '&version=2.0.0&group=green'), Buffer.alloc(0), CreateMode.EPHEMERAL);
      await defineTask(url, 'zk-bare', 'zk', 'nacos', 'com.acme.Fan');
      // A Dubbo consumer on Nacos looks its provider up by this name, through the official SDK.
      const sdk = await createSdkClient(nacos.endpoint);
      const lookup = async (name: string) => (await sdk.getAllInstances(name, 'DEFAULT_GROUP', '', false)).map((h) => h.ip).sort().join();
      try {
        await waitUntil(async () => (await lookup('providers:com.acme.Fan:1.0.0:')) === '10.60.4.1', { message: 'version 1.0.0 under its Dubbo name' });
        await waitUntil(async () => (await lookup('providers:com.acme.Fan:2.0.0:green')) === '10.60.4.2', { message: 'version 2.0.0 of group green under its Dubbo name' });
        expect(nacos.store.getService('public', 'DEFAULT_GROUP', 'com.acme.Fan')).toBeUndefined();
        // A version appearing later gets its own service, through the interface's watch.
        await createNode(client, node('10.60.4.3', '&version=3.0.0'), Buffer.alloc(0), CreateMode.EPHEMERAL);
        await waitUntil(async () => (await lookup('providers:com.acme.Fan:3.0.0:')) === '10.60.4.3', { message: 'a third version picked up live' });
        // A version whose last provider goes takes its copy with it, and leaves the task.
        await removeNode(client, node('10.60.4.1', '&version=1.0.0'));
        await waitUntil(() => instancesIn(nacos, 'providers:com.acme.Fan:1.0.0:').length === 0, { message: 'the vanished version removed from Nacos' });
        const names = async () =>
          ((await api(url, 'GET', '/api/v1/tasks/zk-bare')).body.status.services as Array<{ service: string }>).map((s) => s.service.split('/').pop()).sort();
        await waitUntil(async () => (await names()).join() === 'providers:com.acme.Fan:2.0.0:green,providers:com.acme.Fan:3.0.0:', { message: 'the task follows its versions' });
        expect(await lookup('providers:com.acme.Fan:2.0.0:green')).toBe('10.60.4.2');
      } finally {
        await sdk.close();
      }
    });

    it('a task renaming a bare interface gathers every version and group into its one Nacos service', async () => {
      await createNode(client, `${ECHO_DIR}/${dubboNode(echoUrl('10.60.5.1', '&group=green').replace('version=1.0.0', 'version=2.0.0'))}`, Buffer.alloc(0), CreateMode.EPHEMERAL);
      await defineTask(url, 'zk-bare-renamed', 'zk', 'nacos', 'com.acme.Echo', { group: 'BARE', options: { mapping: { rename: { 'com.acme.Echo': 'echo' } } } });
      const ips = () => [...(nacos.store.getService('public', 'BARE', 'echo')?.instances.values() ?? [])].map((i) => i.ip).sort();
      // The Nacos-born copy (path nacos) is not sent back to Nacos.
      await waitUntil(() => ips().join() === '10.60.0.1,10.60.0.3,10.60.5.1', { message: 'all versions and groups in one service' });
    });
  });

  describe('Curator layout', () => {
    const springNode = (id: string, ip: string, metadata: Record<string, string>) =>
      Buffer.from(
        JSON.stringify({
          name: 'orders',
          id,
          address: ip,
          port: 8080,
          sslPort: null,
          payload: { '@class': 'org.springframework.cloud.zookeeper.discovery.ZookeeperInstance', id: 'orders', name: 'orders', metadata },
          registrationTimeUTC: Date.now(),
          serviceType: 'DYNAMIC',
          uriSpec: { parts: [{ value: 'scheme', variable: true }, { value: '://', variable: false }, { value: 'address', variable: true }, { value: ':', variable: false }, { value: 'port', variable: true }] },
        }),
      );

    it('copies a Spring Cloud instance to Nacos with its payload metadata', async () => {
      await createNode(client, '/services/orders/7f6c1a52-0d9e-4a8b-b2f1-3c5d7e9a1b24', springNode('7f6c1a52-0d9e-4a8b-b2f1-3c5d7e9a1b24', '10.70.0.1', { zone: 'a' }), CreateMode.EPHEMERAL);
      await waitUntil(() => copiesIn(nacos, 'orders').length === 1, { message: 'Spring instance copied' });
      expect(copiesIn(nacos, 'orders')[0]).toMatchObject({
        ip: '10.70.0.1',
        port: 8080,
        metadata: { zone: 'a', [MARK_ORIGIN]: 'zkc', [MARK_PATH]: 'zkc', [MARK_TASK]: 'zkc-to-nacos' },
      });
    });

    it('follows an instance updated in place', async () => {
      await zk<Stat>((cb) =>
        client.setData('/services/orders/7f6c1a52-0d9e-4a8b-b2f1-3c5d7e9a1b24', springNode('7f6c1a52-0d9e-4a8b-b2f1-3c5d7e9a1b24', '10.70.0.1', { zone: 'b' }), -1, cb),
      );
      await waitUntil(() => copiesIn(nacos, 'orders')[0]?.metadata.zone === 'b', { message: 'update copied' });
    });

    it('writes a Nacos instance as a Curator node with exactly Curator fields and the marks in payload.metadata', async () => {
      natives.push(await registerNative(() => nacos, 'orders', '10.70.1.1', 9090, { zone: 'c' }));
      const ours = async () => {
        const ids = (await children(client, '/services/orders')).filter((id) => id.startsWith('regsync-'));
        return Promise.all(ids.map(async (id) => JSON.parse((await zk<Buffer>((cb) => client.getData(`/services/orders/${id}`, cb))).toString('utf8'))));
      };
      await waitUntil(async () => (await ours()).length === 1, { message: 'Nacos instance written as a Curator node' });
      const [node] = await ours();
      expect(Object.keys(node).sort()).toEqual(['address', 'id', 'name', 'payload', 'port', 'registrationTimeUTC', 'serviceType', 'sslPort', 'uriSpec']);
      expect(node).toMatchObject({
        name: 'orders',
        address: '10.70.1.1',
        port: 9090,
        serviceType: 'DYNAMIC',
        payload: { metadata: { zone: 'c', [MARK_ORIGIN]: 'nacos', [MARK_PATH]: 'nacos', [MARK_TASK]: 'nacos-to-zkc' } },
      });
      await waitUntil(async () => (await serviceStatus(url, 'zkc-to-nacos', 'orders'))?.lastSyncAt, { message: 'forward task ran' });
      expect(instancesIn(nacos, 'orders').map((i) => i.ip).sort()).toEqual(['10.70.0.1', '10.70.1.1']);
    });

    it('reports invalid JSON by path while the rest syncs, and removes the copy when the instance goes', async () => {
      const bad = '/services/orders/broken';
      await createNode(client, bad, Buffer.from('{"name": "orders", '), CreateMode.PERSISTENT);
      await waitUntil(async () => (await serviceStatus(url, 'zkc-to-nacos', 'orders'))?.lastError?.includes(bad), { message: 'bad node reported' });
      expect(copiesIn(nacos, 'orders').map((i) => i.ip)).toEqual(['10.70.0.1']);
      await removeNode(client, '/services/orders/7f6c1a52-0d9e-4a8b-b2f1-3c5d7e9a1b24');
      await waitUntil(() => copiesIn(nacos, 'orders').length === 0, { message: 'copy removed' });
      await removeNode(client, bad);
    });
  });
});
