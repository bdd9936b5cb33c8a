import { createClient, CreateMode, State, type Client, type Stat } from 'node-zookeeper-client';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterSpec, Instance, ServiceKey } from '../../src/model/index.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { startZooKeeper, type ZooKeeperServer } from '../../test/support/zookeeper.js';
import { SPRING_PAYLOAD_CLASS } from './curator-instance.js';
import { encodeNodeName } from './dubbo-url.js';
import { createZooKeeperAdapter, type ZooKeeperAdapter } from './zookeeper-adapter.js';
import { ZooKeeperApplyError } from './zookeeper-apply-error.js';
import { ZooKeeperInstanceError } from './zookeeper-instance-error.js';
import { ZooKeeperRequestError } from './zookeeper-request-error.js';
import { ZooKeeperServiceNameError } from './zookeeper-service-name-error.js';

const silent = pino({ level: 'silent' });

/** Promisifies one node-zookeeper-client call. */
function zk<T>(call: (cb: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value))));
}

async function connectedClient(server: ZooKeeperServer): Promise<Client> {
  const client = createClient(server.connectString, { sessionTimeout: 4_000, spinDelay: 100, retries: 0 });
  client.connect();
  await waitUntil(() => client.getState() === State.SYNC_CONNECTED, { message: 'test client connected' });
  return client;
}

const children = async (client: Client, path: string): Promise<string[]> => {
  const stat = await zk<Stat | null>((cb) => client.exists(path, cb));
  return stat ? (await zk<string[]>((cb) => client.getChildren(path, cb))).sort() : [];
};
const statOf = (client: Client, path: string) => zk<Stat | null>((cb) => client.exists(path, cb));
const mkdirp = (client: Client, path: string) => zk<string>((cb) => client.mkdirp(path, cb));
const createNode = async (client: Client, path: string, data: Buffer, mode = CreateMode.EPHEMERAL) => {
  await mkdirp(client, path.slice(0, path.lastIndexOf('/')));
  return zk<string>((cb) => client.create(path, data, mode, cb));
};
const removeNode = (client: Client, path: string) => zk<void>((cb) => client.remove(path, -1, (e) => cb(e, undefined)));

const spec = (server: ZooKeeperServer, options: Record<string, unknown>, extra: Partial<ClusterSpec> = {}): ClusterSpec => ({
  id: 'zk-test',
  kind: 'zookeeper',
  endpoints: [server.connectString],
  labels: {},
  options: { sessionTimeoutMs: 4_000, connectTimeoutMs: 3_000, spinDelayMs: 200, ...options },
  ...extra,
});

const key = (name: string): ServiceKey => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });
const byAddress = (a: Instance, b: Instance) => a.ip.localeCompare(b.ip) || a.port - b.port;
const marks = (task = 't1') => ({ 'regsync.origin': 'nacos-a', 'regsync.path': 'nacos-a', 'regsync.task': task });

/** How one layout stores things, for the shared contract tests. */
interface LayoutFixture {
  layout: 'dubbo' | 'curator';
  /** Two services, by the name a task gives them. */
  services: [string, string];
  dir(root: string, service: string): string;
  /** Registers a native instance as the framework would; answers its path. */
  register(client: Client, root: string, service: string, ip: string, port: number, meta: Record<string, string>): Promise<string>;
  /** What listInstances answers for it. */
  expected(service: string, ip: string, port: number, meta: Record<string, string>): Instance;
  /** Metadata a copy needs to be writable in this layout (for Dubbo: protocol and interface). */
  copyMetadata(service: string): Record<string, string>;
  /** Writes a malformed node into the service's directory; answers its path. */
  malformed(client: Client, root: string, service: string): Promise<string>;
}

const instance = (over: Partial<Instance>): Instance => ({
  ip: '10.0.0.1',
  port: 1,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: {},
  ...over,
});

