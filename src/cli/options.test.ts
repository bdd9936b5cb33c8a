import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { parseDuration } from './options.js';

describe('parseDuration', () => {
  it('reads ms, s, m and h, and combinations largest first', () => {
    expect(['250ms', '1500ms', '15s', '1.5s', '2m', '2h', '1m30s', '1h30m', '1h0m5s', ' 5s ', '1s500ms'].map(parseDuration)).toEqual([
      250, 1_500, 15_000, 1_500, 120_000, 7_200_000, 90_000, 5_400_000, 3_600_000 + 5_000, 5_000, 1_500,
    ]);
  });

  it('refuses a bare number, naming the units to use', () => {
    expect(() => parseDuration('15')).toThrow(InvalidArgumentError);
    expect(() => parseDuration('15')).toThrow('a duration needs a unit: 15ms, 15s, 15m or 15h');
  });

  it('refuses unknown units, units out of order or repeated, zero, and durations no timer can hold', () => {
    for (const bad of ['', '15x', '1d', 's', '30s1m', '1s1s', '1m 30s', '-5s', '0s', '0ms', '0.1ms', '597h', '1e3s']) {
      expect(() => parseDuration(bad), bad).toThrow(InvalidArgumentError);
    }
    expect(parseDuration('596h')).toBe(596 * 3_600_000);
  });
});
