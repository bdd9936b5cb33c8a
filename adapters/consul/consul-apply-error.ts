import { ApplyFailedError } from '../../src/model/write-failures.js';

/** One write of an `apply` that failed. */
export interface ConsulWriteFailure {
  op: 'register' | 'deregister';
  /** `instance ip:port#cluster`. */
  target: string;
  error: unknown;
}

/** Some writes of an `apply` to a Consul cluster failed; every write was attempted first. */
export class ConsulApplyError extends ApplyFailedError<ConsulWriteFailure> {
  override readonly name = 'ConsulApplyError';
  readonly code = 'consul-apply-failed';

  constructor(clusterId: string, service: string, failures: readonly ConsulWriteFailure[]) {
    super('consul', clusterId, service, failures);
  }
}
