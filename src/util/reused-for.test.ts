import { afterEach, describe, expect, it, vi } from 'vitest';
import { reusedFor } from './reused-for.js';

describe('reusedFor', () => {
  afterEach(() => vi.useRealTimers());

  it('answers the same result for the same argument until it is older than maxAgeMs, and computes again after a failure', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    let calls = 0;
    let fail = false;
    const counted = reusedFor(10_000, async (n: number) => {
      calls += 1;
      if (fail) throw new Error('down');
      return n * 10 + calls;
    });
    expect(await Promise.all([counted(8), counted(8)])).toEqual([81, 81]);
    vi.setSystemTime(Date.now() + 9_000);
    expect(await counted(8)).toBe(81);
    expect(await counted(4)).toBe(42);
    vi.setSystemTime(Date.now() + 11_000);
    fail = true;
    await expect(counted(4)).rejects.toThrow('down');
    fail = false;
    expect(await counted(4)).toBe(44);
    expect(calls).toBe(4);
  });
});
