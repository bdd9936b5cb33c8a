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
