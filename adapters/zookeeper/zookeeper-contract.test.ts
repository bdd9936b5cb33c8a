import { pino } from 'pino';
import { afterAll } from 'vitest';
import type { ClusterSpec } from '../../src/model/index.js';
import { describeAdapterContract } from '../../test/support/adapter-contract.js';
import { freePort } from '../../test/support/ports.js';
import { startZooKeeper, type ZooKeeperServer } from '../../test/support/zookeeper.js';
import { createZooKeeperAdapter } from './zookeeper-adapter.js';

const silent = pino({ level: 'silent' });

const spec = (connectString: string, layout: 'dubbo' | 'curator'): ClusterSpec => ({
  id: 'zk-contract',
  kind: 'zookeeper',
  endpoints: [connectString],
  labels: {},
  options: { layout, root: `/contract-${layout}`, sessionTimeoutMs: 4_000, connectTimeoutMs: 1_500, spinDelayMs: 200 },
});

/** One ZooKeeper for both layouts (each writes under its own root), stopped once both ran. */
let shared: Promise<ZooKeeperServer> | undefined;
const useServer = () => (shared ??= startZooKeeper());
afterAll(async () => {
  await (await shared)?.cleanup();
});

const dubboInterface = (name: string) => name.split(':')[1] ?? name;

for (const layout of ['dubbo', 'curator'] as const) {
  describeAdapterContract(`ZooKeeperAdapter, ${layout} layout`, async () => {
    const server = await useServer();
    return {
      connect: () => createZooKeeperAdapter(spec(server.connectString, layout), { logger: silent }),
      connectDead: async () => createZooKeeperAdapter(spec(`127.0.0.1:${await freePort()}`, layout), { logger: silent }),
      async outage() {
        await server.stop();
        return () => server.restart();
      },
      // One namespace and one group: `*` lists every service under the defaults.
      scopes: [{ namespace: 'public', group: 'DEFAULT_GROUP' }],
      serviceName: (tag) => (layout === 'dubbo' ? `providers:com.acme.contract.${tag}:1.0.0:` : `contract-${tag}`),
      copyMetadata: (service): Record<string, string> =>
        layout === 'dubbo' ? { protocol: 'dubbo', interface: dubboInterface(service.name), version: '1.0.0' } : {},
      // ZooKeeper knows no health: a node is there or not.
      keeps: ['weight', 'enabled', 'ephemeral', 'cluster'],
      // Dubbo needs a protocol for the URL, Curator a port.
      unwritable: (base) =>
        layout === 'dubbo'
          ? { ...base, metadata: Object.fromEntries(Object.entries(base.metadata).filter(([k]) => k !== 'protocol')) }
          : { ...base, port: 0 },
      close: async () => {},
    };
  });
}
