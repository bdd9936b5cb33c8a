import { summarizeWriteFailures } from '../../src/model/write-failures.js';

/** One write of an `apply` that failed. */
export interface ZooKeeperWriteFailure {
  op: 'upsert' | 'remove';
  /** `ip:port#cluster`, the instance's identity inside the service. */
  instance: string;
  error: unknown;
}

/**
 * Some writes of an `apply` failed. Every write was attempted first (one bad instance must not hold
 * back the others); `failures` says which ones failed and why, `errors` holds the causes as
 * `AggregateError` does.
 */
export class ZooKeeperApplyError extends AggregateError {
  override readonly name = 'ZooKeeperApplyError';
  readonly code = 'zookeeper-apply-failed';

  constructor(
    readonly clusterId: string,
    /** The service's name as the task gives it. */
    readonly service: string,
    readonly failures: readonly ZooKeeperWriteFailure[],
    readonly attempted: number,
  ) {
    super(
      failures.map((f) => f.error),
      `zookeeper cluster ${clusterId}: ${failures.length} of ${attempted} writes to ${service} failed: ${summarizeWriteFailures(failures.map((f) => ({ op: f.op, what: f.instance, error: f.error })))}`,
    );
  }
}
