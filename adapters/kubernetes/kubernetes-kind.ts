import { ClusterConfigError, kindOptions, warmupOptionSpec, type ClusterSpec, type KindDescriptor, type KindOptionSpec } from '../../src/model/index.js';
import { createKubernetesAdapter } from './kubernetes-adapter.js';
import { KubernetesConfigError } from './kubernetes-config-error.js';
import { parseKubernetesOptions, type KubernetesAdapterOptions } from './kubernetes-options.js';
import { NamespacePolicy } from './namespace-policy.js';

/** Each option's type and what it does; keyed by the options type, so that a new option without them does not compile. */
const OPTIONS: Readonly<Record<keyof KubernetesAdapterOptions, KindOptionSpec>> = {
  kubeconfig: { type: 'string', description: 'Path of a kubeconfig file on the workers; absent: the in-cluster config.' },
  context: { type: 'string', description: "Context of the kubeconfig (default its current-context)." },
  allowNamespaces: { type: 'list', description: 'Namespaces read from and written to; * for all (default).' },
  denyNamespaces: { type: 'list', description: 'Namespaces never read nor written (default kube-system, kube-public, kube-node-lease).' },
  namespaceMap: { type: 'object', description: 'Kubernetes namespace -> namespace or {namespace, group}; one-to-one.' },
  group: { type: 'string', description: 'Group of namespaces namespaceMap gives none (default DEFAULT_GROUP).' },
  syncByDefault: { type: 'boolean', description: 'Export Services without the regsync.io/sync annotation (default true).' },
  portName: { type: 'string', description: 'Service port exported without a regsync.io/port annotation (default the first).' },
  ephemeral: { type: 'boolean', description: '`ephemeral` of instances read from Kubernetes (default true).' },
  maxEndpointsPerSlice: { type: 'integer', description: 'Endpoints per EndpointSlice written (default 100).' },
  headless: { type: 'boolean', description: 'Services written are headless instead of ClusterIP (default false).' },
  requestTimeoutMs: { type: 'integer', description: 'Per API request, not watches (default 10000).' },
  watchTimeoutSeconds: { type: 'integer', description: 'Asked of the server for every watch (default 300).' },
  initialListTimeoutMs: { type: 'integer', description: 'How long a read waits for the first full lists (default 30000).' },
  backoffInitialMs: { type: 'integer', description: 'First pause before a failed list or watch is retried (default 500).' },
  backoffMaxMs: { type: 'integer', description: 'Longest pause between retries (default 30000).' },
  conflictAttempts: { type: 'integer', description: 'Attempts of one apply that meets write conflicts (default 5).' },
  warmupSeconds: warmupOptionSpec('40: the node monitor grace period, by which kubelets report their pods again and EndpointSlices are rebuilt'),
};

/**
 * The checks the adapter's constructor makes on the options. The kubeconfig itself is not read: it
 * is a file on the workers' machines, not on the API's.
 */
function validate(spec: ClusterSpec): void {
  try {
    new NamespacePolicy(spec.id, parseKubernetesOptions(spec));
  } catch (err) {
    if (err instanceof KubernetesConfigError) throw new ClusterConfigError(spec.id, err.setting, err.detail, { cause: err });
    throw err;
  }
}

/** The Kubernetes kind: Services and EndpointSlices; the API server comes from the kubeconfig, not the endpoints. */
export const kubernetesKind: KindDescriptor<'kubernetes'> = {
  name: 'kubernetes',
  label: 'Kubernetes',
  defaultPort: 443,
  usesCredentials: false,
  endpointsRequired: false,
  options: kindOptions(OPTIONS),
  validate,
  create: (spec, deps) => createKubernetesAdapter(spec, deps),
  warmupMs: (spec) => parseKubernetesOptions(spec).warmupSeconds * 1000,
  reportsRequestErrors: false,
};
