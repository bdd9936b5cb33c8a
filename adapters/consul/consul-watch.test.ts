import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ClusterSpec } from '../../src/model/index.js';
import { startConsulServer, type ConsulServer } from '../../test/support/consul-server.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createConsulAdapter, type ConsulAdapter } from './consul-adapter.js';

/*
 * Watches beyond maxBlockingQueries: Consul refuses a client more than 200 connections, so the
 * adapter holds at most that many blocking queries open and reads the other watched services
 * on a period; both kinds of watch see changes.
 */
describe('ConsulAdapter watches over the blocking-query limit', () => {
  let server: ConsulServer;
  let adapter: ConsulAdapter;
  const key = (name: string) => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });

  beforeEach(async () => {
    server = await startConsulServer();
    const spec: ClusterSpec = {
      id: 'consul-limit',
      kind: 'consul',
      endpoints: [server.endpoint],
      labels: {},
      options: { maxBlockingQueries: 1, pollIntervalMs: 100, blockingWaitMs: 5_000 },
    };
    adapter = createConsulAdapter(spec, { logger: pino({ level: 'silent' }) });
  });
  afterEach(async () => {
    await adapter.close();
    await server.close();
  });

  it('blocks for one service, polls the other, and both see a new instance', async () => {
    const calls = { a: 0, b: 0 };
    adapter.watch(key('a'), () => (calls.a += 1));
    adapter.watch(key('b'), () => (calls.b += 1));
    await waitUntil(() => calls.a > 0 && calls.b > 0, { message: 'both first reads' });
    await waitUntil(() => server.waitingQueries() === 1, { message: 'one blocking query open' });
    const polled = () => server.requests.filter((r) => r.path === '/v1/health/service/b' || r.path === '/v1/health/service/a');
    await waitUntil(() => polled().filter((r) => !r.blocking).length >= 4, { message: 'the other service read on its period' });
    expect(server.waitingQueries()).toBe(1);

    const before = { ...calls };
    for (const name of ['a', 'b']) server.catalogRegister({ Node: 'n1', Address: '127.0.0.1', Service: { ID: `${name}-1`, Service: name, Address: '10.30.0.1', Port: 80 } });
    await waitUntil(() => calls.a > before.a && calls.b > before.b, { message: 'both watches called after the change' });
  });

  it('gives its slot back when a watch stops, so another service blocks', async () => {
    const stopA = adapter.watch(key('a'), () => undefined);
    await waitUntil(() => server.waitingQueries() === 1, { message: 'a blocks' });
    adapter.watch(key('b'), () => undefined);
    stopA();
    await waitUntil(() => server.requests.some((r) => r.path === '/v1/health/service/b' && r.blocking), { message: 'b blocks once a stopped' });
  });
});
