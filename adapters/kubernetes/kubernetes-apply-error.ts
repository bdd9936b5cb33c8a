import { ApplyFailedError } from '../../src/model/write-failures.js';

/** One write of an `apply` that failed. */
export interface KubernetesWriteFailure {
  op: 'create' | 'replace' | 'delete' | 'write';
  /** `services ns/name`, `endpointslices ns/name`, or `instance ip:port#cluster` for an instance that cannot be written. */
  target: string;
  error: unknown;
}

/** Some writes of an `apply` to a Kubernetes cluster failed; every write was attempted first. */
export class KubernetesApplyError extends ApplyFailedError<KubernetesWriteFailure> {
  override readonly name = 'KubernetesApplyError';
  readonly code = 'kubernetes-apply-failed';

  constructor(
    clusterId: string,
    /** `namespace/name` of the Kubernetes Service. */
    service: string,
    failures: readonly KubernetesWriteFailure[],
  ) {
    super('kubernetes', clusterId, service, failures);
  }
}
