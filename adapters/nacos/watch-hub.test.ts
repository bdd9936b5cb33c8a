import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { Instance, WatchEvent } from '../../src/model/index.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { WatchHub } from './watch-hub.js';
import type { ServiceRef } from './wire.js';

/** How much earlier than its delay, by Date.now(), a timer may be seen to fire (ms). */
const TIMER_SLACK_MS = 2;

const silent = pino({ level: 'silent' });
const HOUR = 3_600_000;
const ref = (name: string, namespaceId = 'public'): ServiceRef => ({ namespaceId, group: 'G', name });
const instance = (ip: string): Instance => ({
  ip,
  port: 1,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: false,
  cluster: 'DEFAULT',
  metadata: {},
});

describe('WatchHub', () => {
  const hubs: WatchHub[] = [];
  afterEach(() => {
    for (const h of hubs.splice(0)) h.close();
  });

  it('tells the watchers of every namespace watching a pushed name, without reading or decoding anything', () => {
    let lists = 0;
    const hub = new WatchHub({ pollIntervalMs: HOUR, log: silent, list: async () => {
        lists += 1;
        return [];
      },
    });
    hubs.push(hub);
    const calls: string[] = [];
    hub.watch(ref('a'), () => calls.push('public/a'));
    hub.watch(ref('a', 'dev'), () => calls.push('dev/a'));
    hub.watch(ref('b'), () => calls.push('public/b'));
    hub.pushed('G@@a');
    hub.pushed('G@@unknown');
    expect(calls).toEqual(['public/a', 'dev/a']);
    // Repeated pushes (resends) each wake the watchers; the queue de-duplicates.
    hub.pushed('G@@a');
    expect(calls).toHaveLength(4);
    expect(lists).toBe(0);
  });

  it('delays the first poll, and a read before it becomes the baseline that the poll compares with', async () => {
    let current = [instance('10.0.0.1')];
    const polls: number[] = [];
    let sPolledAt = -1;
    const start = Date.now();
    const hub = new WatchHub({
      pollIntervalMs: HOUR,
      firstPollDelayMs: 200,
      random: () => 0.99,
      log: silent,
      list: async (r) => {
        polls.push(Date.now() - start);
        if (r.name === 's') sPolledAt = Date.now() - start;
        return current;
      },
    });
    hubs.push(hub);
    let calls = 0;
    // Many services watched at once: their first polls spread out (here over 100 to 200 ms).
    for (let i = 0; i < 200; i++) hub.watch(ref(`other-${i}`), () => {});
    hub.watch(ref('s'), () => (calls += 1));
    // The engine reads right after watching: that read is the baseline.
    hub.observed(ref('s'), current);
    // Changed between that read and the first poll (no push yet: the poll subscribes).
    current = [instance('10.0.0.1'), instance('10.0.0.2')];
    expect(polls).toEqual([]);
    await waitUntil(() => polls.length === 201, { message: 'first polls' });
    // First polls 100 to 200 ms after the watch; with random() = 0.99, 199 ms.
    expect(sPolledAt).toBeGreaterThanOrEqual(150 - TIMER_SLACK_MS);
    expect(calls).toBe(1);
  });

  it('polls first one to two delays after the watch when a read follows here, half to one otherwise', async () => {
    const polledAt = new Map<string, number>();
    const start = Date.now();
    const hub = new WatchHub({
      pollIntervalMs: HOUR,
      firstPollDelayMs: 200,
      random: () => 0.5,
      log: silent,
      list: async (r) => {
        polledAt.set(r.name, Date.now() - start);
        return [];
      },
    });
    hubs.push(hub);
    hub.watch(ref('elsewhere'), () => {});
    hub.watch(ref('here'), () => {}, { readFollows: true });
    await waitUntil(() => polledAt.size === 2, { message: 'both first polls' });
    // random() = 0.5: 150 ms without a read to follow, 300 ms with one. A timer measures its delay
    // on the monotonic clock, rounded: Date.now() may show it fire up to TIMER_SLACK_MS early.
    expect(polledAt.get('elsewhere')).toBeGreaterThanOrEqual(150 - TIMER_SLACK_MS);
    expect(polledAt.get('here')).toBeGreaterThanOrEqual(300 - TIMER_SLACK_MS);
    expect(polledAt.get('elsewhere')).toBeLessThan(polledAt.get('here') as number);
  });

  it('a read that subscribed stands in for the first poll: the next poll comes a whole interval later', async () => {
    const polled: string[] = [];
    const hub = new WatchHub({
      pollIntervalMs: 200,
      firstPollDelayMs: 20,
      random: () => 0.99,
      log: silent,
      list: async (r) => {
        polled.push(r.name);
        return [];
      },
    });
    hubs.push(hub);
    expect(hub.wantsSubscription(ref('s'))).toBe(false);
    hub.watch(ref('s'), () => {});
    hub.watch(ref('t'), () => {});
    expect(hub.wantsSubscription(ref('s'))).toBe(true);
    // 's' is read with a subscription; 't' is read without one (its first poll stays due).
    hub.observed(ref('s'), [], true);
    hub.observed(ref('t'), []);
    expect(hub.wantsSubscription(ref('s'))).toBe(false);
    expect(hub.wantsSubscription(ref('t'))).toBe(true);
    await waitUntil(() => !hub.wantsSubscription(ref('t')), { message: "t's first poll" });
    expect(polled).toEqual(['t']);
    await waitUntil(() => polled.includes('s'), { message: "s's first poll, an interval after its read" });
  });

  it('without an earlier read, the first poll calls the watchers once (nothing read here to compare with); later reads do not move the baseline', async () => {
    const current = [instance('10.0.0.1')];
    let polls = 0;
    const hub = new WatchHub({
      pollIntervalMs: 30,
      log: silent,
      list: async () => {
        polls += 1;
        return current;
      },
    });
    hubs.push(hub);
    const events: Array<WatchEvent | undefined> = [];
    hub.watch(ref('s'), (event) => events.push(event));
    await waitUntil(() => polls >= 1, { message: 'first poll' });
    hub.observed(ref('s'), []);
    await waitUntil(() => polls >= 3, { message: 'more polls' });
    // Once, with what it read, for the watcher to compare with what was read elsewhere.
    expect(events).toEqual([{ firstRead: current }]);
  });

  it('a push does not move the baseline: a change whose push was lost is still found by the next poll', async () => {
    let current = [instance('10.0.0.1')];
    let polls = 0;
    const hub = new WatchHub({
      pollIntervalMs: 30,
      firstPollDelayMs: 0,
      log: silent,
      list: async () => {
        polls += 1;
        return current;
      },
    });
    hubs.push(hub);
    let calls = 0;
    hub.watch(ref('s'), () => (calls += 1));
    hub.observed(ref('s'), current);
    await waitUntil(() => polls >= 1, { message: 'first poll' });
    current = [instance('10.0.0.2')];
    hub.pushed('G@@s');
    expect(calls).toBe(1);
    await waitUntil(() => calls >= 2, { message: 'next poll calls again' });
  });
});
