import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { freePort } from '../support/ports.js';
import { addRegistry, api, defineTask, registerNative, startFixture, startSync, stopFixture, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

type Statuses = Array<{ id: string; reachability: string; failure: string | null; lastError: string | null }>;

/** A cluster that refuses regsync's credentials says "auth failed", one that does not answer says "unreachable". */
describe('cluster reachability tells why', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let locked: RunningRegistry;
  let url: string;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    locked = await addRegistry(fx, 'locked', { users: new Map([['regsync', 'the-right-password']]) });
    url = (await startSync(fx)).url as string;
    const clusters = [
      { id: 'a', kind: 'nacos', endpoints: [a.endpoint], options: { apiVersion: 'v1' } },
      { id: 'locked', kind: 'nacos', endpoints: [locked.endpoint], username: 'regsync', password: 'a-wrong-password', options: { apiVersion: 'v1' } },
      { id: 'gone', kind: 'nacos', endpoints: [`127.0.0.1:${await freePort()}`], options: { apiVersion: 'v1', requestTimeoutMs: 1_000 } },
    ];
    for (const c of clusters) expect((await api(url, 'POST', '/api/v1/clusters', c)).status).toBe(201);
    natives.push(await registerNative(() => a, 'orders', '10.62.0.1', 8080));
    await defineTask(url, 'to-locked', 'a', 'locked', 'orders');
    await defineTask(url, 'to-gone', 'a', 'gone', 'orders');
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await stopFixture(fx);
  });

  it('shows auth failed for refused credentials and unreachable for no answer, each with the registry\'s reason', async () => {
    const statuses = await waitUntil(
      async () => {
        const items = (await api(url, 'GET', '/api/v1/clusters:status')).body.items as Statuses;
        const byId = new Map(items.map((s) => [s.id, s]));
        return byId.get('locked')?.reachability === 'failing' && byId.get('gone')?.reachability === 'failing' ? byId : undefined;
      },
      { message: 'both destinations seen failing' },
    );
    expect(statuses.get('locked')).toMatchObject({ failure: 'auth_failed' });
    expect(statuses.get('gone')).toMatchObject({ failure: 'unreachable' });
    expect(statuses.get('a')).toMatchObject({ reachability: 'ok', failure: null });
    expect(statuses.get('gone')?.lastError).toMatch(/ECONNREFUSED|no endpoint answered/);
    expect(JSON.stringify([...statuses.values()])).not.toContain('a-wrong-password');
    // The gauge says the same.
    const metrics = await (await fetch(`${url}/metrics`)).text();
    await waitUntil(async () => /regsync_cluster_state\{cluster="locked",state="auth_failed"\} 1/.test(await (await fetch(`${url}/metrics`)).text()), { message: 'regsync_cluster_state of locked is auth_failed' });
    expect(metrics).toContain('regsync_cluster_state{cluster="gone",state="unreachable"} 1');
  });

  it('records a cluster event when a cluster stops being reached, and one when it is reached again', async () => {
    const clusterEvents = async (task: string) =>
      ((await api(url, 'GET', `/api/v1/tasks/${task}/events`)).body.items as Array<{ kind: string; clusterId?: string; message: string }>).filter((e) => e.kind === 'cluster' && e.clusterId !== undefined && !e.message.includes('saved'));
    const down = await waitUntil(async () => (await clusterEvents('to-gone')).find((e) => e.message.startsWith('cluster gone cannot be reached: ')), { message: 'a cluster event for gone' });
    expect(down.clusterId).toBe('gone');
    // The right password: the next reconcile reaches it, and says so once.
    expect((await api(url, 'PUT', '/api/v1/clusters/locked', { id: 'locked', kind: 'nacos', endpoints: [locked.endpoint], username: 'regsync', password: 'the-right-password', options: { apiVersion: 'v1' } })).status).toBe(200);
    await waitUntil(async () => (await clusterEvents('to-locked')).some((e) => e.message === 'cluster locked is reachable again'), { message: 'locked reachable again' });
    expect((await clusterEvents('to-locked')).filter((e) => e.message.startsWith('cluster locked cannot be reached')).length).toBe(1);
  });
});
