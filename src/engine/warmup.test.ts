import { describe, expect, it } from 'vitest';
import { nextWarmup, sharpDrop, warmupGuard } from './warmup.js';

describe('sharpDrop', () => {
  it('is fewer than half of the previous read, none included, after a read that found any', () => {
    expect(sharpDrop(0, 1)).toBe(true);
    expect(sharpDrop(2, 5)).toBe(true);
    expect(sharpDrop(1, 3)).toBe(true);
    expect(sharpDrop(1, 2)).toBe(false);
    expect(sharpDrop(2, 4)).toBe(false);
    expect(sharpDrop(3, 5)).toBe(false);
    expect(sharpDrop(0, 0)).toBe(false);
    expect(sharpDrop(7, 3)).toBe(false);
  });
});

describe('nextWarmup', () => {
  it('marks an outage at its first failed read only', () => {
    expect(nextWarmup({}, 'down', 1_000, 60_000)).toEqual({ down: 1_000 });
    expect(nextWarmup({ down: 1_000 }, 'down', 5_000, 60_000)).toEqual({ down: 1_000 });
  });

  it('starts the warm-up of an outage at the first read that goes through, whatever it found', () => {
    expect(nextWarmup({ down: 1_000 }, 'up', 9_000, 60_000)).toEqual({ since: 9_000, until: 69_000, reason: 'outage' });
    expect(nextWarmup({ down: 1_000 }, 'drop', 9_000, 60_000)).toEqual({ since: 9_000, until: 69_000, reason: 'outage' });
  });

  it('starts a warm-up at a sharp drop, unless one is under way, and leaves the record alone on a plain read', () => {
    expect(nextWarmup({}, 'up', 9_000, 60_000)).toEqual({});
    expect(nextWarmup({}, 'drop', 9_000, 60_000)).toEqual({ since: 9_000, until: 69_000, reason: 'drop' });
    const under = { since: 9_000, until: 69_000, reason: 'drop' as const };
    expect(nextWarmup(under, 'drop', 30_000, 60_000)).toBe(under);
    expect(nextWarmup(under, 'drop', 69_000, 60_000)).toEqual({ since: 69_000, until: 129_000, reason: 'drop' });
  });

  it('marks a new outage during a warm-up, which then starts anew when the source is read again', () => {
    const marked = nextWarmup({ since: 9_000, until: 69_000, reason: 'drop' }, 'down', 20_000, 60_000);
    expect(marked).toEqual({ since: 9_000, until: 69_000, reason: 'drop', down: 20_000 });
    expect(nextWarmup(marked, 'up', 25_000, 60_000)).toEqual({ since: 25_000, until: 85_000, reason: 'outage' });
  });
});

describe('warmupGuard', () => {
  it('holds removals until the warm-up ends, with a reconcile due just after', () => {
    const record = { since: 10_000, until: 70_000, reason: 'outage' as const };
    expect(warmupGuard(record, 30_000, 60_000)).toEqual({ verdict: 'hold', reason: 'outage', since: 10_000, until: 70_000, requeueAfterMs: 40_010 });
    expect(warmupGuard(record, 70_000, 60_000)).toEqual({ verdict: 'proceed' });
  });

  it('lets everything through with no record, or a warm-up of 0', () => {
    expect(warmupGuard({}, 30_000, 60_000)).toEqual({ verdict: 'proceed' });
    expect(warmupGuard({ since: 10_000, until: 70_000, reason: 'drop' }, 30_000, 0)).toEqual({ verdict: 'proceed' });
  });

  it('applies a shortened warm-up at once, and never holds longer than a warm-up from now', () => {
    expect(warmupGuard({ since: 10_000, until: 70_000, reason: 'drop' }, 30_000, 15_000)).toEqual({ verdict: 'proceed' });
    expect(warmupGuard({ since: 10_000, until: 70_000, reason: 'drop' }, 20_000, 15_000)).toMatchObject({ verdict: 'hold', until: 25_000 });
    // Recorded by a clock ahead of this one.
    expect(warmupGuard({ since: 90_000, until: 150_000, reason: 'drop' }, 30_000, 60_000)).toMatchObject({ verdict: 'hold', since: 30_000, until: 90_000 });
  });

  it('holds for a warm-up from now while the record still marks an outage', () => {
    expect(warmupGuard({ down: 1_000 }, 30_000, 60_000)).toEqual({ verdict: 'hold', reason: 'outage', since: 30_000, until: 90_000, requeueAfterMs: 60_010 });
  });
});
