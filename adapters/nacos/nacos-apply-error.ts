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
    const shown = failures
      .slice(0, 5)
      .map((f) => `${f.op} ${f.instance}: ${f.error instanceof Error ? f.error.message : String(f.error)}`)
      .join('; ');
    const more = failures.length > 5 ? `; and ${failures.length - 5} more` : '';
    super(
      failures.map((f) => f.error),
      `nacos cluster ${clusterId}: ${failures.length} of ${attempted} writes to ${service} failed: ${shown}${more}`,
    );
  }
}
