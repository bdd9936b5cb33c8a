import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MARK_TASK } from '../../src/model/types.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { addRegistry, api, persistent, defineTask, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

const NAMESPACES = ['public', 'dev'];
const GROUPS = ['DEFAULT_GROUP', 'ORDERS', 'PAYMENTS'];

/** Service `n` of the source: spread over 2 namespaces x 3 groups; one made-up address each. */
function placeOf(n: number): { namespace: string; group: string; name: string; ip: string } {
  return {
    namespace: NAMESPACES[n % 2] as string,
    group: GROUPS[Math.floor(n / 2) % 3] as string,
    name: `svc-${n}`,
    ip: `10.50.${Math.floor(n / 250)}.${n % 250}`,
  };
}

/** Copies in `registry`, over every namespace and group, as `namespace/group/name`. */
function copies(registry: RunningRegistry): string[] {
  return NAMESPACES.flatMap((ns) =>
    registry.store.listServices(ns).flatMap((s) => [...s.instances.values()].filter((i) => i.metadata[MARK_TASK] === 'everything').map(() => `${ns}/${s.groupName}/${s.name}`)),
  );
}

/**
 * A task for every service of every group and namespace: 500 services in 3 groups and 2
 * namespaces are copied; 50 new ones are picked up; 50 that vanish take their copies with them;
 * Dubbo's consumer entries are left out.
 */
describe('service "*" in every group and namespace', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;

  beforeAll(async () => {
    fx = await startFixture();
    // Empty services leave A's service list quickly, as they do in Nacos (after a while).
    a = await addRegistry(fx, 'a', { expiry: { emptyServiceTtlMs: 300, sweepIntervalMs: 100 } });
    b = await addRegistry(fx, 'b');
    for (const registry of [a, b]) registry.store.createNamespace({ id: 'dev', name: 'dev', description: '' });
    for (let n = 0; n < 500; n += 1) {
      const p = placeOf(n);
      a.store.register(p.namespace, p.group, p.name, persistent(p.ip));
    }
    a.store.register('public', 'DEFAULT_GROUP', 'consumers:com.acme.Orders::', persistent('10.59.0.1'));
    url = (await startSync(fx)).url as string;
    // A's service lists are polled often, so that appearing and vanishing services show quickly.
    // 50 services vanishing at once start a source warm-up: a short one here (2 s, not Nacos' 30; see source-warmup.test.ts).
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'a', kind: 'nacos', endpoints: [a.endpoint], options: { serviceListPollIntervalMs: 300, warmupSeconds: 2 } })).status).toBe(201);
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'b', kind: 'nacos', endpoints: [b.endpoint] })).status).toBe(201);
    await defineTask(url, 'everything', 'a', 'b', '*', { group: '*', namespace: '*' });
  }, 120_000);
  afterAll(async () => {
    await stopFixture(fx);
  });

  it('copies every service of every group and namespace, and no consumer entry', async () => {
    await waitUntil(() => copies(b).length === 500, { message: '500 copies in B', timeoutMs: 60_000 });
    for (const n of [0, 1, 2, 3, 4, 5, 499]) {
      const p = placeOf(n);
      expect(b.store.getService(p.namespace, p.group, p.name)?.instances.size, `${p.namespace}/${p.group}/${p.name}`).toBe(1);
    }
    expect(b.store.getService('public', 'DEFAULT_GROUP', 'consumers:com.acme.Orders::')).toBeUndefined();
    const detail = (await api(url, 'GET', '/api/v1/tasks/everything')).body;
    expect(detail.status.services).toHaveLength(500);
  });

  it('picks up 50 new services', async () => {
    for (let n = 500; n < 550; n += 1) {
      const p = placeOf(n);
      a.store.register(p.namespace, p.group, p.name, persistent(p.ip));
    }
    await waitUntil(() => copies(b).length === 550, { message: '550 copies in B', timeoutMs: 60_000 });
  });

  it('drops 50 services that vanish, with their copies', async () => {
    for (let n = 0; n < 50; n += 1) {
      const p = placeOf(n);
      a.store.deregister(p.namespace, p.group, p.name, p.ip, 8080, 'DEFAULT');
    }
    await waitUntil(() => copies(b).length === 500, { message: 'copies of vanished services gone', timeoutMs: 60_000 });
    expect(b.store.getService(placeOf(0).namespace, placeOf(0).group, placeOf(0).name)?.instances.size ?? 0).toBe(0);
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/tasks/everything')).body.status.services.length === 500, {
      message: 'service syncs of vanished services forgotten',
      timeoutMs: 60_000,
    });
  });
});
