import { DEFAULT_GROUP, MAX_WARMUP_SECONDS, type ClusterSpec } from '../../src/model/index.js';
import { KubernetesConfigError } from './kubernetes-config-error.js';
import { isNamespaceName } from './kube-names.js';

/** Where a Kubernetes namespace lands among regsync's service keys. */
export interface NamespaceTarget {
  namespace: string;
  group: string;
}

/**
 * Kubernetes settings read from `ClusterSpec.options`, every one with a default. Unknown keys are
 * ignored (other versions of regsync may know more), wrong types are refused.
 */
export interface KubernetesAdapterOptions {
  /** Path of a kubeconfig file. Absent: the in-cluster config (service account of the pod). */
  kubeconfig: string | undefined;
  /** Context of the kubeconfig to use; default its `current-context`. */
  context: string | undefined;
  /** Namespaces read from and written to; `*` for all. Default `['*']`. */
  allowNamespaces: string[];
  /** Namespaces never read from nor written to; wins over `allowNamespaces`; `*` denies all. */
  denyNamespaces: string[];
  /**
   * Kubernetes namespace -> regsync namespace (and group). Namespaces not listed map to the regsync
   * namespace of the same name and `group`. Must be one-to-one.
   */
  namespaceMap: Record<string, NamespaceTarget>;
  /** Group of the service keys of namespaces `namespaceMap` does not give one. Default `DEFAULT_GROUP`. */
  group: string;
  /** Export Services without the `regsync.io/sync` annotation (opt-out, default true) or not (opt-in, false). */
  syncByDefault: boolean;
  /** Service port exported when a Service has no `regsync.io/port` annotation; absent: the first port. */
  portName: string | undefined;
  /** `ephemeral` of the instances read from Kubernetes (copies in Nacos then need the heartbeat proxy). Default true. */
  ephemeral: boolean;
  /** Endpoints per EndpointSlice written. Default 100 (as the EndpointSlice controller). */
  maxEndpointsPerSlice: number;
  /** Services written are headless (`clusterIP: None`, DNS answers the instance addresses) instead of ClusterIP. Default false. */
  headless: boolean;
  /** Per API request (not watches). Default 10 s. */
  requestTimeoutMs: number;
  /** Asked of the server for every watch (it then ends the watch, which is resumed at once). Default 300. */
  watchTimeoutSeconds: number;
  /** How long a read waits for the first full list of Services and EndpointSlices. Default 30 s. */
  initialListTimeoutMs: number;
  /** First and longest pause before a failed list or watch is retried (doubling in between). */
  backoffInitialMs: number;
  backoffMaxMs: number;
  /** Attempts of one `apply` that meets write conflicts (another writer in between). Default 5. */
  conflictAttempts: number;
  /**
   * Seconds removals wait after the API server was unreachable or dropped sharply (see
   * `KindDescriptor.warmupMs`). Default 40: the node monitor grace period, by which kubelets have
   * reported their pods again after an API server or etcd restore, and the EndpointSlice controller
   * has rebuilt the slices from them.
   */
  warmupSeconds: number;
}

/** What an empty `options` means; exported so that the API and docs can show the defaults. */
export const DEFAULT_KUBERNETES_OPTIONS: KubernetesAdapterOptions = {
  kubeconfig: undefined,
  context: undefined,
  allowNamespaces: ['*'],
  denyNamespaces: ['kube-system', 'kube-public', 'kube-node-lease'],
  namespaceMap: {},
  group: DEFAULT_GROUP,
  syncByDefault: true,
  portName: undefined,
  ephemeral: true,
  maxEndpointsPerSlice: 100,
  headless: false,
  requestTimeoutMs: 10_000,
  watchTimeoutSeconds: 300,
  initialListTimeoutMs: 30_000,
  backoffInitialMs: 500,
  backoffMaxMs: 30_000,
  conflictAttempts: 5,
  warmupSeconds: 40,
};

