import { describe, expect, it } from 'vitest';
import { HISTORY_WINDOW_MS, seriesPoints, type HistorySample } from './history-chart.js';

const now = Date.parse('2026-01-01T12:00:00.000Z');
const sample = (minutesAgo: number, copies: number, maxLagMs: number | null): HistorySample => ({ at: new Date(now - minutesAgo * 60_000).toISOString(), copies, maxLagMs, failing: 0, held: 0 });

describe('seriesPoints', () => {
  it('spreads the hour across the plot, oldest left, the largest value at the top', () => {
    const { points, max } = seriesPoints([sample(60, 0, null), sample(30, 5, 10), sample(0, 10, 20)], (s) => s.copies, now);
    expect(max).toBe(10);
    const xy = points.split(' ').map((p) => p.split(',').map(Number));
    expect(xy).toHaveLength(3);
    const [first, middle, last] = xy as [number[], number[], number[]];
    expect(first[0]).toBeLessThan(middle[0] as number);
    expect(middle[0]).toBeLessThan(last[0] as number);
    // Zero at the bottom, the top value highest (smaller y), half-way in between.
    expect(first[1]).toBeGreaterThan(middle[1] as number);
    expect(middle[1]).toBeCloseTo(((first[1] as number) + (last[1] as number)) / 2, 5);
  });

  it('leaves out samples without a value and those older than the hour', () => {
    const lag = seriesPoints([sample(90, 1, 500), sample(20, 1, null), sample(10, 1, 40)], (s) => s.maxLagMs, now);
    expect(lag.points.split(' ')).toHaveLength(1);
    expect(lag.max).toBe(40);
    expect(seriesPoints([], (s) => s.copies, now)).toEqual({ points: '', max: 1 });
    expect(HISTORY_WINDOW_MS).toBe(3_600_000);
  });
});
