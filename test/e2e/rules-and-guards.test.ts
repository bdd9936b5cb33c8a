import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { addRegistry, api, persistent, defineClusters, defineTask, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

const ipsOf = (registry: RunningRegistry, namespace: string, group: string, service: string): string[] =>
  [...(registry.store.getService(namespace, group, service)?.instances.values() ?? [])]
    .filter((i) => i.metadata[MARK_TASK] !== undefined)
    .map((i) => i.ip)
    .sort();

/** Mapping rules and the mass-deletion guard, end to end over real Redis and embedded registries. */
describe('mapping rules and guards', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    b.store.createNamespace({ id: 'prod', name: 'prod', description: '' });
    url = (await startSync(fx)).url as string;
    // The guards on their own: no source warm-up holds removals before them (see source-warmup.test.ts).
    await defineClusters(url, fx, { warmupSeconds: 0 });
  });
  afterAll(async () => {
    await stopFixture(fx);
  });

  it('copies under the mapped namespace, group and name, with the metadata the rules allow', async () => {
    a.store.register('public', 'ORDERS', 'orders', persistent('10.40.0.1', { app: 'orders', 'secret.token': 't', 'secret.key': 'k' }));
    a.store.register('public', 'ORDERS', 'legacy-billing', persistent('10.40.0.2', { app: 'billing' }));
    await defineTask(url, 'mapped', 'a', 'b', '*', {
      group: 'ORDERS',
      options: {
        mapping: { namespaces: { public: 'prod' }, groups: { ORDERS: 'SHOP' }, prefix: 'sh-', rename: { 'legacy-billing': 'billing' }, metadataDeny: ['secret.*'] },
      },
    });
    await waitUntil(() => ipsOf(b, 'prod', 'SHOP', 'sh-orders').length === 1 && ipsOf(b, 'prod', 'SHOP', 'billing').length === 1, {
      message: 'copies under the mapped names',
    });
    const copy = [...(b.store.getService('prod', 'SHOP', 'sh-orders')?.instances.values() ?? [])][0];
    expect(copy?.metadata).toEqual({ app: 'orders', 'regsync.origin': 'a', 'regsync.path': 'a', 'regsync.task': 'mapped' });
    // Nothing under the source's names.
    expect(b.store.listServices('public', 'ORDERS')).toEqual([]);
    const detail = (await api(url, 'GET', '/api/v1/tasks/mapped')).body;
    expect(detail.status.services.map((s: { service: string; destination: string }) => [s.service, s.destination])).toEqual([
      ['public/ORDERS/legacy-billing', 'prod/SHOP/billing'],
      ['public/ORDERS/orders', 'prod/SHOP/sh-orders'],
    ]);

    // Deleting the task removes the copies where the rules put them.
    expect((await api(url, 'DELETE', '/api/v1/tasks/mapped')).status).toBe(204);
    expect(ipsOf(b, 'prod', 'SHOP', 'sh-orders')).toEqual([]);
    expect(ipsOf(b, 'prod', 'SHOP', 'billing')).toEqual([]);
  });

  it('refuses rules that would make two services one', async () => {
    const res = await api(url, 'POST', '/api/v1/tasks', {
      source: 'a',
      destination: 'b',
      service: '*',
      options: { mapping: { rename: { orders: 'shop', payments: 'shop' } } },
    });
    expect(res.status).toBe(400);
    expect(res.body.error).toEqual({ code: 'invalid_rules', message: 'options.mapping.rename maps both "orders" and "payments" to "shop": two services would become one' });
  });

  it('holds a sudden 90% drop until an operator releases it', async () => {
    const ips = Array.from({ length: 10 }, (_, i) => `10.41.0.${i + 1}`);
    for (const ip of ips) a.store.register('public', 'DEFAULT_GROUP', 'guarded', persistent(ip));
    await defineTask(url, 'guarded', 'a', 'b', 'guarded', { options: { massDeletionConfirm: 'operator' } });
    await waitUntil(() => ipsOf(b, 'public', 'DEFAULT_GROUP', 'guarded').length === 10, { message: '10 copies' });

    for (const ip of ips.slice(1)) a.store.deregister('public', 'DEFAULT_GROUP', 'guarded', ip, 8080, 'DEFAULT');
    a.store.register('public', 'DEFAULT_GROUP', 'guarded', persistent('10.41.1.1'));
    const held = async () => (await api(url, 'GET', '/api/v1/tasks/guarded')).body.status.services[0];
    await waitUntil(async () => (await held()).held !== null, { message: 'mass deletion held' });
    const status = await held();
    expect(status.held).toMatchObject({ removes: 9, copies: 10, confirm: 'operator' });
    expect(status.lastError).toMatch(/holding a mass deletion: 9 of 10 copies \(90%\) would be removed; released by POST \/api\/v1\/tasks\/guarded\/release/);
    // The new instance is still copied; nothing is removed.
    await waitUntil(() => ipsOf(b, 'public', 'DEFAULT_GROUP', 'guarded').includes('10.41.1.1'), { message: 'new copy written while holding' });
    expect(ipsOf(b, 'public', 'DEFAULT_GROUP', 'guarded')).toHaveLength(11);
    // A resync is not a confirmation.
    expect((await api(url, 'POST', '/api/v1/tasks/guarded/resync')).status).toBe(202);
    await waitUntil(async () => (await held()).lastSyncAt !== status.lastSyncAt, { message: 'resync ran' });
    expect(ipsOf(b, 'public', 'DEFAULT_GROUP', 'guarded')).toHaveLength(11);

    const released = await api(url, 'POST', '/api/v1/tasks/guarded/release', {});
    expect(released).toMatchObject({ status: 202, body: { released: ['public/DEFAULT_GROUP/guarded'] } });
    await waitUntil(() => ipsOf(b, 'public', 'DEFAULT_GROUP', 'guarded').length === 2, { message: 'deletion applied after the release' });
    expect(ipsOf(b, 'public', 'DEFAULT_GROUP', 'guarded')).toEqual(['10.41.0.1', '10.41.1.1']);
    expect((await held()).held).toBeNull();
  });

  it('holds a burst of five single deregistrations of a six-copy service, each read on its own', async () => {
    const ips = Array.from({ length: 6 }, (_, i) => `10.43.0.${i + 1}`);
    for (const ip of ips) a.store.register('public', 'DEFAULT_GROUP', 'burst', persistent(ip));
    await defineTask(url, 'burst', 'a', 'b', 'burst', { options: { massDeletionConfirm: 'operator' } });
    await waitUntil(() => ipsOf(b, 'public', 'DEFAULT_GROUP', 'burst').length === 6, { message: '6 copies' });

    // An outage deregisters over seconds: five requests, one instance each, each met by its own reconcile.
    const service = async () => (await api(url, 'GET', '/api/v1/tasks/burst')).body.status.services[0];
    for (const [i, ip] of ips.slice(1).entries()) {
      a.store.deregister('public', 'DEFAULT_GROUP', 'burst', ip, 8080, 'DEFAULT');
      await waitUntil(async () => (await service()).sourceInstances === 5 - i, { message: `read with ${5 - i} left` });
    }
    // Half of the six may go (three), judged over the guard's window; the other two removals are held.
    expect(ipsOf(b, 'public', 'DEFAULT_GROUP', 'burst')).toEqual(['10.43.0.1', '10.43.0.5', '10.43.0.6']);
    expect((await service()).held).toMatchObject({ removes: 2, copies: 3, peak: 6, confirm: 'operator' });

    expect((await api(url, 'POST', '/api/v1/tasks/burst/release', {})).status).toBe(202);
    await waitUntil(() => ipsOf(b, 'public', 'DEFAULT_GROUP', 'burst').length === 1, { message: 'the rest removed after the release' });
    expect(ipsOf(b, 'public', 'DEFAULT_GROUP', 'burst')).toEqual(['10.43.0.1']);
  });

  it('applies a held drop once a later read confirms it (the default)', async () => {
    const ips = Array.from({ length: 6 }, (_, i) => `10.42.0.${i + 1}`);
    for (const ip of ips) a.store.register('public', 'DEFAULT_GROUP', 'confirmed', persistent(ip));
    await defineTask(url, 'confirmed', 'a', 'b', 'confirmed');
    await waitUntil(() => ipsOf(b, 'public', 'DEFAULT_GROUP', 'confirmed').length === 6, { message: '6 copies' });
    for (const ip of ips.slice(2)) a.store.deregister('public', 'DEFAULT_GROUP', 'confirmed', ip, 8080, 'DEFAULT');
    const seenHeld = waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/confirmed')).body.status.services[0].held !== null, {
      message: 'drop held first',
    });
    await seenHeld;
    expect(ipsOf(b, 'public', 'DEFAULT_GROUP', 'confirmed')).toHaveLength(6);
    await waitUntil(() => ipsOf(b, 'public', 'DEFAULT_GROUP', 'confirmed').length === 2, { message: 'confirmed by a later read' });
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/confirmed')).body.status.services[0].held === null, { message: 'hold cleared' });
  });

  it('leaves a service over maxInstances as it is and says why', async () => {
    for (let i = 1; i <= 4; i += 1) a.store.register('public', 'DEFAULT_GROUP', 'big', persistent(`10.43.0.${i}`));
    await defineTask(url, 'big', 'a', 'b', 'big', { options: { maxInstances: 3 } });
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/big')).body.status.services[0]?.lastError, { message: 'status says why' });
    expect((await api(url, 'GET', '/api/v1/tasks/big')).body.status.services[0].lastError).toMatch(/lists 4 instances, more than the task's maxInstances \(3\)/);
    expect(ipsOf(b, 'public', 'DEFAULT_GROUP', 'big')).toEqual([]);
  });
});
