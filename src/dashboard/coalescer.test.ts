import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { Coalescer } from './coalescer.js';

describe('Coalescer', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  /** A run that takes 100 ms and counts itself. */
  function counted(): { runs: () => number; coalescer: Coalescer } {
    let runs = 0;
    const coalescer = new Coalescer(async () => {
      runs += 1;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }, 1_000);
    return { runs: () => runs, coalescer };
  }

  it('makes one run of a burst, after the delay of its first request', async () => {
    const { runs, coalescer } = counted();
    for (let i = 0; i < 10; i += 1) {
      coalescer.request();
      await vi.advanceTimersByTimeAsync(50);
    }
    expect(runs()).toBe(0);
    await vi.advanceTimersByTimeAsync(500);
    expect(runs()).toBe(1);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(runs()).toBe(1);
  });

  it('runs at once when asked with no delay, even while a delayed run is pending', async () => {
    const { runs, coalescer } = counted();
    coalescer.request();
    coalescer.request(0);
    await vi.advanceTimersByTimeAsync(0);
    expect(runs()).toBe(1);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(runs()).toBe(1);
  });

  it('runs once more after a run during which requests came, with the shortest delay asked', async () => {
    const { runs, coalescer } = counted();
    coalescer.request(0);
    await vi.advanceTimersByTimeAsync(10);
    coalescer.request();
    coalescer.request(0);
    expect(runs()).toBe(1);
    // The first run ends at 100 ms; the next starts right after, not a second later.
    await vi.advanceTimersByTimeAsync(91);
    expect(runs()).toBe(2);
    await vi.advanceTimersByTimeAsync(5_000);
    expect(runs()).toBe(2);
  });
});
