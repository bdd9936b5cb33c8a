import { describe, expect, it } from 'vitest';
import { abbreviateId, matchesTask, taskFilterOf, tasksHref } from './task-filter.js';

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

describe('the task filter in the address', () => {
  it('writes only what narrows the list, and reads back what it wrote', () => {
    expect(tasksHref({ search: '', state: '' })).toBe('#/tasks');
    expect(tasksHref({ search: 'orders', state: '' })).toBe('#/tasks?q=orders');
    expect(tasksHref({ search: '', state: 'held' })).toBe('#/tasks?state=held');
    for (const filter of [
      { search: 'a&b=c #x/y', state: 'failing' as const },
      { search: '  spaced  ', state: 'paused' as const },
      { search: 'ünïcode', state: '' as const },
    ]) {
      const href = tasksHref(filter);
      expect(taskFilterOf(new URLSearchParams(href.slice(href.indexOf('?') + 1)))).toEqual(filter);
    }
  });

  it('reads a missing or unknown state as every state', () => {
    expect(taskFilterOf(new URLSearchParams(''))).toEqual({ search: '', state: '' });
    expect(taskFilterOf(new URLSearchParams('state=error&q=x'))).toEqual({ search: 'x', state: '' });
    expect(taskFilterOf(new URLSearchParams('state=toString'))).toEqual({ search: '', state: '' });
  });
});
