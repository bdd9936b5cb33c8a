import { summarizeWriteFailures } from '../../src/model/write-failures.js';

/** One write of an `apply` that failed. */
export interface ConsulWriteFailure {
  op: 'register' | 'deregister';
  /** `instance ip:port#cluster`. */
  target: string;
  error: unknown;
}

/**
 * Some writes of an `apply` failed. Every write was attempted first (one copy Consul refuses must
 * not hold back the others); `failures` says which ones failed and why.
 */
export class ConsulApplyError extends AggregateError {
  override readonly name = 'ConsulApplyError';
  readonly code = 'consul-apply-failed';

  constructor(
    readonly clusterId: string,
    readonly service: string,
    readonly failures: readonly ConsulWriteFailure[],
  ) {
    super(
      failures.map((f) => f.error),
      `consul cluster ${clusterId}: ${failures.length} write(s) to service ${service} failed: ${summarizeWriteFailures(failures.map((f) => ({ op: f.op, what: f.target, error: f.error })))}`,
    );
  }
}
