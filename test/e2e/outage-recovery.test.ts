import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startConsulServer, type ConsulServer } from '../support/consul-server.js';
import { scrape } from '../support/prometheus.js';
import { addRegistry, api, copiesIn, defineTask, persistent, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { startTcpGate, type TcpGate } from '../support/tcp-gate.js';
import { waitUntil } from '../support/wait-until.js';

/**
 * Far longer than any wait below: only the recovery of the failed service syncs, never a periodic
 * full sync, can bring a change within the test.
 */
const FULL_SYNC_MS = 600_000;
/** A reconcile is tried this many times (the shard queue's attempts) before it waits. */
const ATTEMPTS = 4;

/**
 * A registry that stops answering for longer than a reconcile's retries last: the change made
 * meanwhile must arrive soon after the registry answers again, not at the next full sync. Real
 * parts: Redis, a regsync node, embedded Nacos registries, a TCP gate in front of the one that goes.
 */
describe('a change made during an outage arrives after recovery, not at the next full sync', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let c: RunningRegistry;
  let gate: TcpGate;
  let consul: ConsulServer;
  let consulGate: TcpGate;
  let url: string;

  const failed = async (task: string) => (await scrape(`${url}/metrics`)).value('regsync_reconciles_total', { task, outcome: 'failed' }) ?? 0;
  const copyIps = (registry: RunningRegistry, name: string) => copiesIn(registry, name).map((i) => i.ip).sort().join();

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    c = await addRegistry(fx, 'c');
    gate = await startTcpGate(b.endpoint);
    consul = await startConsulServer();
    consulGate = await startTcpGate(consul.endpoint);
    url = (await startSync(fx)).url as string;
    // The source's watch tells changes by push only (no poll within the test), so that a change
    // is reconciled once, when it is made.
    for (const [id, endpoint] of [['a', a.endpoint], ['b', gate.endpoint]] as const) {
      const options = { apiVersion: 'v1', requestTimeoutMs: 1_000, pollIntervalMs: FULL_SYNC_MS };
      const res = await api(url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint], options });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
    }
    const direct = await api(url, 'POST', '/api/v1/clusters', { id: 'c', kind: 'nacos', endpoints: [c.endpoint], options: { apiVersion: 'v1', pollIntervalMs: FULL_SYNC_MS } });
    expect(direct.status, JSON.stringify(direct.body)).toBe(201);
    // Consul's watch backs off as it does by default (100 ms doubling up to 30 s).
    const gated = await api(url, 'POST', '/api/v1/clusters', { id: 'consul', kind: 'consul', endpoints: [consulGate.endpoint], options: { requestTimeoutMs: 1_000 } });
    expect(gated.status, JSON.stringify(gated.body)).toBe(201);
  });
  afterAll(async () => {
    await stopFixture(fx);
    await Promise.all([gate.close(), consulGate.close()]);
    await consul.close();
  });

  it('the destination comes back: the failed service sync runs again at once and writes the change', async () => {
    a.store.register('public', 'DEFAULT_GROUP', 'orders', persistent('10.81.0.1'));
    await defineTask(url, 'a-to-b', 'a', 'b', 'orders', { options: { fullSyncIntervalMs: FULL_SYNC_MS } });
    await waitUntil(() => copyIps(b, 'orders') === '10.81.0.1', { message: 'the first copy' });

    gate.cut();
    const before = await failed('a-to-b');
    // A change in the source while the destination is down: its reconcile fails, every attempt.
    a.store.register('public', 'DEFAULT_GROUP', 'orders', persistent('10.81.0.2'));
    await waitUntil(async () => (await failed('a-to-b')) >= before + ATTEMPTS, { message: 'every attempt of the reconcile failed', timeoutMs: 30_000 });
    expect(copyIps(b, 'orders')).toBe('10.81.0.1');

    const back = performance.now();
    gate.open();
    await waitUntil(() => copyIps(b, 'orders') === '10.81.0.1,10.81.0.2', { message: 'the change made during the outage', timeoutMs: 30_000 });
    console.log(`destination outage: the change reached the destination ${(performance.now() - back).toFixed(0)} ms after it answered again (full sync every ${FULL_SYNC_MS} ms)`);
    await waitUntil(async () => ((await api(url, 'GET', '/api/v1/tasks/a-to-b')).body.status.services[0]?.lastError ?? null) === null, { message: 'the status clear again' });
  });

  it('the source comes back: the watch of a Consul that was down reads again at once, and the change made meanwhile arrives', async () => {
    const register = (n: number) => consul.catalogRegister({ Node: 'app-node', Address: '127.0.0.1', Service: { ID: `pay-${n}`, Service: 'pay', Address: `10.81.1.${n}`, Port: 8080 } });
    register(1);
    await defineTask(url, 'consul-to-c', 'consul', 'c', 'pay', { options: { fullSyncIntervalMs: FULL_SYNC_MS } });
    await waitUntil(() => copyIps(c, 'pay') === '10.81.1.1', { message: 'the first copy' });
    await waitUntil(() => consul.waitingQueries() === 1, { message: 'the watch blocking' });

    consulGate.cut();
    // Down for longer than a reconcile's retries last: the watch has tried again 8 times, and its
    // backoff has grown to 25.6 s. Nothing reconciles meanwhile; the change is made in Consul.
    await waitUntil(() => consulGate.refused() >= 8, { message: 'the watch tried again 8 times', timeoutMs: 60_000 });
    register(2);

    const back = performance.now();
    consulGate.open();
    await waitUntil(() => copyIps(c, 'pay') === '10.81.1.1,10.81.1.2', { message: 'the change made during the outage', timeoutMs: 20_000 });
    console.log(`source outage: the change reached the destination ${(performance.now() - back).toFixed(0)} ms after Consul answered again (full sync every ${FULL_SYNC_MS} ms)`);
    // The watch blocks again, and the next change arrives through it.
    await waitUntil(() => consul.waitingQueries() === 1, { message: 'the watch blocking again' });
    register(3);
    await waitUntil(() => copyIps(c, 'pay') === '10.81.1.1,10.81.1.2,10.81.1.3', { message: 'a change after the outage' });
  });
});
