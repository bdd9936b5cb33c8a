import { summarizeWriteFailures } from '../../src/model/write-failures.js';

/** One write of an `apply` that failed. */
export interface NacosWriteFailure {
  op: 'register' | 'deregister';
  /** `ip:port#cluster`, the instance's identity inside the service. */
  instance: string;
  error: unknown;
}

/**
 * Some writes of an `apply` failed. Every write was attempted first (one bad instance must not hold
 * back the others); `failures` says which ones failed and why, `errors` holds the causes as
 * `AggregateError` does.
 */
export class NacosApplyError extends AggregateError {
  override readonly name = 'NacosApplyError';
  readonly code = 'nacos-apply-failed';

  constructor(
    readonly clusterId: string,
    /** `namespace/group@@name`. */
    readonly service: string,
    readonly failures: readonly NacosWriteFailure[],
    readonly attempted: number,
  ) {
    super(
      failures.map((f) => f.error),
      `nacos cluster ${clusterId}: ${failures.length} of ${attempted} writes to ${service} failed: ${summarizeWriteFailures(failures.map((f) => ({ op: f.op, what: f.instance, error: f.error })))}`,
    );
  }
}
