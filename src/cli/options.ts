import { readFileSync } from 'node:fs';
import { InvalidArgumentError } from 'commander';

/** Parses a TCP port (0 = any free port). */
export function parsePort(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('expected a port from 0 to 65535');
  return n;
}

const DURATION_UNITS: Record<string, number> = { h: 3_600_000, m: 60_000, s: 1_000, ms: 1 };
const DURATION_ORDER = ['h', 'm', 's', 'ms'];
/** The longest timer Node can arm (about 24.8 days); a longer duration would fire at once. */
const MAX_DURATION_MS = 2 ** 31 - 1;
const DURATION_EXAMPLES = 'such as 1500ms, 15s, 2m, 1h or 1m30s';

/**
 * Parses a positive duration into milliseconds: one or more `<number><unit>` parts with units `h`,
 * `m`, `s`, `ms`, largest first (`1m30s`, `1.5s`, `250ms`). A bare number is refused rather than
 * read in some unit, as `--unhealthy-after 15` is as likely meant as seconds as it is as ms
 * (flags that take plain milliseconds say so in their name, as `--lease-ttl-ms`). Runs in time
 * linear in the input: one sticky regular expression without nested repetition, token by token.
 */
export function parseDuration(value: string): number {
  const text = value.trim();
  if (/^\d+(?:\.\d+)?$/.test(text)) {
    throw new InvalidArgumentError(`a duration needs a unit: ${text}ms, ${text}s, ${text}m or ${text}h (${DURATION_EXAMPLES})`);
  }
  if (text.length === 0) throw new InvalidArgumentError(`expected a duration ${DURATION_EXAMPLES}`);
  const part = /(\d+(?:\.\d+)?)(ms|h|m|s)/y;
  let ms = 0;
  let last = -1;
  while (part.lastIndex < text.length) {
    const m = part.exec(text);
    const unit = m?.[2];
    const rank = unit === undefined ? -1 : DURATION_ORDER.indexOf(unit);
    if (!m || unit === undefined || rank <= last) {
      throw new InvalidArgumentError(`expected a duration ${DURATION_EXAMPLES}; got ${JSON.stringify(text.slice(0, 40))}`);
    }
    last = rank;
    ms += Number(m[1]) * (DURATION_UNITS[unit] ?? 1);
  }
  const rounded = Math.round(ms);
  if (rounded <= 0) throw new InvalidArgumentError('expected a duration above zero');
  if (rounded > MAX_DURATION_MS) throw new InvalidArgumentError('expected a duration of at most 596h');
  return rounded;
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

/** Parses `host:port` (IPv6 in brackets); `option` names the option in the error. */
export function parseListen(value: string, option = '--listen'): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(value.trim());
  if (!m) throw new Error(`invalid ${option} "${value}": expected host:port (IPv6 in brackets: [::1]:8080)`);
  const port = Number(m[3]);
  if (!Number.isInteger(port) || port > 65535) throw new Error(`invalid ${option} "${value}": the port must be from 0 to 65535 (0: any free port)`);
  return { host: (m[1] ?? m[2]) as string, port };
}

/**
 * Parses `--server`: an http(s) URL of the regsync REST API; `host:port` alone means
 * `http://host:port`. Anything else is refused with the form expected.
 */
export function parseServerUrl(value: string): string {
  const text = value.trim().replace(/\/+$/, '');
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw new InvalidArgumentError('expected the URL of the regsync REST API, such as http://127.0.0.1:8080 (or 127.0.0.1:8080)');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new InvalidArgumentError(`expected an http:// or https:// URL, got ${url.protocol}//`);
  return withScheme;
}

/**
 * The bearer token of a metrics listener: `--metrics-token-file` (the file's first line) or
 * `REGSYNC_METRICS_TOKEN`; undefined: the listener is open.
 */
export function metricsTokenOf(file: string | undefined, env: string | undefined): string | undefined {
  if (file !== undefined) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      throw new Error(`--metrics-token-file ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (err as Error).message}`, { cause: err });
    }
    const token = text.split('\n')[0]?.trim() ?? '';
    if (token.length < 16) throw new Error(`--metrics-token-file ${file}: the token must have at least 16 characters`);
    return token;
  }
  if (env !== undefined && env.trim() !== '') {
    if (env.trim().length < 16) throw new Error('REGSYNC_METRICS_TOKEN: the token must have at least 16 characters');
    return env.trim();
  }
  return undefined;
}
