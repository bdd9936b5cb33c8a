import { ApplyFailedError } from '../../src/model/write-failures.js';

/** One write of an `apply` that failed. */
export interface EurekaWriteFailure {
  op: 'register' | 'cancel';
  /** `instance ip:port#cluster`. */
  target: string;
  error: unknown;
}

/** Some writes of an `apply` to a Eureka cluster failed; every write was attempted first. */
export class EurekaApplyError extends ApplyFailedError<EurekaWriteFailure> {
  override readonly name = 'EurekaApplyError';
  readonly code = 'eureka-apply-failed';

  constructor(clusterId: string, service: string, failures: readonly EurekaWriteFailure[]) {
    super('eureka', clusterId, service, failures);
  }
}