const dubbo: LayoutFixture = {
  layout: 'dubbo',
  services: ['providers:com.acme.Echo:1.0.0:', 'providers:com.acme.Other::blue'],
  dir: (root, service) => `${root}/${service.split(':')[1]}/providers`,
  async register(client, root, service, ip, port, meta) {
    const [, iface, version, group] = service.split(':') as [string, string, string, string];
    const params = new Map<string, string>([['interface', iface], ...Object.entries(meta)]);
    if (version) params.set('version', version);
    if (group) params.set('group', group);
    const url = `dubbo://${ip}:${port}/${iface}?${[...params].map(([k, v]) => `${k}=${v}`).join('&')}`;
    return createNode(client, `${this.dir(root, service)}/${encodeNodeName(url)}`, Buffer.from(ip));
  },
  expected(service, ip, port, meta) {
    const [, iface, version, group] = service.split(':') as [string, string, string, string];
    return instance({
      ip,
      port,
      metadata: { protocol: 'dubbo', interface: iface, ...(version ? { version } : {}), ...(group ? { group } : {}), ...meta },
    });
  },
  copyMetadata(service) {
    const [, iface, version, group] = service.split(':') as [string, string, string, string];
    return { protocol: 'dubbo', interface: iface, ...(version ? { version } : {}), ...(group ? { group } : {}) };
  },
  malformed(client, root, service) {
    return createNode(client, `${this.dir(root, service)}/not-a-dubbo-url`, Buffer.alloc(0));
  },
};

const curator: LayoutFixture = {
  layout: 'curator',
  services: ['orders', 'billing'],
  dir: (root, service) => `${root}/${service}`,
  register(client, root, service, ip, port, meta) {
    const id = `${service}-${ip}-${port}`;
    const json = {
      name: service,
      id,
      address: ip,
      port,
      sslPort: null,
      payload: { '@class': SPRING_PAYLOAD_CLASS, id: `${service}-1`, name: service, metadata: meta },
      registrationTimeUTC: 1650000000000,
      serviceType: 'DYNAMIC',
      uriSpec: { parts: [] },
    };
    return createNode(client, `${root}/${service}/${id}`, Buffer.from(JSON.stringify(json)));
  },
  expected: (_service, ip, port, meta) => instance({ ip, port, metadata: meta }),
  copyMetadata: () => ({}),
  malformed(client, root, service) {
    return createNode(client, `${root}/${service}/broken`, Buffer.from('{not json'));
  },
};

