import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ServiceKey, ServicesChange } from '../../src/model/index.js';
import { FuzzyServiceLists } from './fuzzy-service-lists.js';
import { FuzzyWatches, type FuzzyWatchConnection } from './grpc/fuzzy-watches.js';
import { FUZZY_CHANGE, FUZZY_SYNC_TYPE, SERVER_REQUEST } from './grpc/messages.js';

const log = pino({ level: 'silent' });
const scope = { namespace: 'public', group: 'DEFAULT_GROUP' };
const PATTERN = 'public>>DEFAULT_GROUP>>*';
const svc = (name: string): ServiceKey => ({ ...scope, name });
const serviceKey = (name: string) => `public@@DEFAULT_GROUP@@${name}`;
const COALESCE_MS = 100;

/**
 * The service-list watch of one scope over a real {@link FuzzyWatches}, its gRPC connection a fake
 * that accepts every WATCH; the server's syncs and notifies are handed to the watches as the
 * connection would. Timers are fake, so each coalescing window ends when the test says.
 */
describe('FuzzyServiceLists', () => {
  let connection: FuzzyWatchConnection & { currentGeneration: number };
  let watches: number;
  let fuzzy: FuzzyWatches;
  let lists: FuzzyServiceLists;
  let calls: Array<ServicesChange | undefined>;

  const notify = (name: string, changedType: string) => fuzzy.handle(SERVER_REQUEST.fuzzyWatchChange, { serviceKey: serviceKey(name), changedType });
  const added = (name: string) => notify(name, FUZZY_CHANGE.add);
  const deleted = (name: string) => notify(name, FUZZY_CHANGE.remove);
  const windowEnds = () => vi.advanceTimersByTime(COALESCE_MS);

  beforeEach(async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval'] });
    watches = 0;
    connection = {
      request: async () => {
        watches += 1;
        return {};
      },
      ready: async () => {},
      isReady: true,
      currentGeneration: 1,
      ability: { fuzzyWatch: true },
    };
    fuzzy = new FuzzyWatches({ connection, log });
    lists = new FuzzyServiceLists({ log, fuzzy: async () => fuzzy, listNamespaces: async () => [], intervalMs: 600_000, poll: () => () => {}, coalesceMs: COALESCE_MS });
    calls = [];
    lists.watch(scope, (change) => calls.push(change));
    await vi.waitFor(() => expect(watches).toBe(1));
    // The server's first sync: one service, then FINISH.
    fuzzy.handle(SERVER_REQUEST.fuzzyWatchSync, { groupKeyPattern: PATTERN, syncType: FUZZY_SYNC_TYPE.init, contexts: [{ serviceKey: serviceKey('orders'), changedType: FUZZY_CHANGE.add }] });
    fuzzy.handle(SERVER_REQUEST.fuzzyWatchSync, { groupKeyPattern: PATTERN, syncType: FUZZY_SYNC_TYPE.finish });
    await vi.waitFor(() => expect(lists.complete(scope)).toBe(true));
  });
  afterEach(() => {
    lists.close();
    fuzzy.close();
    vi.useRealTimers();
  });

  it('tells the watchers nothing (list again) once the scope is complete, then each change with its services', () => {
    expect(calls).toEqual([undefined]);
    windowEnds();
    added('users');
    expect(calls).toEqual([undefined, { added: [svc('users')], removed: [] }]);
    windowEnds();
    windowEnds();
    deleted('orders');
    expect(calls.slice(2)).toEqual([{ added: [], removed: [svc('orders')] }]);
    expect(lists.list(scope)).toEqual([svc('users')]);
  });

  it('merges the changes of a coalescing window into one call, each service as it ended', () => {
    windowEnds();
    added('first');
    expect(calls).toHaveLength(2);
    // Within the window: added then removed, removed then added, added twice, an unknown one removed (no change at all).
    added('brief');
    deleted('brief');
    deleted('orders');
    added('orders');
    added('users');
    added('users');
    deleted('first');
    deleted('never-there');
    expect(calls).toHaveLength(2);
    windowEnds();
    expect(calls).toHaveLength(3);
    const merged = calls[2] as ServicesChange;
    expect(merged.added.map((s) => s.name).sort()).toEqual(['orders', 'users']);
    expect(merged.removed.map((s) => s.name).sort()).toEqual(['brief', 'first']);
    expect(lists.list(scope)?.map((s) => s.name).sort()).toEqual(['orders', 'users']);
    // Nothing came in the next window: no call.
    windowEnds();
    expect(calls).toHaveLength(3);
  });

  it('tells the changes of a re-WATCH diff, and nothing once the pattern is complete again after a reconnect', async () => {
    windowEnds();
    // The periodic re-WATCH on the same connection: the server's DIFF names what drifted.
    fuzzy.handle(SERVER_REQUEST.fuzzyWatchSync, {
      groupKeyPattern: PATTERN,
      syncType: FUZZY_SYNC_TYPE.diff,
      contexts: [
        { serviceKey: serviceKey('users'), changedType: FUZZY_CHANGE.add },
        { serviceKey: serviceKey('orders'), changedType: FUZZY_CHANGE.remove },
      ],
    });
    expect(calls.slice(1)).toEqual([{ added: [svc('users')], removed: [svc('orders')] }]);
    windowEnds();
    windowEnds();

    added('billing');
    expect(calls).toHaveLength(3);
    // A new connection within the window: once the WATCH is accepted again, the window's call tells nothing.
    connection.currentGeneration = 2;
    fuzzy.connected(2);
    added('ledger');
    await vi.waitFor(() => expect(watches).toBe(2));
    await vi.waitFor(() => expect(lists.complete(scope)).toBe(true));
    windowEnds();
    expect(calls.slice(3)).toEqual([undefined]);
  });
});