/** Reads and checks the Kubernetes options of a cluster; throws {@link KubernetesConfigError} on the first bad one. */
export function parseKubernetesOptions(spec: Pick<ClusterSpec, 'id' | 'options'>): KubernetesAdapterOptions {
  const raw = spec.options ?? {};
  const fail = (name: string, detail: string): never => {
    throw new KubernetesConfigError(spec.id, `options.${name}`, detail);
  };
  const d = DEFAULT_KUBERNETES_OPTIONS;
  const int = (name: keyof KubernetesAdapterOptions, min: number, max: number): number => {
    const value = raw[name];
    if (value === undefined) return d[name] as number;
    const n = typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
      return fail(name, `expected an integer from ${min} to ${max}, got ${JSON.stringify(value)}`);
    }
    return n;
  };
  const bool = (name: keyof KubernetesAdapterOptions): boolean => {
    const value = raw[name] ?? d[name];
    if (typeof value !== 'boolean') return fail(name, `expected true or false, got ${JSON.stringify(value)}`);
    return value;
  };
  const text = (name: keyof KubernetesAdapterOptions): string | undefined => {
    const value = raw[name];
    if (value === undefined) return d[name] as string | undefined;
    if (typeof value !== 'string' || value === '') return fail(name, `expected a non-empty string, got ${JSON.stringify(value)}`);
    return value;
  };
  const namespaces = (name: 'allowNamespaces' | 'denyNamespaces'): string[] => {
    const value = raw[name] ?? d[name];
    if (!Array.isArray(value) || !value.every((n) => typeof n === 'string' && (n === '*' || isNamespaceName(n)))) {
      return fail(name, `expected a list of namespace names or *, got ${JSON.stringify(value)}`);
    }
    return [...(value as string[])];
  };

  const group = text('group') as string;
  const rawMap = raw.namespaceMap ?? {};
  if (typeof rawMap !== 'object' || rawMap === null || Array.isArray(rawMap)) {
    fail('namespaceMap', `expected an object of kubernetes namespace -> namespace or {namespace, group}, got ${JSON.stringify(rawMap)}`);
  }
  const namespaceMap: Record<string, NamespaceTarget> = {};
  for (const [from, to] of Object.entries(rawMap as Record<string, unknown>)) {
    if (!isNamespaceName(from)) fail('namespaceMap', `${JSON.stringify(from)} is not a kubernetes namespace name`);
    if (typeof to === 'string' && to !== '') {
      namespaceMap[from] = { namespace: to, group };
      continue;
    }
    const target = to as { namespace?: unknown; group?: unknown } | null;
    const ns = target?.namespace ?? from;
    const g = target?.group ?? group;
    if (typeof target !== 'object' || target === null || typeof ns !== 'string' || ns === '' || typeof g !== 'string' || g === '') {
      fail('namespaceMap', `${from}: expected a namespace or {namespace, group}, got ${JSON.stringify(to)}`);
    }
    namespaceMap[from] = { namespace: ns as string, group: g as string };
  }

  const options: KubernetesAdapterOptions = {
    kubeconfig: text('kubeconfig'),
    context: text('context'),
    allowNamespaces: namespaces('allowNamespaces'),
    denyNamespaces: namespaces('denyNamespaces'),
    namespaceMap,
    group,
    syncByDefault: bool('syncByDefault'),
    portName: text('portName'),
    ephemeral: bool('ephemeral'),
    maxEndpointsPerSlice: int('maxEndpointsPerSlice', 1, 1000),
    headless: bool('headless'),
    requestTimeoutMs: int('requestTimeoutMs', 1, 600_000),
    watchTimeoutSeconds: int('watchTimeoutSeconds', 1, 86_400),
    initialListTimeoutMs: int('initialListTimeoutMs', 1, 3_600_000),
    backoffInitialMs: int('backoffInitialMs', 1, 3_600_000),
    backoffMaxMs: int('backoffMaxMs', 1, 3_600_000),
    conflictAttempts: int('conflictAttempts', 1, 100),
    warmupSeconds: int('warmupSeconds', 0, MAX_WARMUP_SECONDS),
  };
  if (options.backoffMaxMs < options.backoffInitialMs) fail('backoffMaxMs', 'must not be shorter than backoffInitialMs');
  return options;
}
