/**
 * A cluster definition the Consul adapter cannot work with (an option of the wrong type, a user
 * name where Consul only knows tokens, a TLS file that cannot be read). Thrown before anything
 * connects, so that a typo fails loudly instead of at the first sync.
 */
export class ConsulConfigError extends Error {
  override readonly name = 'ConsulConfigError';
  readonly code = 'consul-config-invalid';

  constructor(
    readonly clusterId: string,
    /** The offending setting: `endpoints`, `username`, or `options.<name>`. */
    readonly setting: string,
    /** What is wrong with it, without the cluster and setting (the API's messages name those themselves). */
    readonly detail: string,
  ) {
    super(`consul cluster ${clusterId}: invalid ${setting}: ${detail}`);
  }
}
