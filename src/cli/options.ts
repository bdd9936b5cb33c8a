import { InvalidArgumentError } from 'commander';

/** Parses a TCP port (0 = any free port). */
export function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('expected a port from 0 to 65535');
  return n;
}

/** Parses a positive duration in milliseconds; accepts a plain number or a `ms`/`s` suffix. */
export function parseDuration(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s)?$/.exec(value.trim());
  if (!m) throw new InvalidArgumentError('expected a duration such as 1500, 1500ms or 15s');
  const n = Number(m[1]) * (m[2] === 's' ? 1000 : 1);
  if (n <= 0) throw new InvalidArgumentError('expected a duration above zero');
  return Math.round(n);
}

/** Collects a repeatable option into a list. */
export function collect(value: string, previous: string[] = []): string[] {
  return [...previous, value];
}

/** Parses a positive integer. */
export function parsePositiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('expected a positive integer');
  return n;
}
