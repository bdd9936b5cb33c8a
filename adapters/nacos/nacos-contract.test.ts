import { pino } from 'pino';
import type { ClusterSpec } from '../../src/model/index.js';
import { startRegistry, type RegistryOptions, type RunningRegistry } from '../../src/registry/index.js';
import { describeAdapterContract } from '../../test/support/adapter-contract.js';
import { createNacosAdapter } from './nacos-adapter.js';

const silent = pino({ level: 'silent' });

const clusterSpec = (endpoint: string, apiVersion: 'v1' | 'v3' | 'grpc', grpcPort?: number): ClusterSpec => ({
  id: 'nacos-contract',
  kind: 'nacos',
  endpoints: [endpoint],
  labels: {},
  // Short polls: the v3 watch and the service lists poll.
  options: { apiVersion, pollIntervalMs: 200, serviceListPollIntervalMs: 200, requestTimeoutMs: 2_000, ...(grpcPort === undefined ? {} : { grpcPort }) },
});

const registryOptions: RegistryOptions = { namespaces: [{ id: 'dev', name: 'dev', description: '' }], grpc: { pushMergeWindowMs: 20 } };

for (const apiVersion of ['v1', 'v3', 'grpc'] as const) {
  describeAdapterContract(`NacosAdapter over ${apiVersion}`, async () => {
    let registry: RunningRegistry = await startRegistry({ ...registryOptions, port: 0 });
    const { port, endpoint, grpcPort } = registry;
    return {
      connect: () => createNacosAdapter(clusterSpec(endpoint, apiVersion, grpcPort), { logger: silent }),
      async connectDead() {
        const gone = await startRegistry({ port: 0 });
        await gone.close();
        return createNacosAdapter(clusterSpec(gone.endpoint, apiVersion, gone.grpcPort), { logger: silent });
      },
      async outage() {
        await registry.close();
        // The same ports again: adapters keep their endpoint. What the registry held is gone.
        return async () => {
          registry = await startRegistry({ ...registryOptions, port, grpcPort });
        };
      },
      scopes: [
        { namespace: 'public', group: 'DEFAULT_GROUP' },
        { namespace: 'dev', group: 'CONTRACT' },
      ],
      serviceName: (tag) => `contract-${tag}`,
      copyMetadata: () => ({}),
      // The v1 list and gRPC reads leave disabled instances out, as Nacos' own clients see them.
      keeps: apiVersion !== 'v3' ? ['weight', 'healthy', 'ephemeral', 'cluster'] : ['weight', 'healthy', 'enabled', 'ephemeral', 'cluster'],
      // The registry refuses a cluster name with an underscore in a single register, as Nacos does;
      // a batch takes underscores, not dots.
      unwritable: (base, n) => ({ ...base, cluster: apiVersion === 'grpc' ? `bad.${n}` : `bad_${n}` }),
      close: () => registry.close(),
    };
  });
}
