/**
 * A service name the cluster's layout cannot map to a ZooKeeper path: for Dubbo anything but
 * `providers:{interface}[:{version}[:{group}]]` or a bare interface name; for Curator a name that is
 * not a single path segment. `listInstances` and `apply` reject with it; a watch on such a name
 * watches nothing.
 */
export class ZooKeeperServiceNameError extends Error {
  override readonly name = 'ZooKeeperServiceNameError';
  readonly code = 'zookeeper-service-name-invalid';

  constructor(
    readonly clusterId: string,
    readonly serviceName: string,
    readonly layout: 'dubbo' | 'curator',
    detail: string,
  ) {
    super(`zookeeper cluster ${clusterId}: service name ${JSON.stringify(serviceName)} does not fit the ${layout} layout: ${detail}`);
  }
}
