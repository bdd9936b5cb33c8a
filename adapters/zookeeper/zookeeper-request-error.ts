/**
 * Stable reasons a call to a ZooKeeper cluster failed; callers branch on these, never on messages.
 * - `zookeeper-unavailable`: no connection within `connectTimeoutMs`, or the connection or session
 *   was lost while the request was in flight (its outcome is unknown).
 * - `zookeeper-timeout`: connected, but no answer within `operationTimeoutMs`.
 * - `zookeeper-error`: the server refused the request; `zkCode` says why (`NO_AUTH`, `NO_NODE`, ...).
 * - `zookeeper-closed`: the adapter was closed.
 */
export type ZooKeeperRequestErrorCode = 'zookeeper-unavailable' | 'zookeeper-timeout' | 'zookeeper-error' | 'zookeeper-closed';

/** What went wrong, where. */
export interface ZooKeeperRequestErrorInit {
  code: ZooKeeperRequestErrorCode;
  clusterId: string;
  /** The ZooKeeper operation: `getChildren`, `getData`, `exists`, `create`, `remove`, `setData`. */
  op: string;
  path: string;
  /** The server's (or client library's) error name, such as `NO_NODE` or `CONNECTION_LOSS`. */
  zkCode?: string | undefined;
  detail: string;
}

/**
 * One failed call to a ZooKeeper cluster. The message names the cluster, operation, path and the
 * server's own error name, and never the digest credentials.
 */
export class ZooKeeperRequestError extends Error {
  override readonly name = 'ZooKeeperRequestError';
  readonly code: ZooKeeperRequestErrorCode;
  readonly clusterId: string;
  readonly op: string;
  readonly path: string;
  readonly zkCode: string | undefined;

  constructor(init: ZooKeeperRequestErrorInit, options?: { cause?: unknown }) {
    const zkCode = init.zkCode === undefined ? '' : ` (${init.zkCode})`;
    super(`zookeeper cluster ${init.clusterId}: ${init.op} ${init.path} failed${zkCode}: ${init.detail}`, options);
    this.code = init.code;
    this.clusterId = init.clusterId;
    this.op = init.op;
    this.path = init.path;
    this.zkCode = init.zkCode;
  }
}
