import { pino } from 'pino';
import type { ClusterSpec } from '../../src/model/index.js';
import { describeAdapterContract } from '../../test/support/adapter-contract.js';
import { startConsulServer } from '../../test/support/consul-server.js';
import { freePort } from '../../test/support/ports.js';
import { createConsulAdapter } from './consul-adapter.js';

const silent = pino({ level: 'silent' });

const specOf = (endpoint: string): ClusterSpec => ({
  id: 'consul-contract',
  kind: 'consul',
  endpoints: [endpoint],
  labels: {},
  options: { requestTimeoutMs: 2_000, backoffMaxMs: 200, blockingWaitMs: 5_000 },
});

describeAdapterContract('ConsulAdapter', async () => {
  const server = await startConsulServer();
  return {
    connect: () => createConsulAdapter(specOf(server.endpoint), { logger: silent }),
    connectDead: async () => createConsulAdapter(specOf(`127.0.0.1:${await freePort()}`), { logger: silent }),
    async outage() {
      await server.stop();
      return () => server.start();
    },
    // Consul has no namespaces (CE) nor groups: one scope.
    scopes: [{ namespace: 'public', group: 'DEFAULT_GROUP' }],
    serviceName: (tag) => `contract-${tag}`,
    copyMetadata: () => ({}),
    keeps: ['weight', 'healthy', 'enabled', 'ephemeral', 'cluster'],
    // Consul keeps meta values of at most 512 characters.
    unwritable: (base, n) => ({ ...base, metadata: { ...base.metadata, big: 'x'.repeat(512 + n) } }),
    close: () => server.close(),
  };
});