describe.each([dubbo, curator])('ZooKeeperAdapter, $layout layout (contract)', (fx) => {
  let server: ZooKeeperServer;
  let client: Client;
  const adapters: ZooKeeperAdapter[] = [];
  let n = 0;
  /** A fresh root per test, so tests never see each other's nodes. */
  const fresh = () => {
    n += 1;
    const root = `/t${n}/${fx.layout}`;
    const adapter = createZooKeeperAdapter(spec(server, { layout: fx.layout, root }), { logger: silent });
    adapters.push(adapter);
    return { root, adapter };
  };

  beforeAll(async () => {
    server = await startZooKeeper();
    client = await connectedClient(server);
  });
  afterEach(async () => {
    await Promise.all(adapters.splice(0).map((a) => a.close()));
  });
  afterAll(async () => {
    client?.close();
    await server?.cleanup();
  });

  it('lists the services under its root, in the scope asked for', async () => {
    const { root, adapter } = fresh();
    expect(await adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).toEqual([]);
    for (const service of fx.services) await fx.register(client, root, service, '10.1.0.1', 20880, {});
    const listed = await adapter.listServices({ namespace: 'dev', group: 'G' });
    expect(listed.map((s) => s.name).sort()).toEqual([...fx.services].sort());
    expect(listed.every((s) => s.namespace === 'dev' && s.group === 'G')).toBe(true);
    // ZooKeeper is one namespace and one group: `*` lists the same services under the defaults.
    for (const scope of [{ namespace: '*', group: '*' }, { namespace: '*', group: 'DEFAULT_GROUP' }, { namespace: 'public', group: '*' }]) {
      const all = await adapter.listServices(scope);
      expect(all.map((s) => s.name).sort()).toEqual([...fx.services].sort());
      expect(all.every((s) => s.namespace === 'public' && s.group === 'DEFAULT_GROUP')).toBe(true);
    }
    const half = await adapter.listServices({ namespace: 'dev', group: '*' });
    expect(half.every((s) => s.namespace === 'dev' && s.group === 'DEFAULT_GROUP')).toBe(true);
    // What a `*` task lists it can read.
    const [first] = await adapter.listServices({ namespace: '*', group: '*' });
    expect(first && (await adapter.listInstances(first))).toEqual([fx.expected(first?.name ?? '', '10.1.0.1', 20880, {})]);
  });

  it('maps every field of a listed instance, and lists nothing for a service that is not there', async () => {
    const { root, adapter } = fresh();
    const [service] = fx.services;
    await fx.register(client, root, service, '10.1.1.1', 20881, { zone: 'a', application: 'echo' });
    expect(await adapter.listInstances(key(service))).toEqual([fx.expected(service, '10.1.1.1', 20881, { zone: 'a', application: 'echo' })]);
    expect(await adapter.listInstances(key(fx.services[1]))).toEqual([]);
    expect(adapter.readIssues(key(service))).toEqual([]);
  });

  it('upserts, updates and removes its copies as ephemeral nodes of its session, leaving natives alone', async () => {
    const { root, adapter } = fresh();
    const [service] = fx.services;
    const dir = fx.dir(root, service);
    await fx.register(client, root, service, '10.1.2.1', 20880, {});
    const native = fx.expected(service, '10.1.2.1', 20880, {});
    const copy = instance({ ip: '10.1.2.9', port: 20880, weight: 3, metadata: { ...fx.copyMetadata(service), zone: 'a', ...marks() } });

    await adapter.apply(key(service), { upsert: [copy], remove: [] });
    expect((await adapter.listInstances(key(service))).sort(byAddress)).toEqual([native, copy]);
    const nodes = await children(client, dir);
    expect(nodes).toHaveLength(2);
    const copyPath = `${dir}/${nodes.find((name) => !name.includes('10.1.2.1'))}`;
    const first = await statOf(client, copyPath);
    expect(first?.ephemeralOwner.toString('hex')).toBe(adapter.stats().sessionId);

    // The same plan again writes nothing: the node is neither re-created nor rewritten.
    await adapter.apply(key(service), { upsert: [copy], remove: [] });
    const again = await statOf(client, copyPath);
    expect([again?.czxid.toString('hex'), again?.mzxid.toString('hex')]).toEqual([first?.czxid.toString('hex'), first?.mzxid.toString('hex')]);

    const updated = { ...copy, metadata: { ...copy.metadata, zone: 'b' } };
    await adapter.apply(key(service), { upsert: [updated], remove: [] });
    expect((await adapter.listInstances(key(service))).sort(byAddress)).toEqual([native, updated]);
    expect(await children(client, dir)).toHaveLength(2);

    await adapter.apply(key(service), { upsert: [], remove: [updated] });
    expect(await adapter.listInstances(key(service))).toEqual([native]);
    expect(await children(client, dir)).toHaveLength(1);
    expect(adapter.stats().ownedNodes).toBe(0);
  });

  it('takes over a copy left by an earlier session instead of doubling it', async () => {
    const { root, adapter: first } = fresh();
    const [service] = fx.services;
    const copy = instance({ ip: '10.1.3.9', port: 20880, metadata: { ...fx.copyMetadata(service), ...marks() } });
    await first.apply(key(service), { upsert: [copy], remove: [] });
    const second = createZooKeeperAdapter(spec(server, { layout: fx.layout, root }), { logger: silent });
    adapters.push(second);
    // The second adapter (a restarted regsync) sees the copy as its own already...
    expect(await second.listInstances(key(service))).toEqual([copy]);
    // ...and an upsert moves it into its own session, still one node.
    await second.apply(key(service), { upsert: [copy], remove: [] });
    const [name] = await children(client, fx.dir(root, service));
    expect((await statOf(client, `${fx.dir(root, service)}/${name}`))?.ephemeralOwner.toString('hex')).toBe(second.stats().sessionId);
    await first.close();
    expect(await second.listInstances(key(service))).toEqual([copy]);
  });

  it('retains unchanged copies left by an earlier session into its own, once, and then writes nothing', async () => {
    const { root, adapter: first } = fresh();
    const [service] = fx.services;
    const dir = fx.dir(root, service);
    const copy = instance({ ip: '10.1.3.7', port: 20880, metadata: { ...fx.copyMetadata(service), ...marks() } });
    await first.apply(key(service), { upsert: [copy], remove: [] });
    const second = createZooKeeperAdapter(spec(server, { layout: fx.layout, root }), { logger: silent });
    adapters.push(second);
    await second.retain(key(service), [copy]);
    const [name] = await children(client, dir);
    const stat = await statOf(client, `${dir}/${name}`);
    expect(stat?.ephemeralOwner.toString('hex')).toBe(second.stats().sessionId);
    await second.retain(key(service), [copy]);
    expect((await statOf(client, `${dir}/${name}`))?.czxid.toString('hex')).toBe(stat?.czxid.toString('hex'));
    await first.close();
    expect(await children(client, dir)).toEqual([name]);
    expect(second.stats().ownedNodes).toBe(1);
  });

  it('calls a watch when a node is created and when it is deleted, and again after that', async () => {
    const { root, adapter } = fresh();
    const [service] = fx.services;
    // Each call records the addresses a read right after it sees, so a call is matched to its change.
    const looks: string[][] = [];
    const unwatch = adapter.watch(key(service), () => void adapter.listInstances(key(service)).then((list) => looks.push(list.map((i) => i.ip))));
    // The directory does not exist yet: the watch waits for it. Connecting tells the watcher once.
    await waitUntil(() => looks.length >= 1, { message: 'first call after connecting' });
    const path = await fx.register(client, root, service, '10.1.4.1', 20880, {});
    await waitUntil(() => looks.some((l) => l.includes('10.1.4.1')), { message: 'watch on create' });
    const afterCreate = looks.length;
    await removeNode(client, path);
    await waitUntil(() => looks.slice(afterCreate).some((l) => !l.includes('10.1.4.1')), { message: 'watch on delete' });
    const afterDelete = looks.length;
    await fx.register(client, root, service, '10.1.4.2', 20880, {});
    await waitUntil(() => looks.slice(afterDelete).some((l) => l.includes('10.1.4.2')), { message: 'watch re-armed' });
    unwatch();
  });

  it('calls a service-list watch when a service appears, also under a root that did not exist yet', async () => {
    for (const existing of [true, false]) {
      const { root, adapter } = fresh();
      if (existing) await fx.register(client, root, fx.services[0], '10.1.5.1', 20880, {});
      let calls = 0;
      // A `*` scope watches the same services as the default one.
      adapter.watchServices(existing ? { namespace: 'public', group: 'DEFAULT_GROUP' } : { namespace: '*', group: '*' }, () => (calls += 1));
      // One call once the watches stand: the engine listed before it watched.
      await waitUntil(() => calls >= 1, { message: 'first look' });
      const seen = calls;
      await fx.register(client, root, fx.services[1], '10.1.5.2', 20880, {});
      await waitUntil(() => calls > seen, { message: `service-list watch on a new service (root existed: ${existing})` });
    }
  });

  it('does not call a service-list watch for a new instance of a known service', async () => {
    const { root, adapter } = fresh();
    const scope = { namespace: 'public', group: 'DEFAULT_GROUP' };
    await fx.register(client, root, fx.services[0], '10.1.5.5', 20880, {});
    // Each call records how many services there are right then.
    const looks: number[] = [];
    adapter.watchServices(scope, () => void adapter.listServices(scope).then((s) => looks.push(s.length)));
    await waitUntil(() => looks.length >= 1, { message: 'first look' });
    const seen = looks.length;
    let instanceCalls = 0;
    adapter.watch(key(fx.services[0]), () => (instanceCalls += 1));
    await fx.register(client, root, fx.services[0], '10.1.5.6', 20880, {});
    await waitUntil(() => instanceCalls >= 1, { message: 'instance watch' });
    await fx.register(client, root, fx.services[1], '10.1.5.7', 20880, {});
    await waitUntil(() => looks.length > seen, { message: 'service-list watch on the new service' });
    // A call for the new instance would have looked first, and seen one service (or two, twice).
    expect(looks.slice(seen)).toEqual([2]);
  });

  it('skips a malformed node next to good ones and reports it by path', async () => {
    const { root, adapter } = fresh();
    const [service] = fx.services;
    await fx.register(client, root, service, '10.1.6.1', 20880, {});
    const bad = await fx.malformed(client, root, service);
    expect(await adapter.listInstances(key(service))).toEqual([fx.expected(service, '10.1.6.1', 20880, {})]);
    const issues = adapter.readIssues(key(service));
    expect(issues).toHaveLength(1);
    expect(issues[0]).toContain(bad);
    await removeNode(client, bad);
    await adapter.listInstances(key(service));
    expect(adapter.readIssues(key(service))).toEqual([]);
  });

  it('refuses a service name the layout cannot map, in reads and writes', async () => {
    const { adapter } = fresh();
    const bad = fx.layout === 'dubbo' ? 'consumers:com.acme.Echo::' : 'a/b';
    await expect(adapter.listInstances(key(bad))).rejects.toBeInstanceOf(ZooKeeperServiceNameError);
    await expect(adapter.apply(key(bad), { upsert: [instance({})], remove: [] })).rejects.toBeInstanceOf(ZooKeeperServiceNameError);
  });

  it('rejects a read while the server is down, rather than answering empty', async () => {
    const { root, adapter } = fresh();
    const [service] = fx.services;
    await fx.register(client, root, service, '10.1.7.1', 20880, {});
    expect(await adapter.listInstances(key(service))).toHaveLength(1);
    await server.stop();
    try {
      const failure = await adapter.listInstances(key(service)).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(failure).toBeInstanceOf(ZooKeeperRequestError);
      expect((failure as ZooKeeperRequestError).code).toBe('zookeeper-unavailable');
      await expect(adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).rejects.toBeInstanceOf(ZooKeeperRequestError);
    } finally {
      await server.restart();
    }
    await waitUntil(async () => (await adapter.listInstances(key(service))).length >= 0, { timeoutMs: 30_000, message: 'reads work again' });
  });
});

