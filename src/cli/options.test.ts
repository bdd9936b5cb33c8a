import { InvalidArgumentError } from 'commander';
import { describe, expect, it } from 'vitest';
import { parseDuration, parseListen, parseServerUrl } from './options.js';

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

describe('parseListen', () => {
  it('reads host:port and [v6]:port, and says what is wrong with the rest', () => {
    expect(parseListen('127.0.0.1:8080')).toEqual({ host: '127.0.0.1', port: 8080 });
    expect(parseListen('[::1]:0')).toEqual({ host: '::1', port: 0 });
    expect(() => parseListen('127.0.0.1:99999')).toThrow('invalid --listen "127.0.0.1:99999": the port must be from 0 to 65535 (0: any free port)');
    expect(() => parseListen('nowhere', '--metrics-listen')).toThrow('invalid --metrics-listen "nowhere": expected host:port (IPv6 in brackets: [::1]:8080)');
  });
});

describe('parseServerUrl', () => {
  it('takes an http(s) URL, or host:port as http://host:port', () => {
    expect(parseServerUrl('https://regsync.internal:8443/')).toBe('https://regsync.internal:8443');
    expect(parseServerUrl('127.0.0.1:8080')).toBe('http://127.0.0.1:8080');
    expect(() => parseServerUrl('ftp://x')).toThrow('expected an http:// or https:// URL, got ftp://');
    expect(() => parseServerUrl('http://[bad')).toThrow(InvalidArgumentError);
  });
});
