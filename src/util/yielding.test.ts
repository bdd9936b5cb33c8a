import { describe, expect, it } from 'vitest';
import { filterYielding, sortYielding } from './yielding.js';

describe('filterYielding', () => {
  it('keeps what the predicate keeps, in order', async () => {
    const items = Array.from({ length: 10_000 }, (_, i) => i);
    expect(await filterYielding(items, (i) => i % 3 === 0)).toEqual(items.filter((i) => i % 3 === 0));
    expect(await filterYielding([], () => true)).toEqual([]);
  });

  it('lets other work run while a slow filter is under way', async () => {
    let ran = false;
    setImmediate(() => {
      ran = true;
    });
    const seen: boolean[] = [];
    // Each item holds the loop for a millisecond: the filter must yield long before it ends.
    await filterYielding(Array.from({ length: 100 }, (_, i) => i), () => {
      const until = Date.now() + 1;
      while (Date.now() < until);
      seen.push(ran);
      return true;
    });
    expect(seen[0]).toBe(false);
    expect(seen.at(-1)).toBe(true);
  });
});

describe('sortYielding', () => {
  it('sorts as Array.prototype.sort does, stably', async () => {
    const items = Array.from({ length: 6_000 }, (_, i) => ({ k: (i * 7919) % 1000, i }));
    const byK = (a: { k: number }, b: { k: number }) => a.k - b.k;
    expect(await sortYielding(items, byK)).toEqual([...items].sort(byK));
    expect(await sortYielding([], byK)).toEqual([]);
    expect(await sortYielding([{ k: 1, i: 0 }], byK)).toEqual([{ k: 1, i: 0 }]);
  });

  it('lets other work run while a long sort is under way', async () => {
    let ran = false;
    setImmediate(() => {
      ran = true;
    });
    const items = Array.from({ length: 10_000 }, (_, i) => 10_000 - i);
    const sorted = await sortYielding(items, (a, b) => a - b);
    expect(ran).toBe(true);
    expect(sorted[0]).toBe(1);
  });
});
