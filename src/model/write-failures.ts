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
