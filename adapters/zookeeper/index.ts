export { zookeeperKind } from './zookeeper-kind.js';
export { ZooKeeperAdapter, createZooKeeperAdapter, type ZooKeeperAdapterDeps, type ZooKeeperAdapterStats } from './zookeeper-adapter.js';
export {
  DEFAULT_ZOOKEEPER_OPTIONS,
  defaultRoot,
  parseZooKeeperOptions,
  parseZooKeeperEndpoint,
  type ZooKeeperAdapterOptions,
  type ZooKeeperEndpoint,
  type ZooKeeperLayoutName,
} from './zookeeper-options.js';
export { defaultClientFactory, type ZooKeeperClientFactory, type ZooKeeperClientOptions } from './zookeeper-connection.js';
export { parseDubboServiceName, formatDubboServiceName, type DubboSelector } from './dubbo-service-name.js';
export { CLUSTER_KEY } from './instance-fields.js';
export { ZooKeeperRequestError, type ZooKeeperRequestErrorCode, type ZooKeeperRequestErrorInit } from './zookeeper-request-error.js';
export { ZooKeeperApplyError, type ZooKeeperWriteFailure } from './zookeeper-apply-error.js';
export { ZooKeeperConfigError } from './zookeeper-config-error.js';
export { ZooKeeperInstanceError } from './zookeeper-instance-error.js';
export { ZooKeeperServiceNameError } from './zookeeper-service-name-error.js';
