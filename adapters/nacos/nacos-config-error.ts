/**
 * A cluster definition the Nacos adapter cannot work with (no endpoints, a malformed endpoint, an
 * option of the wrong type). Thrown by the factory, before anything connects, so that a typo in a
 * cluster file fails loudly instead of at the first sync.
 */
export class NacosConfigError extends Error {
  override readonly name = 'NacosConfigError';
  readonly code = 'nacos-config-invalid';

  constructor(
    readonly clusterId: string,
    /** The offending setting: `endpoints`, or `options.<name>`. */
    readonly setting: string,
    /** What is wrong with it, without the cluster and setting (the API's messages name those themselves). */
    readonly detail: string,
  ) {
    super(`nacos cluster ${clusterId}: invalid ${setting}: ${detail}`);
  }
}
