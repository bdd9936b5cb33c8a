import { createClient, type Client, type Stat } from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startRegsync, type RegsyncProcess } from '../support/regsync-process.js';
import { addRegistry, api, defineTask, registerNative, startFixture, stopFixture, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';
import { startZooKeeper, type ZooKeeperServer } from '../support/zookeeper.js';

function zk<T>(call: (cb: (error: unknown, value: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => call((error, value) => (error ? reject(error) : resolve(value))));
}

const ECHO = 'providers:com.acme.Echo:1.0.0:';
const DIR = '/dubbo/com.acme.Echo/providers';

/**
 * kill -9 of a `regsync up` writing into ZooKeeper: its copies are ephemeral nodes of its session,
 * which lives on until ZooKeeper times it out. The next process finds them unchanged and takes them
 * into its own session (`retain`), so they outlive the old session instead of vanishing until the
 * next full sync.
 */
describe('regsync killed and restarted, writing into ZooKeeper', () => {
  let fx: SyncFixture;
  let nacos: RunningRegistry;
  let server: ZooKeeperServer;
  let client: Client;
  let first: RegsyncProcess | undefined;
  let second: RegsyncProcess | undefined;
  let native: NativeInstance | undefined;

  /** Session owning each copy in ZooKeeper (hex), by node name. */
  const owners = async (): Promise<string[]> => {
    if (!(await zk<Stat | null>((cb) => client.exists(DIR, cb)))) return [];
    const names = await zk<string[]>((cb) => client.getChildren(DIR, cb));
    const out: string[] = [];
    for (const name of names) {
      const stat = await zk<Stat | null>((cb) => client.exists(`${DIR}/${name}`, cb));
      if (stat) out.push(stat.ephemeralOwner.toString('hex'));
    }
    return out;
  };

  beforeAll(async () => {
    fx = await startFixture();
    nacos = await addRegistry(fx, 'nacos');
    server = await startZooKeeper();
    client = createClient(server.connectString, { sessionTimeout: 10_000 });
    client.connect();
    await new Promise<void>((resolve) => client.once('connected', () => resolve()));
  });
  afterAll(async () => {
    native?.stop();
    await first?.stop();
    await second?.stop();
    client?.close();
    await server?.cleanup();
    await stopFixture(fx);
  });

  it('takes the copies over into its own session, so they outlive the killed process', async () => {
    const up = ['up', '--redis', fx.redis.url, '--listen', '127.0.0.1:0'];
    first = await startRegsync(up);
    expect((await api(first.url, 'POST', '/api/v1/clusters', { id: 'nacos', kind: 'nacos', endpoints: [nacos.endpoint] })).status).toBe(201);
    const zkCluster = {
      id: 'zk',
      kind: 'zookeeper',
      endpoints: [server.connectString],
      options: { layout: 'dubbo', sessionTimeoutMs: 15_000, connectTimeoutMs: 3_000, spinDelayMs: 200 },
    };
    expect((await api(first.url, 'POST', '/api/v1/clusters', zkCluster)).status).toBe(201);
    await defineTask(first.url, 'nz', 'nacos', 'zk', ECHO);
    native = await registerNative(() => nacos, ECHO, '10.90.0.1', 20880, { protocol: 'dubbo', interface: 'com.acme.Echo', version: '1.0.0', side: 'provider' }, 1_000);
    await waitUntil(async () => (await owners()).length === 1, { message: 'the copy in ZooKeeper' });
    const [oldSession] = await owners();

    await first.proc.kill();
    second = await startRegsync(up);
    // Taken into the new process's session while the old one still lives (15 s timeout), well
    // before a full sync (30 s) would have written it again.
    await waitUntil(async () => {
      const now = await owners();
      return now.length === 1 && now[0] !== oldSession;
    }, { timeoutMs: 20_000, message: 'the copy owned by the new session' });
    // One copy, whatever happens to the old session meanwhile.
    expect(await owners()).toHaveLength(1);
  }, 60_000);
});
