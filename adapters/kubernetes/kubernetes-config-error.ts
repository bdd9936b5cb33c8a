/**
 * A cluster definition the Kubernetes adapter cannot work with (an option of the wrong type, a
 * namespace map that is not one-to-one, a kubeconfig that cannot be read or lacks the context).
 * Thrown by the factory, before anything connects, so that a typo fails loudly instead of at the
 * first sync.
 */
export class KubernetesConfigError extends Error {
  override readonly name = 'KubernetesConfigError';
  readonly code = 'kubernetes-config-invalid';

  constructor(
    readonly clusterId: string,
    /** The offending setting: `kind`, `kubeconfig`, or `options.<name>`. */
    readonly setting: string,
    /** What is wrong with it, without the cluster and setting (the API's messages name those themselves). */
    readonly detail: string,
  ) {
    super(`kubernetes cluster ${clusterId}: invalid ${setting}: ${detail}`);
  }
}
