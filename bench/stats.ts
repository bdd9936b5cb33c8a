/** Percentiles of a sample, in the sample's unit. */
export interface Percentiles {
  count: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentiles (p99 of 1,000 values is the 990th smallest); zeros for an empty sample. */
export function percentiles(values: readonly number[]): Percentiles {
  if (values.length === 0) return { count: 0, min: 0, p50: 0, p90: 0, p99: 0, max: 0, mean: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] as number;
  return {
    count: sorted.length,
    min: sorted[0] as number,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: sorted[sorted.length - 1] as number,
    mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
  };
}

/** Rounds to `digits` decimals (for JSON output that stays readable). */
export function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** `12,345` */
export function int(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

/** `1.23 s` below a minute, `2 min 5 s` above. */
export function seconds(ms: number): string {
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** `3.4 ms` below 10 ms, else whole milliseconds. */
export function millis(ms: number): string {
  return ms < 10 ? `${ms.toFixed(1)} ms` : `${Math.round(ms)} ms`;
}

/** `42%` */
export function percent(ratio: number): string {
  return `${Math.round(ratio * 100)}%`;
}

/** A plain-text table: first row is the header, columns padded to their widest cell. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, i) => (widths[i] = Math.max(widths[i] ?? 0, cell.length)));
  const line = (row: readonly string[]) => row.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join('  ').trimEnd();
  const [header, ...body] = rows;
  if (!header) return '';
  return [line(header), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}
