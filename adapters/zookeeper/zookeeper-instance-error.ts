/**
 * An instance that cannot be written in the cluster's layout: a Dubbo provider URL needs `protocol`
 * and `interface` in the metadata, matching the service; metadata keys and values must fit in a URL
 * query. Raised per instance inside `apply` (and reported through {@link ZooKeeperApplyError}), so
 * the other instances of the plan are still written.
 */
export class ZooKeeperInstanceError extends Error {
  override readonly name = 'ZooKeeperInstanceError';
  readonly code = 'zookeeper-instance-unwritable';

  constructor(
    /** `ip:port#cluster`. */
    readonly instance: string,
    readonly service: string,
    readonly layout: 'dubbo' | 'curator',
    detail: string,
  ) {
    super(`cannot write ${instance} as a ${layout} instance of ${service}: ${detail}`);
  }
}
