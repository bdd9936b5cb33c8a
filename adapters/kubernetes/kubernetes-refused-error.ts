import { WriteRefusedError } from '../../src/model/index.js';

/** Why regsync refuses to write a service into Kubernetes. */
export type KubernetesRefusedReason =
  /** A Service of that name exists and regsync did not create it: it is left alone. */
  | 'kubernetes-not-owned'
  /** The namespace is not allowed (`allowNamespaces` / `denyNamespaces`). */
  | 'kubernetes-namespace-denied'
  /** No Kubernetes namespace maps to the service's namespace and group (`namespaceMap`, `group`). */
  | 'kubernetes-namespace-unmapped';

/**
 * regsync will not write this service into the cluster, whatever it retries: an object it did not
 * create is in the way, or the cluster's options forbid the namespace. Nothing was written.
 * Retrying the same write cannot succeed until someone changes the cluster or its options.
 */
export class KubernetesRefusedError extends WriteRefusedError {
  override readonly name = 'KubernetesRefusedError';

  constructor(
    override readonly code: KubernetesRefusedReason,
    readonly clusterId: string,
    /** `namespace/name` of the Kubernetes Service, or the service key when unmapped. */
    readonly target: string,
    detail: string,
  ) {
    super(code, `kubernetes cluster ${clusterId}: ${target}: ${detail}`);
  }
}
