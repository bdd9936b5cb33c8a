import { summarizeWriteFailures } from '../../src/model/write-failures.js';

/** One write of an `apply` that failed. */
export interface KubernetesWriteFailure {
  op: 'create' | 'replace' | 'delete' | 'write';
  /** `services ns/name`, `endpointslices ns/name`, or `instance ip:port#cluster` for an instance that cannot be written. */
  target: string;
  error: unknown;
}

/**
 * Some writes of an `apply` failed. Every write was attempted first (one bad slice or instance must
 * not hold back the others); `failures` says which ones failed and why, `errors` holds the causes
 * as `AggregateError` does.
 */
export class KubernetesApplyError extends AggregateError {
  override readonly name = 'KubernetesApplyError';
  readonly code = 'kubernetes-apply-failed';

  constructor(
    readonly clusterId: string,
    /** `namespace/name` of the Kubernetes Service. */
    readonly service: string,
    readonly failures: readonly KubernetesWriteFailure[],
  ) {
    super(
      failures.map((f) => f.error),
      `kubernetes cluster ${clusterId}: ${failures.length} write(s) to service ${service} failed: ${summarizeWriteFailures(failures.map((f) => ({ op: f.op, what: f.target, error: f.error })))}`,
    );
  }
}
