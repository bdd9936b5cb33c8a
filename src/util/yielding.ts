import { performance } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';

/** How long one slice of {@link filterYielding} may hold the event loop, ms. */
const SLICE_MS = 4;
/** Items between two looks at the clock. */
const CHECK_EVERY = 16;

/**
 * `items.filter(keep)` that gives the event loop back every few milliseconds: a long list (every
 * service of a registry, each name matched against a task's patterns) never stalls beats, the API
 * or other reconciles, whatever its length.
 */
export async function filterYielding<T>(items: readonly T[], keep: (item: T) => boolean): Promise<T[]> {
  const kept: T[] = [];
  let sliceStart = performance.now();
  for (let i = 0; i < items.length; i += 1) {
    const item = items[i] as T;
    if (keep(item)) kept.push(item);
    if (i % CHECK_EVERY === CHECK_EVERY - 1 && performance.now() - sliceStart > SLICE_MS) {
      await nextTurn();
      sliceStart = performance.now();
    }
  }
  return kept;
}

/**
 * A clock for long loops: `pause()` answers a promise to await once the current slice has held
 * the event loop for a few milliseconds, and undefined otherwise (so most items cost no await).
 */
export function sliceClock(): { pause(): Promise<void> | undefined } {
  let sliceStart = performance.now();
  let n = 0;
  return {
    pause() {
      n += 1;
      if (n % CHECK_EVERY !== 0 || performance.now() - sliceStart <= SLICE_MS) return undefined;
      return nextTurn().then(() => {
        sliceStart = performance.now();
      });
    },
  };
}

/** Items one native sort of {@link sortYielding} takes at once (a few milliseconds). */
const SORT_RUN = 2048;

/**
 * `[...items].sort(compare)` that gives the event loop back between steps: runs of
 * {@link SORT_RUN} items are sorted natively, then merged pairwise (stable), yielding every few
 * milliseconds, so that sorting 100,000 service names never stalls the process.
 */
export async function sortYielding<T>(items: readonly T[], compare: (a: T, b: T) => number): Promise<T[]> {
  let runs: T[][] = [];
  const clock = sliceClock();
  for (let at = 0; at < items.length; at += SORT_RUN) {
    runs.push(items.slice(at, at + SORT_RUN).sort(compare));
    await nextTurn();
  }
  while (runs.length > 1) {
    const merged: T[][] = [];
    for (let i = 0; i < runs.length; i += 2) {
      const left = runs[i] as T[];
      const right = runs[i + 1];
      if (!right) {
        merged.push(left);
        continue;
      }
      const out: T[] = new Array<T>(left.length + right.length);
      let l = 0;
      let r = 0;
      let o = 0;
      while (l < left.length && r < right.length) {
        out[o++] = compare(right[r] as T, left[l] as T) < 0 ? (right[r++] as T) : (left[l++] as T);
        const wait = clock.pause();
        if (wait) await wait;
      }
      while (l < left.length) out[o++] = left[l++] as T;
      while (r < right.length) out[o++] = right[r++] as T;
      merged.push(out);
    }
    runs = merged;
  }
  return runs[0] ?? [];
}
