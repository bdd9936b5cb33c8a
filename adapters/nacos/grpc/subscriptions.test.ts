import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { Instance, WatchEvent } from '../../../src/model/index.js';
import { waitUntil } from '../../../test/support/wait-until.js';
import type { ServiceRef } from '../wire.js';
import type { ServiceInfoRead } from './messages.js';
import { GrpcSubscriptions } from './subscriptions.js';

const log = pino({ level: 'silent' });
const orders: ServiceRef = { namespaceId: 'public', group: 'DEFAULT_GROUP', name: 'orders' };
const ordersDev: ServiceRef = { ...orders, namespaceId: 'dev' };
const inst = (ip: string): Instance => ({ ip, port: 1, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: {} });
const info = (ref: ServiceRef, instances: Instance[]): ServiceInfoRead => ({ name: ref.name, groupName: ref.group, clusters: '', instances, lastRefTime: 1, allIps: false });

/** A server stand-in: the state of each namespace's service, the subscribe calls made, a connection generation. */
function server() {
  const state = new Map<string, Instance[]>([
    ['public', [inst('10.0.0.1')]],
    ['dev', [inst('10.9.0.1')]],
  ]);
  const calls: Array<{ ns: string; subscribe: boolean }> = [];
  const conn = { generation: 1, ready: true };
  let failing = false;
  const subs = new GrpcSubscriptions({
    log,
    retryMs: 10,
    connection: () => conn,
    subscribe: async (ref, subscribe) => {
      await Promise.resolve();
      calls.push({ ns: ref.namespaceId, subscribe });
      if (failing) throw new Error('down');
      return subscribe ? info(ref, state.get(ref.namespaceId) ?? []) : undefined;
    },
  });
  return { subs, state, calls, conn, fail: (v: boolean) => (failing = v) };
}

describe('GrpcSubscriptions', () => {
  it('subscribes once per service, serves reads from it, and a read waiting for the first answer takes it as its own', async () => {
    const { subs, calls } = server();
    const events: Array<WatchEvent | undefined> = [];
    subs.watch(orders, (e) => events.push(e));
    subs.watch(orders, () => {});
    expect((await subs.read(orders))?.map((i) => i.ip)).toEqual(['10.0.0.1']);
    expect(await subs.read(orders)).toHaveLength(1);
    expect(calls).toEqual([{ ns: 'public', subscribe: true }]);
    expect(events).toEqual([]);
  });

  it('hands the first answer to the watchers when no read waited for it', async () => {
    const { subs } = server();
    const events: Array<WatchEvent | undefined> = [];
    subs.watch(orders, (e) => events.push(e));
    await waitUntil(() => events.length > 0);
    expect(events[0]?.firstRead?.map((i) => i.ip)).toEqual(['10.0.0.1']);
  });

  it('calls the watchers on a push that changes the list, not on one that does not', async () => {
    const { subs } = server();
    const events: Array<WatchEvent | undefined> = [];
    subs.watch(orders, (e) => events.push(e));
    await subs.read(orders);
    subs.pushed(info(orders, [inst('10.0.0.1')]));
    expect(events).toHaveLength(0);
    subs.pushed(info(orders, [inst('10.0.0.1'), inst('10.0.0.2')]));
    expect(events).toEqual([undefined]);
    expect((await subs.read(orders))?.map((i) => i.ip)).toEqual(['10.0.0.1', '10.0.0.2']);
  });

  it('subscribes every namespace again when a pushed name is watched in several (a push names no namespace)', async () => {
    const { subs, calls, state } = server();
    const seen: string[] = [];
    subs.watch(orders, () => seen.push('public'));
    subs.watch(ordersDev, () => seen.push('dev'));
    await Promise.all([subs.read(orders), subs.read(ordersDev)]);
    state.set('dev', [inst('10.9.0.1'), inst('10.9.0.2')]);
    subs.pushed(info(orders, state.get('dev') ?? []));
    await waitUntil(() => seen.length > 0 && calls.length === 4);
    expect(seen).toEqual(['dev']);
  });

  it('serves no cached list from a connection that is down or newer than the subscription', async () => {
    const { subs, conn } = server();
    subs.watch(orders, () => {});
    await subs.read(orders);
    conn.ready = false;
    expect(await subs.read(orders)).toBeUndefined();
    conn.ready = true;
    conn.generation = 2;
    expect(await subs.read(orders)).toBeUndefined();
    subs.resubscribeAll();
    expect(await subs.read(orders)).toHaveLength(1);
  });

  it('retries a failed subscribe, and unsubscribes when the last watcher goes', async () => {
    const { subs, calls, fail } = server();
    fail(true);
    const stop = subs.watch(orders, () => {});
    await waitUntil(() => calls.length >= 2);
    fail(false);
    await waitUntil(async () => (await subs.read(orders)) !== undefined);
    stop();
    await waitUntil(() => calls.at(-1)?.subscribe === false);
    expect(subs.size).toBe(0);
    expect(await subs.read(orders)).toBeUndefined();
  });
});
