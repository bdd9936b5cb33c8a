import { describe, expect, it } from 'vitest';
import { eventMarks, HISTORY_WINDOW_MS, seriesPoints, type EventMark, type HistorySample } from './history-chart.js';

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

describe('eventMarks', () => {
  const event = (minutesAgo: number, kind: string, message = `${kind} happened`) => ({ at: new Date(now - minutesAgo * 60_000).toISOString(), kind, message });

  it('marks each event of the hour on the samples\' time axis, oldest first, with its time, kind and message', () => {
    const marks = eventMarks([event(10, 'reconciled'), event(50, 'error', 'destination refused'), event(90, 'error')], now);
    expect(marks.map((m) => [m.kind, m.count])).toEqual([
      ['error', 1],
      ['reconciled', 1],
    ]);
    const [older, newer] = marks as [EventMark, EventMark];
    expect(older.title).toBe(`${new Date(now - 50 * 60_000).toISOString().slice(11, 19)}Z error: destination refused`);
    // The same x as a sample taken at the same time.
    const x = Number(seriesPoints([sample(50, 1, null)], (s) => s.copies, now).points.split(',')[0]);
    expect(older.x).toBeCloseTo(x, 0);
    expect(older.x).toBeLessThan(newer.x);
  });

  it('groups dense events into one mark per slot, coloured by the most telling kind, within the plot', () => {
    const burst = Array.from({ length: 500 }, (_, i) => event(30 + i / 10_000, i === 7 ? 'held' : 'reconciled'));
    const marks = eventMarks([...burst, event(0, 'task'), event(60, 'removed')], now);
    expect(marks).toHaveLength(3);
    const [first, middle, last] = marks as [EventMark, EventMark, EventMark];
    expect(middle).toMatchObject({ kind: 'held', count: 500 });
    expect(middle.title.split('\n')[0]).toBe('500 events');
    expect(middle.title).toContain('and 492 more');
    // A mark per slot at most, whatever the number of events: bounded by the chart's width.
    const many = eventMarks(Array.from({ length: 10_000 }, (_, i) => event((i / 10_000) * 60, 'error')), now);
    expect(many.length).toBeLessThanOrEqual(640 / 8 + 1);
    const xs = [first, last, ...many].map((m) => m.x);
    expect(Math.min(...xs)).toBeGreaterThanOrEqual(64);
    expect(Math.max(...xs)).toBeLessThanOrEqual(640 - 8);
    expect(eventMarks([{ at: 'not a time', kind: 'error', message: 'x' }], now)).toEqual([]);
  });
});
