import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ServiceKey } from '../../src/model/index.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { ServiceListWatch, type ServiceScope } from './service-list-watch.js';

const silent = pino({ level: 'silent' });
const ALL: ServiceScope = { namespace: '*', group: '*' };
const svc = (name: string, namespace = 'public', group = 'DEFAULT_GROUP'): ServiceKey => ({ namespace, group, name });

/** A log that tests can read: one parsed object per line. */
function capturedLogger(): { logger: pino.Logger; entries: Array<Record<string, unknown>> } {
  const entries: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void entries.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, entries };
}

/** A source whose list the test sets, counting the polls per scope. */
function source() {
  const state = { services: [] as ServiceKey[], failing: false, polls: 0, scopes: [] as ServiceScope[] };
  const list = (scope: ServiceScope): Promise<ServiceKey[]> => {
    state.polls += 1;
    state.scopes.push(scope);
    return state.failing ? Promise.reject(new Error('list failed')) : Promise.resolve([...state.services]);
  };
  return { state, list };
}

describe('ServiceListWatch', () => {
  const watches: ServiceListWatch[] = [];
  const make = (list: (scope: ServiceScope) => Promise<ServiceKey[]>, log: pino.Logger = silent) => {
    const watch = new ServiceListWatch({ intervalMs: 10, log, list });
    watches.push(watch);
    return watch;
  };
  afterEach(() => {
    for (const w of watches.splice(0)) w.close();
  });

  it('records a first poll silently, then calls back only when the list changes, in any order', async () => {
    const { state, list } = source();
    state.services = [svc('a'), svc('b', 'dev', 'G')];
    const watch = make(list);
    let calls = 0;
    watch.watch(ALL, () => (calls += 1));
    await waitUntil(() => state.polls >= 3, { message: 'a few polls' });
    expect(calls).toBe(0);
    // The same services in another order are the same list.
    state.services = [svc('b', 'dev', 'G'), svc('a')];
    const polls = state.polls;
    await waitUntil(() => state.polls >= polls + 2, { message: 'more polls' });
    expect(calls).toBe(0);
    // The same name in another group is another service.
    state.services = [svc('a'), svc('b', 'dev', 'H')];
    await waitUntil(() => calls === 1, { message: 'change noticed' });
    state.services = [svc('a')];
    await waitUntil(() => calls === 2, { message: 'a service vanishing noticed' });
    expect(state.scopes.every((s) => s.namespace === '*' && s.group === '*')).toBe(true);
  });

  it('compares its first poll with what a caller listed just before watching', async () => {
    const { state, list } = source();
    const watch = make(list);
    watch.observed(ALL, [svc('a')]);
    state.services = [svc('a'), svc('b')];
    let calls = 0;
    watch.watch(ALL, () => (calls += 1));
    await waitUntil(() => calls === 1, { message: 'the first poll differs from the listed baseline' });
    // A caller's list moves the baseline: what it already read is not reported again.
    state.services = [svc('a'), svc('b'), svc('c')];
    watch.observed(ALL, state.services);
    const polls = state.polls;
    await waitUntil(() => state.polls >= polls + 2, { message: 'more polls' });
    expect(calls).toBe(1);
  });

  it('polls each scope once for all its watchers, and stops once the last one leaves', async () => {
    const { state, list } = source();
    const watch = make(list);
    let first = 0;
    let second = 0;
    const stopFirst = watch.watch(ALL, () => (first += 1));
    const stopSecond = watch.watch(ALL, () => (second += 1));
    watch.watch({ namespace: 'public', group: '*' }, () => undefined);
    expect(watch.size).toBe(2);
    await waitUntil(() => state.polls >= 4, { message: 'polls' });
    state.services = [svc('x')];
    await waitUntil(() => first === 1 && second === 1, { message: 'both told' });
    stopFirst();
    stopFirst();
    state.services = [];
    await waitUntil(() => second === 2, { message: 'the remaining watcher told' });
    expect(first).toBe(1);
    stopSecond();
    expect(watch.size).toBe(1);
    const allPolls = () => state.scopes.filter((s) => s.namespace === '*').length;
    const before = allPolls();
    const otherPolls = state.polls;
    await waitUntil(() => state.polls >= otherPolls + 3, { message: 'the other scope keeps polling' });
    expect(allPolls()).toBeLessThanOrEqual(before + 1);
  });

  it('keeps polling through failures without calling anyone, warns once, and reports what changed meanwhile', async () => {
    const { state, list } = source();
    const { logger, entries } = capturedLogger();
    const watch = make(list, logger);
    state.services = [svc('a')];
    let calls = 0;
    watch.watch(ALL, () => (calls += 1));
    await waitUntil(() => state.polls >= 2, { message: 'baseline' });
    state.failing = true;
    const polls = state.polls;
    await waitUntil(() => state.polls >= polls + 3, { message: 'failing polls' });
    expect(calls).toBe(0);
    expect(entries.filter((e) => e.msg === 'nacos service list poll failed; retrying at the next interval')).toHaveLength(1);
    state.services = [svc('a'), svc('b')];
    state.failing = false;
    await waitUntil(() => calls === 1, { message: 'the change made during the outage' });
    expect(entries.some((e) => e.msg === 'nacos service list reads again')).toBe(true);
  });

  it('survives a watcher that throws, and stops everything on close', async () => {
    const { state, list } = source();
    const watch = make(list);
    let calls = 0;
    watch.watch(ALL, () => {
      throw new Error('watcher bug');
    });
    watch.watch(ALL, () => (calls += 1));
    await waitUntil(() => state.polls >= 2, { message: 'baseline' });
    state.services = [svc('a')];
    await waitUntil(() => calls === 1, { message: 'second watcher told' });
    watch.close();
    expect(watch.size).toBe(0);
    expect(watch.watch(ALL, () => (calls += 1))).toBeTypeOf('function');
    expect(watch.size).toBe(0);
  });
});
