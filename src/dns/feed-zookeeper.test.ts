import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { zookeeperKind } from '../../adapters/zookeeper/index.js';
import { startZooKeeper, type ZooKeeperServer } from '../../test/support/zookeeper.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { silentLogger } from '../log.js';
import type { RegistryAdapter } from '../model/adapter.js';
import type { ClusterSpec, Instance, ServiceKey } from '../model/types.js';
import { DnsCatalogue } from './catalogue.js';
import { DnsFeed } from './feed.js';

const logger = silentLogger();
const echo: ServiceKey = { namespace: 'public', group: 'DEFAULT_GROUP', name: 'providers:com.acme.Echo:1.0.0:' };
const provider = (ip: string): Instance => ({
  ip,
  port: 20880,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: { protocol: 'dubbo', interface: 'com.acme.Echo', version: '1.0.0' },
});

/** The feed is kind-agnostic: Dubbo providers in ZooKeeper are served through the ZooKeeper adapter's own watches. */
describe('DnsFeed over ZooKeeper', () => {
  let zk: ZooKeeperServer;
  const adapters: RegistryAdapter[] = [];
  beforeAll(async () => {
    zk = await startZooKeeper();
  });
  afterAll(async () => {
    for (const a of adapters) await a.close();
    await zk?.cleanup();
  });

  it('serves Dubbo providers under their mapped name, SRV by protocol, and follows them as they come and go', async () => {
    const spec: ClusterSpec = { id: 'zk', kind: 'zookeeper', endpoints: [zk.connectString], labels: {}, options: { layout: 'dubbo', root: '/dns-feed', sessionTimeoutMs: 4_000 } };
    const app = zookeeperKind.create(spec, { logger });
    adapters.push(app);
    await app.apply(echo, { upsert: [provider('10.80.0.1')], remove: [] });
    const catalogue = new DnsCatalogue({ zone: 'regsync.internal' });
    const feed = new DnsFeed({ catalogue, clusters: async () => [spec], adapter: (s) => zookeeperKind.create(s, { logger }), logger });
    try {
      await feed.start();
      const node = catalogue.find('com-acme-echo-1-0-0.svc.regsync.internal');
      expect(node?.kind === 'service' ? node.service.instances.map((i) => i.ip) : []).toEqual(['10.80.0.1']);
      expect(catalogue.find('_dubbo._tcp.com-acme-echo-1-0-0.svc.regsync.internal')?.kind).toBe('port');

      await app.apply(echo, { upsert: [provider('10.80.0.2')], remove: [] });
      await waitUntil(() => catalogue.service(echo)?.instances.length === 2, { message: 'the second provider served' });
      await app.apply(echo, { upsert: [], remove: [provider('10.80.0.1'), provider('10.80.0.2')] });
      await waitUntil(() => (catalogue.service(echo)?.instances.length ?? 0) === 0, { message: 'the providers gone' });
    } finally {
      await feed.close();
    }
  });
});
