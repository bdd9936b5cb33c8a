import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ClusterSpec, ServiceKey, WatchEvent } from '../../src/model/index.js';
import { startConsulServer, type ConsulServer } from '../../test/support/consul-server.js';
import { startTcpGate, type TcpGate } from '../../test/support/tcp-gate.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createConsulAdapter, type ConsulAdapter } from './consul-adapter.js';

/*
 * Watches of a Consul that stopped answering back off (100 ms doubling); once it answers again they
 * must not sleep out that backoff: one probe a second finds it back, and every watch reads again at
 * once, so a change made during the outage is called back about a second after it ends.
 */
describe('ConsulAdapter watches after an outage', () => {
  let server: ConsulServer;
  let gate: TcpGate;
  let adapter: ConsulAdapter;
  const key = (name: string): ServiceKey => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });
  const register = (name: string, n: number) =>
    server.catalogRegister({ Node: 'n1', Address: '127.0.0.1', Service: { ID: `${name}-${n}`, Service: name, Address: `10.72.0.${n}`, Port: 8080 } });

  beforeEach(async () => {
    server = await startConsulServer();
    gate = await startTcpGate(server.endpoint);
    // A backoff that grows far past the test, were nothing to end it.
    const spec: ClusterSpec = { id: 'consul-reach', kind: 'consul', endpoints: [gate.endpoint], labels: {}, options: { backoffMaxMs: 600_000, requestTimeoutMs: 1_000 } };
    adapter = createConsulAdapter(spec, { logger: pino({ level: 'silent' }) });
  });
  afterEach(async () => {
    await adapter.close();
    await gate.close();
    await server.close();
  });

  it('reads again at once when Consul answers again, for every watch, however long the backoff grew', async () => {
    register('a', 1);
    register('b', 1);
    const events = { a: [] as Array<WatchEvent | undefined>, b: [] as Array<WatchEvent | undefined> };
    adapter.watch(key('a'), (e) => events.a.push(e));
    adapter.watch(key('b'), (e) => events.b.push(e));
    await waitUntil(() => events.a.length === 1 && events.b.length === 1 && server.waitingQueries() === 2, { message: 'both watches blocking' });

    gate.cut();
    // Down about 14 s: each watch has tried 8 times (its next try is 25.5 s after the cut), the
    // probe once a second.
    await waitUntil(() => gate.refused() >= 30, { message: 'the watches and the probe refused', timeoutMs: 60_000 });
    register('a', 2);
    register('b', 2);
    gate.open();
    await waitUntil(() => events.a.length === 2 && events.b.length === 2, { message: 'both changes called back', timeoutMs: 10_000 });
    await waitUntil(() => server.waitingQueries() === 2, { message: 'both watches blocking again' });
    // The probe that found Consul back, and nothing more of it once it answered.
    const probes = server.requests.filter((r) => r.path === '/v1/status/leader').length;
    expect(probes).toBeGreaterThanOrEqual(1);
    register('a', 3);
    await waitUntil(() => events.a.length === 3, { message: 'a change after the outage' });
    expect(server.requests.filter((r) => r.path === '/v1/status/leader').length).toBe(probes);
  });
});
