import { describe, expect, it } from 'vitest';
import { nextWarmup, sharpDrop, WARMUP_DROP_INSTANCES, warmupGuard } from './warmup.js';

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
  const down = { kind: 'down' } as const;
  const up = { kind: 'up' } as const;
  const drop = (service: string, lost: number) => ({ kind: 'drop', service, lost }) as const;

  it('marks an outage at its first failed read only', () => {
    expect(nextWarmup({}, down, 1_000, 60_000)).toEqual({ down: 1_000 });
    expect(nextWarmup({ down: 1_000 }, down, 5_000, 60_000)).toEqual({ down: 1_000 });
  });

  it('starts the warm-up of an outage at the first read that goes through, whatever it found', () => {
    expect(nextWarmup({ down: 1_000 }, up, 9_000, 60_000)).toEqual({ since: 9_000, until: 69_000, reason: 'outage' });
    expect(nextWarmup({ down: 1_000, drops: { s: [500, 2] } }, drop('s', 1), 9_000, 60_000)).toEqual({ since: 9_000, until: 69_000, reason: 'outage' });
  });

  it(`starts a warm-up once more than ${WARMUP_DROP_INSTANCES} instances went in sharp drops within its time, counted across services`, () => {
    expect(nextWarmup({}, up, 9_000, 60_000)).toEqual({});
    expect(nextWarmup({}, drop('a', 5), 9_000, 60_000)).toEqual({ since: 9_000, until: 69_000, reason: 'drop' });
    let record = nextWarmup({}, drop('a', 2), 1_000, 60_000);
    expect(record).toEqual({ drops: { a: [1_000, 2] } });
    // The same drop read again counts once (its largest), a drop of another service adds to it.
    record = nextWarmup(record, drop('a', 2), 2_000, 60_000);
    expect(record).toEqual({ drops: { a: [2_000, 2] } });
    record = nextWarmup(record, drop('b', 2), 3_000, 60_000);
    expect(record).toEqual({ drops: { a: [2_000, 2], b: [3_000, 2] } });
    expect(nextWarmup(record, drop('c', 1), 4_000, 60_000)).toEqual({ since: 4_000, until: 64_000, reason: 'drop' });
    // Drops older than a warm-up's time no longer count.
    expect(nextWarmup(record, drop('c', 1), 62_000, 60_000)).toEqual({ drops: { b: [3_000, 2], c: [62_000, 1] } });
  });

  it('counts no drop while a warm-up is under way, and starts anew after it', () => {
    const under = { since: 9_000, until: 69_000, reason: 'drop' as const };
    expect(nextWarmup(under, drop('a', 9), 30_000, 60_000)).toBe(under);
    expect(nextWarmup(under, drop('a', 9), 69_000, 60_000)).toEqual({ since: 69_000, until: 129_000, reason: 'drop' });
  });

  it('marks a new outage during a warm-up, which then starts anew when the source is read again', () => {
    const marked = nextWarmup({ since: 9_000, until: 69_000, reason: 'drop' }, down, 20_000, 60_000);
    expect(marked).toEqual({ since: 9_000, until: 69_000, reason: 'drop', down: 20_000 });
    expect(nextWarmup(marked, up, 25_000, 60_000)).toEqual({ since: 25_000, until: 85_000, reason: 'outage' });
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
