import { describe, expect, it } from 'vitest';
import { EventStreamParser, formatAgo, formatCount, formatDuration, parseEndpoints, parseLabels, parseRoute, taskHref, truncate } from './format.js';

describe('formatting', () => {
  it('writes counts, durations and ages for people', () => {
    expect(formatCount(12345)).toBe('12,345');
    expect([null, undefined, Number.NaN, 0, 850, 4_200, 42_000, 180_000, 9_000_000, 3 * 86_400_000].map(formatDuration)).toEqual([
      '-',
      '-',
      '-',
      '0 ms',
      '850 ms',
      '4.2 s',
      '42 s',
      '3 min',
      '2.5 h',
      '3 d',
    ]);
    const now = Date.parse('2024-01-01T00:01:00.000Z');
    expect(formatAgo('2024-01-01T00:00:55.000Z', now)).toBe('5.0 s ago');
    expect(formatAgo('2024-01-01T00:01:00.000Z', now)).toBe('just now');
    expect(formatAgo(null, now)).toBe('-');
    expect(formatAgo('not a time', now)).toBe('not a time');
    expect(truncate('abcdef', 4)).toBe('abc…');
    expect(truncate('abc', 4)).toBe('abc');
  });
});

describe('form input', () => {
  it('splits endpoints on commas, spaces and new lines', () => {
    expect(parseEndpoints(' 10.0.0.1:8848, 10.0.0.2:8848\n[::1]:8848  ')).toEqual(['10.0.0.1:8848', '10.0.0.2:8848', '[::1]:8848']);
    expect(parseEndpoints('  ')).toEqual([]);
  });

  it('reads key=value labels and names a pair that is not one', () => {
    expect(parseLabels('region=east, site = x11\nzone=a=b')).toEqual({ region: 'east', site: 'x11', zone: 'a=b' });
    expect(parseLabels('')).toEqual({});
    expect(() => parseLabels('region=east, site')).toThrow('label "site" must be key=value');
    expect(() => parseLabels('=x')).toThrow('label "=x" must be key=value');
  });
});

describe('EventStreamParser', () => {
  it('returns the data of each complete message, however the chunks cut the stream', () => {
    const stream = 'retry: 3000\n: connected\n\nid: 1-0\ndata: {"kind":"task"}\n\n: keep-alive\n\ndata: line one\ndata: line two\r\n\r\nid: 2-0\ndata:{"kind":"held"}\n\n';
    const expected = ['{"kind":"task"}', 'line one\nline two', '{"kind":"held"}'];
    for (const size of [1, 2, 3, 7, stream.length]) {
      const parser = new EventStreamParser();
      const got: string[] = [];
      for (let i = 0; i < stream.length; i += size) got.push(...parser.push(stream.slice(i, i + size)));
      expect(got, `chunks of ${size}`).toEqual(expected);
    }
  });

  it('keeps an unfinished message until its blank line arrives', () => {
    const parser = new EventStreamParser();
    expect(parser.push('data: {"a":1}\n')).toEqual([]);
    expect(parser.push('\n')).toEqual(['{"a":1}']);
  });
});

describe('routes of the page', () => {
  it('maps hashes to views, anything unknown to the task list', () => {
    const everyTask = { view: 'tasks', filter: { search: '', state: '' } };
    expect(parseRoute('')).toEqual(everyTask);
    expect(parseRoute('#/tasks')).toEqual(everyTask);
    expect(parseRoute('#/tasks?q=orders%20east&state=failing')).toEqual({ view: 'tasks', filter: { search: 'orders east', state: 'failing' } });
    expect(parseRoute('#/tasks/?state=held')).toEqual({ view: 'tasks', filter: { search: '', state: 'held' } });
    expect(parseRoute('#/tasks?state=bogus&q=a%26b')).toEqual({ view: 'tasks', filter: { search: 'a&b', state: '' } });
    expect(parseRoute('#/tasks/orders?q=x')).toEqual({ view: 'task', id: 'orders' });
    expect(parseRoute('#/clusters?q=x')).toEqual({ view: 'clusters' });
    expect(parseRoute(taskHref('orders a/b'))).toEqual({ view: 'task', id: 'orders a/b' });
    expect(parseRoute('#/clusters')).toEqual({ view: 'clusters' });
    expect(parseRoute('#/clusters/east%20one')).toEqual({ view: 'clusters', id: 'east one' });
    expect(parseRoute('#/shards')).toEqual({ view: 'deployment' });
    expect(parseRoute('#/cmdb')).toEqual({ view: 'cmdb' });
    expect(parseRoute('#/nope')).toEqual(everyTask);
  });
});
