/**
 * The summary an adapter's apply error carries: the first five failed writes with their causes,
 * then how many more. Shared so every adapter reports partial write failures the same way.
 */
export function summarizeWriteFailures(failures: ReadonlyArray<{ op: string; what: string; error: unknown }>): string {
  const shown = failures
    .slice(0, 5)
    .map((f) => `${f.op} ${f.what}: ${f.error instanceof Error ? f.error.message : String(f.error)}`)
    .join('; ');
  return failures.length > 5 ? `${shown}; and ${failures.length - 5} more` : shown;
}

/** One write of an `apply` that failed: what it was, on what, and why. */
export interface WriteFailure {
  /** The write: `register`, `create`, `delete`, ... */
  op: string;
  /** What it was written to: `instance ip:port#cluster`, `services ns/name`, ... */
  target: string;
  error: unknown;
}

/**
 * Some writes of an `apply` failed. Every write was attempted first (one bad instance must not hold
 * back the others); `failures` says which ones failed and why, `errors` holds the causes as
 * `AggregateError` does. Each adapter's apply error extends it with its own `name` and `code`.
 */
export class ApplyFailedError<F extends WriteFailure = WriteFailure> extends AggregateError {
  constructor(
    /** The kind, as messages name it: `consul cluster east: ...`. */
    kind: string,
    readonly clusterId: string,
    readonly service: string,
    readonly failures: readonly F[],
  ) {
    super(
      failures.map((f) => f.error),
      `${kind} cluster ${clusterId}: ${failures.length} write(s) to service ${service} failed: ${summarizeWriteFailures(failures.map((f) => ({ op: f.op, what: f.target, error: f.error })))}`,
    );
  }
}
