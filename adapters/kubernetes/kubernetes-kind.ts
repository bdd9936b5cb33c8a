import { ClusterConfigError, type ClusterSpec, type KindDescriptor } from '../../src/model/index.js';
import { createKubernetesAdapter } from './kubernetes-adapter.js';
import { KubernetesConfigError } from './kubernetes-config-error.js';
import { parseKubernetesOptions, type KubernetesAdapterOptions } from './kubernetes-options.js';
import { NamespacePolicy } from './namespace-policy.js';

/** What each option does; keyed by the options type, so that a new option without a description does not compile. */
const OPTION_DESCRIPTIONS: Readonly<Record<keyof KubernetesAdapterOptions, string>> = {
  kubeconfig: 'Path of a kubeconfig file on the workers; absent: the in-cluster config.',
  context: "Context of the kubeconfig (default its current-context).",
  allowNamespaces: 'Namespaces read from and written to; * for all (default).',
  denyNamespaces: 'Namespaces never read nor written (default kube-system, kube-public, kube-node-lease).',
  namespaceMap: 'Kubernetes namespace -> namespace or {namespace, group}; one-to-one.',
  group: 'Group of namespaces namespaceMap gives none (default DEFAULT_GROUP).',
  syncByDefault: 'Export Services without the regsync.io/sync annotation (default true).',
  portName: 'Service port exported without a regsync.io/port annotation (default the first).',
  ephemeral: '`ephemeral` of instances read from Kubernetes (default true).',
  maxEndpointsPerSlice: 'Endpoints per EndpointSlice written (default 100).',
  headless: 'Services written are headless instead of ClusterIP (default false).',
  requestTimeoutMs: 'Per API request, not watches (default 10000).',
  watchTimeoutSeconds: 'Asked of the server for every watch (default 300).',
  initialListTimeoutMs: 'How long a read waits for the first full lists (default 30000).',
  backoffInitialMs: 'First pause before a failed list or watch is retried (default 500).',
  backoffMaxMs: 'Longest pause between retries (default 30000).',
  conflictAttempts: 'Attempts of one apply that meets write conflicts (default 5).',
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
  endpointsRequired: false,
  options: Object.entries(OPTION_DESCRIPTIONS).map(([name, description]) => ({ name, description })),
  validate,
  create: (spec, deps) => createKubernetesAdapter(spec, deps),
  reportsRequestErrors: false,
};
