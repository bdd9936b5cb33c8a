/**
 * `compute` made to answer the same result for up to `maxAgeMs` after it was asked for the same
 * argument (calls meanwhile share it, the one under way included), for a figure that is costly to
 * compute and fine a few seconds old. A failure is not kept: the next call computes again.
 */
export function reusedFor<A, T>(maxAgeMs: number, compute: (arg: A) => Promise<T>): (arg: A) => Promise<T> {
  let last: { at: number; arg: A; value: Promise<T> } | undefined;
  return (arg) => {
    if (last === undefined || last.arg !== arg || Date.now() - last.at > maxAgeMs) {
      const entry = { at: Date.now(), arg, value: compute(arg) };
      entry.value.catch(() => {
        if (last === entry) last = undefined;
      });
      last = entry;
    }
    return last.value;
  };
}
