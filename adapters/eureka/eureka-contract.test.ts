import { pino } from 'pino';
import type { ClusterSpec } from '../../src/model/index.js';
import { describeAdapterContract } from '../../test/support/adapter-contract.js';
import { startEurekaServer } from '../../test/support/eureka-server.js';
import { freePort } from '../../test/support/ports.js';
import { createEurekaAdapter } from './eureka-adapter.js';

const silent = pino({ level: 'silent' });

const specOf = (endpoint: string): ClusterSpec => ({
  id: 'eureka-contract',
  kind: 'eureka',
  endpoints: [endpoint],
  labels: {},
  // Reads are live on the test server; changes are fetched often.
  options: { requestTimeoutMs: 2_000, pollIntervalMs: 100, readCacheMs: 0 },
});

describeAdapterContract('EurekaAdapter', async () => {
  const server = await startEurekaServer();
  return {
    connect: () => createEurekaAdapter(specOf(server.endpoint), { logger: silent }),
    connectDead: async () => createEurekaAdapter(specOf(`127.0.0.1:${await freePort()}`), { logger: silent }),
    async outage() {
      await server.stop();
      return () => server.start();
    },
    // Eureka has no namespaces nor groups: one scope.
    scopes: [{ namespace: 'public', group: 'DEFAULT_GROUP' }],
    serviceName: (tag) => `contract-${tag}`,
    copyMetadata: () => ({}),
    keeps: ['weight', 'healthy', 'enabled', 'ephemeral', 'cluster'],
    // Eureka answers 400 "Missing hostname" to an instance without an address.
    unwritable: (base, n) => ({ ...base, ip: '', port: 20_000 + n }),
    close: () => server.close(),
  };
});