describe('ZooKeeperAdapter, Dubbo specifics', () => {
  let server: ZooKeeperServer;
  let client: Client;
  let adapter: ZooKeeperAdapter;
  const root = '/dubbo';
  const url = (ip: string, query: string) => `${root}/com.acme.Echo/providers/${encodeNodeName(`dubbo://${ip}:20880/com.acme.Echo?interface=com.acme.Echo&${query}`)}`;

  beforeAll(async () => {
    server = await startZooKeeper();
    client = await connectedClient(server);
    adapter = createZooKeeperAdapter(spec(server, {}), { logger: silent });
    await createNode(client, url('10.2.0.1', 'version=1.0.0'), Buffer.alloc(0));
    await createNode(client, url('10.2.0.2', 'version=1.0.0&group=blue'), Buffer.alloc(0));
    await createNode(client, url('10.2.0.3', 'version=2.0.0'), Buffer.alloc(0));
    await createNode(client, url('10.2.0.4', 'side=provider'), Buffer.alloc(0));
  });
  afterAll(async () => {
    await adapter?.close();
    client?.close();
    await server?.cleanup();
  });

  it('names one service per version and group, and reads each one alone', async () => {
    const names = (await adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' })).map((s) => s.name);
    expect(names).toEqual(['providers:com.acme.Echo::', 'providers:com.acme.Echo:1.0.0:', 'providers:com.acme.Echo:1.0.0:blue', 'providers:com.acme.Echo:2.0.0:'].sort());
    const ips = async (name: string) => (await adapter.listInstances(key(name))).map((i) => i.ip).sort();
    expect(await ips('providers:com.acme.Echo:1.0.0:')).toEqual(['10.2.0.1']);
    expect(await ips('providers:com.acme.Echo:1.0.0:blue')).toEqual(['10.2.0.2']);
    expect(await ips('providers:com.acme.Echo::')).toEqual(['10.2.0.4']);
    // The nacos-sync forms without trailing parts read them as empty.
    expect(await ips('providers:com.acme.Echo:1.0.0')).toEqual(['10.2.0.1']);
    expect(await ips('providers:com.acme.Echo')).toEqual(['10.2.0.4']);
  });

  it('reads a bare interface name as every version and group', async () => {
    expect((await adapter.listInstances(key('com.acme.Echo'))).map((i) => i.ip).sort()).toEqual(['10.2.0.1', '10.2.0.2', '10.2.0.3', '10.2.0.4']);
  });

  it('expands a bare interface into one service per version and group, named as Dubbo consumers look them up', async () => {
    const scoped = { namespace: 'dev', group: 'G', name: 'com.acme.Echo' };
    expect(await adapter.expandService(scoped)).toEqual(
      ['providers:com.acme.Echo::', 'providers:com.acme.Echo:1.0.0:', 'providers:com.acme.Echo:1.0.0:blue', 'providers:com.acme.Echo:2.0.0:'].sort().map((name) => ({
        namespace: 'dev',
        group: 'G',
        name,
      })),
    );
    // Each expanded service reads the providers of its version and group only.
    expect((await adapter.listInstances(key('providers:com.acme.Echo:2.0.0:'))).map((i) => i.ip)).toEqual(['10.2.0.3']);
    // Any other name stands for itself, short nacos-sync forms and names the reads refuse included.
    for (const name of ['providers:com.acme.Echo:1.0.0', 'providers:com.acme.Echo', 'providers:com.acme.Echo::', 'consumers:com.acme.Echo']) {
      expect(await adapter.expandService(key(name))).toEqual([key(name)]);
    }
    expect(await adapter.expandService(key('com.acme.Nobody'))).toEqual([]);
  });

  it('calls an expansion watch when a version or group appears or vanishes, not for another provider of one it has', async () => {
    const growUrl = (ip: string, query: string) =>
      `${root}/com.acme.Grow/providers/${encodeNodeName(`dubbo://${ip}:20880/com.acme.Grow?interface=com.acme.Grow&${query}`)}`;
    const bare = key('com.acme.Grow');
    // Each call records what the expansion answers right then.
    const looks: string[][] = [];
    const unwatch = adapter.watchExpansion(bare, () => void adapter.expandService(bare).then((s) => looks.push(s.map((k) => k.name))));
    // One call once the watch stands: the engine expanded before it watched.
    await waitUntil(() => looks.length === 1, { message: 'first look' });
    expect(looks[0]).toEqual([]);
    await createNode(client, growUrl('10.2.3.1', 'version=1.0.0'), Buffer.alloc(0));
    await waitUntil(() => looks.length === 2, { message: 'a first version appears' });
    expect(looks[1]).toEqual(['providers:com.acme.Grow:1.0.0:']);
    let instanceCalls = 0;
    const unwatchService = adapter.watch(key('providers:com.acme.Grow:1.0.0:'), () => (instanceCalls += 1));
    await createNode(client, growUrl('10.2.3.2', 'version=1.0.0'), Buffer.alloc(0));
    await waitUntil(() => instanceCalls >= 1, { message: 'instance watch on a second provider of 1.0.0' });
    await createNode(client, growUrl('10.2.3.3', 'version=1.0.0&group=blue'), Buffer.alloc(0));
    await waitUntil(() => looks.length >= 3, { message: 'a group appears' });
    await removeNode(client, growUrl('10.2.3.1', 'version=1.0.0'));
    await removeNode(client, growUrl('10.2.3.2', 'version=1.0.0'));
    await waitUntil(() => looks.length >= 4, { message: 'a version vanishes' });
    // A call for the second provider of 1.0.0 would have looked too, and seen the same list again.
    expect(looks.slice(2)).toEqual([['providers:com.acme.Grow:1.0.0:', 'providers:com.acme.Grow:1.0.0:blue'], ['providers:com.acme.Grow:1.0.0:blue']]);
    unwatchService();
    unwatch();
    // Other names never change what they cover.
    let explicitCalls = 0;
    adapter.watchExpansion(key('providers:com.acme.Grow:1.0.0:'), () => (explicitCalls += 1))();
    expect(explicitCalls).toBe(0);
  });

  it('writes the instances it can and rejects with the reason for the others', async () => {
    const good = instance({ ip: '10.2.1.1', port: 20880, metadata: { protocol: 'dubbo', interface: 'com.acme.Echo', ...marks() } });
    const noProtocol = instance({ ip: '10.2.1.2', port: 20880, metadata: { interface: 'com.acme.Echo', ...marks() } });
    const noInterface = instance({ ip: '10.2.1.3', port: 20880, metadata: { protocol: 'dubbo', ...marks() } });
    const failure = await adapter.apply(key('com.acme.Echo'), { upsert: [good, noProtocol, noInterface], remove: [] }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(failure).toBeInstanceOf(ZooKeeperApplyError);
    const apply = failure as ZooKeeperApplyError;
    expect(apply.failures.map((f) => f.instance)).toEqual(['10.2.1.2:20880#DEFAULT', '10.2.1.3:20880#DEFAULT']);
    expect(apply.failures.every((f) => f.error instanceof ZooKeeperInstanceError)).toBe(true);
    expect(apply.message).toMatch(/no protocol/);
    expect(apply.message).toMatch(/no interface/);
    expect((await adapter.listInstances(key('com.acme.Echo'))).map((i) => i.ip)).toContain('10.2.1.1');
  });

  it('replaces the node of a copy whose URL changes, so one provider never shows twice', async () => {
    const service = key('providers:com.acme.Echo:1.0.0:');
    const copy = instance({ ip: '10.2.2.1', port: 20880, metadata: { protocol: 'dubbo', interface: 'com.acme.Echo', version: '1.0.0', ...marks() } });
    await adapter.apply(service, { upsert: [copy], remove: [] });
    await adapter.apply(service, { upsert: [{ ...copy, metadata: { ...copy.metadata, methods: 'echo' } }], remove: [] });
    const mine = (await children(client, `${root}/com.acme.Echo/providers`)).filter((n) => n.includes('10.2.2.1'));
    expect(mine).toHaveLength(1);
    expect(decodeURIComponent(mine[0] as string)).toContain('methods=echo');
  });
});
