/**
 * A cluster definition its kind cannot work with: an unknown kind, a malformed endpoint, an option
 * that is unknown or of the wrong type. Thrown by a kind's `validate` (see `KindDescriptor`), which
 * the API runs before it stores a cluster, so that a typo is answered at once instead of failing
 * when a worker builds the adapter.
 */
export class ClusterConfigError extends Error {
  override readonly name = 'ClusterConfigError';
  readonly code = 'cluster-config-invalid';

  constructor(
    readonly clusterId: string,
    /** The offending setting, as a path into the cluster: `kind`, `endpoints`, `username/password`, `options.<name>`. */
    readonly setting: string,
    /** What is wrong with it, for a human. */
    readonly detail: string,
    options?: ErrorOptions,
  ) {
    super(`cluster ${clusterId}: invalid ${setting}: ${detail}`, options);
  }
}
