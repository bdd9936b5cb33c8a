import { pino } from 'pino';
import type { ClusterSpec } from '../../src/model/index.js';
import { describeAdapterContract } from '../../test/support/adapter-contract.js';
import { startK8sApiServer } from '../../test/support/k8s-api-server.js';
import { createKubernetesAdapter } from './kubernetes-adapter.js';

const silent = pino({ level: 'silent' });

const spec: ClusterSpec = {
  id: 'k8s-contract',
  kind: 'kubernetes',
  endpoints: [],
  labels: {},
  options: { namespaceMap: { default: 'public' }, backoffInitialMs: 20, backoffMaxMs: 200, initialListTimeoutMs: 2_000 },
};

describeAdapterContract('KubernetesAdapter', async () => {
  const server = await startK8sApiServer({ namespaces: ['default', 'team-a'] });
  return {
    connect: () => createKubernetesAdapter(spec, { logger: silent, kubeConfig: () => server.kubeConfig() }),
    async connectDead() {
      const gone = await startK8sApiServer();
      await gone.close();
      return createKubernetesAdapter(spec, { logger: silent, kubeConfig: () => gone.kubeConfig() });
    },
    async outage() {
      server.setUnavailable(true);
      return async () => server.setUnavailable(false);
    },
    // `default` is exported as `public`; other namespaces as themselves.
    scopes: [
      { namespace: 'public', group: 'DEFAULT_GROUP' },
      { namespace: 'team-a', group: 'DEFAULT_GROUP' },
    ],
    serviceName: (tag) => `contract-${tag}`,
    copyMetadata: () => ({}),
    keeps: ['weight', 'healthy', 'enabled', 'ephemeral', 'cluster'],
    // An EndpointSlice holds IP addresses and host names only.
    unwritable: (base, n) => ({ ...base, ip: `not an address ${n}` }),
    close: () => server.close(),
  };
});
