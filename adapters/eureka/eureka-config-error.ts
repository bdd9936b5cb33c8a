/**
 * A cluster definition the Eureka adapter cannot work with (an option of the wrong type, an
 * endpoint that is no host:port). Thrown before anything connects.
 */
export class EurekaConfigError extends Error {
  override readonly name = 'EurekaConfigError';
  readonly code = 'eureka-config-invalid';

  constructor(
    readonly clusterId: string,
    /** The offending setting: `endpoints`, `password`, or `options.<name>`. */
    readonly setting: string,
    /** What is wrong with it, without the cluster and setting. */
    readonly detail: string,
  ) {
    super(`eureka cluster ${clusterId}: invalid ${setting}: ${detail}`);
  }
}
