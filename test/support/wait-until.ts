import { setTimeout as delay } from 'node:timers/promises';
import { inspect } from 'node:util';

/** Options of {@link waitUntil}. */
export interface WaitUntilOptions {
  /** Give up after this many milliseconds (default 10 000). The probe runs at least once. */
  timeoutMs?: number;
  /** Pause between two probes in milliseconds (default 50). */
  intervalMs?: number;
  /** What is being waited for; it starts the timeout error's message. */
  message?: string;
}

/** `T` without the falsy values that {@link waitUntil} keeps waiting through. */
export type Truthy<T> = Exclude<T, false | 0 | 0n | '' | null | undefined>;

const PENDING = Symbol('probe still pending');

/**
 * Polls `probe` until it returns (or resolves to) a truthy value and resolves with that value.
 *
 * Why: this is the only way tests wait for something (a server to come up, a node to vanish, a sync to
 * land); fixed sleeps make tests both slow and flaky. An exception thrown (or a rejection) by the probe
 * counts as "not yet", so probes can simply call a client that fails while the server is still starting.
 *
 * On timeout it rejects with an Error naming `message` and the last probe value or error (the error is
 * also attached as `cause`). A probe that hangs past the deadline is abandoned, not awaited.
 *
 * Deliberately left out: backoff and cancellation; tests want a steady short interval and a hard deadline.
 */
export async function waitUntil<T>(
  probe: () => T | Promise<T>,
  opts: WaitUntilOptions = {},
): Promise<Truthy<T>> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const intervalMs = opts.intervalMs ?? 50;
  const started = Date.now();
  const deadline = started + timeoutMs;
  let last: { kind: 'value'; value: unknown } | { kind: 'error'; error: unknown };
  let attempts = 0;

  for (;;) {
    attempts += 1;
    try {
      const result = await raceDeadline(probe, deadline);
      if (result === PENDING) {
        last = { kind: 'value', value: PENDING };
        break;
      }
      if (result) return result as Truthy<T>;
      last = { kind: 'value', value: result };
    } catch (error) {
      last = { kind: 'error', error };
    }
    const remaining = deadline - Date.now();
    if (remaining <= 0) break;
    await delay(Math.min(intervalMs, remaining));
  }

  const what = opts.message ?? 'condition';
  const elapsed = Date.now() - started;
  let detail: string;
  if (last.kind === 'error') {
    detail = `last probe error: ${describeError(last.error)}`;
  } else if (last.kind === 'value' && last.value === PENDING) {
    detail = 'last probe was still pending at the deadline';
  } else {
    detail = `last probe value: ${inspect(last.value, { depth: 3, breakLength: Infinity })}`;
  }
  throw new Error(
    `waitUntil timed out after ${elapsed} ms (${attempts} probes) waiting for ${what}; ${detail}`,
    last.kind === 'error' ? { cause: last.error } : undefined,
  );
}

async function raceDeadline<T>(probe: () => T | Promise<T>, deadline: number): Promise<T | typeof PENDING> {
  // Promise.resolve().then(probe) turns a synchronous throw into a rejection.
  const running = Promise.resolve().then(probe);
  const remaining = Math.max(deadline - Date.now(), 0);
  const timer = new AbortController();
  try {
    return await Promise.race([
      running,
      delay(remaining, PENDING, { signal: timer.signal, ref: false }),
    ]);
  } finally {
    timer.abort();
  }
}

function describeError(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  return inspect(error, { depth: 3, breakLength: Infinity });
}
