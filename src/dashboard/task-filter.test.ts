import { describe, expect, it } from 'vitest';
import { abbreviateId, matchesTask } from './task-filter.js';

const task = { id: 'orders-east-west', source: 'east', destination: 'West', service: 'orders', state: 'running' as const, failing: 0, held: 0, error: null };

describe('matchesTask', () => {
  it('finds the search text in the id, source, destination or service, ignoring case', () => {
    for (const search of ['ORDERS-east', 'east', 'west', 'Orders', '', '  ']) expect(matchesTask(task, { search, state: '' })).toBe(true);
    expect(matchesTask(task, { search: 'payments', state: '' })).toBe(false);
    expect(matchesTask({ ...task, id: 'a', service: 'b' }, { search: 'orders', state: '' })).toBe(false);
  });

  it('filters by state: failing includes a task error, held any held service', () => {
    expect(matchesTask(task, { search: '', state: 'running' })).toBe(true);
    expect(matchesTask(task, { search: '', state: 'paused' })).toBe(false);
    expect(matchesTask({ ...task, state: 'paused' }, { search: '', state: 'paused' })).toBe(true);
    expect(matchesTask(task, { search: '', state: 'failing' })).toBe(false);
    expect(matchesTask({ ...task, failing: 2 }, { search: '', state: 'failing' })).toBe(true);
    expect(matchesTask({ ...task, state: 'error', error: 'boom' }, { search: '', state: 'failing' })).toBe(true);
    expect(matchesTask(task, { search: '', state: 'held' })).toBe(false);
    expect(matchesTask({ ...task, held: 1 }, { search: '', state: 'held' })).toBe(true);
    expect(matchesTask({ ...task, held: 1 }, { search: 'nope', state: 'held' })).toBe(false);
  });
});

describe('abbreviateId', () => {
  it('keeps short ids and cuts long ones in the middle to the given length', () => {
    expect(abbreviateId('orders-east-west')).toBe('orders-east-west');
    const long = 'payments-from-the-eastern-datacenter-to-the-western-one';
    const short = abbreviateId(long);
    expect(short).toHaveLength(24);
    expect(short.startsWith('payments-from-')).toBe(true);
    expect(short.endsWith('-one')).toBe(true);
    expect(short).toContain('…');
  });
});
