/**
 * A cluster definition the ZooKeeper adapter cannot work with (no endpoints, a malformed endpoint,
 * an unknown layout, an option of the wrong type). Thrown by the factory, before anything connects,
 * so that a typo in a cluster file fails loudly instead of at the first sync.
 */
export class ZooKeeperConfigError extends Error {
  override readonly name = 'ZooKeeperConfigError';
  readonly code = 'zookeeper-config-invalid';

  constructor(
    readonly clusterId: string,
    /** The offending setting: `endpoints`, `username/password`, or `options.<name>`. */
    readonly setting: string,
    /** What is wrong with it, without the cluster and setting (the API's messages name those themselves). */
    readonly detail: string,
  ) {
    super(`zookeeper cluster ${clusterId}: invalid ${setting}: ${detail}`);
  }
}
