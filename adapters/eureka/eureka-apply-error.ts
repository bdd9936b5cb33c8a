import { summarizeWriteFailures } from '../../src/model/write-failures.js';

/** One write of an `apply` that failed. */
export interface EurekaWriteFailure {
  op: 'register' | 'cancel';
  /** `instance ip:port#cluster`. */
  target: string;
  error: unknown;
}

/** Some writes of an `apply` failed; every write was attempted first. */
export class EurekaApplyError extends AggregateError {
  override readonly name = 'EurekaApplyError';
  readonly code = 'eureka-apply-failed';

  constructor(
    readonly clusterId: string,
    readonly service: string,
    readonly failures: readonly EurekaWriteFailure[],
  ) {
    super(
      failures.map((f) => f.error),
      `eureka cluster ${clusterId}: ${failures.length} write(s) to service ${service} failed: ${summarizeWriteFailures(failures.map((f) => ({ op: f.op, what: f.target, error: f.error })))}`,
    );
  }
}
