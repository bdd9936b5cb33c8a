import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClusterSpec, ServiceKey, WatchEvent } from '../../src/model/index.js';
import { startConsulServer, type ConsulServer } from '../../test/support/consul-server.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createConsulAdapter, type ConsulAdapter } from './consul-adapter.js';

/*
 * A watch told that a read follows (the engine's reconcile, in this process) blocks on that read's
 * index instead of reading the service once more; without that read in time it reads by itself.
 */

const silent = pino({ level: 'silent' });
const key = (name: string): ServiceKey => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });
const register = (s: ConsulServer, id: string, ip: string) =>
  s.catalogRegister({ Node: 'agent-3', Address: '127.0.0.1', Service: { ID: id, Service: 'orders', Address: ip, Port: 8080 } });

describe('ConsulAdapter watch with a read that follows', () => {
  let server: ConsulServer | undefined;
  let adapter: ConsulAdapter | undefined;
  afterEach(async () => {
    await adapter?.close();
    await server?.close();
    adapter = undefined;
    server = undefined;
  });

  const start = async (requestTimeoutMs: number): Promise<{ s: ConsulServer; a: ConsulAdapter; reads: () => Array<{ index: string | undefined }> }> => {
    const s = await startConsulServer();
    server = s;
    register(s, 'orders-1', '10.50.0.1');
    const spec: ClusterSpec = { id: 'consul-follows', kind: 'consul', endpoints: [s.endpoint], labels: {}, options: { requestTimeoutMs, blockingWaitMs: 30_000 } };
    const a = createConsulAdapter(spec, { logger: silent });
    adapter = a;
    const reads = () => s.requests.filter((r) => r.path === '/v1/health/service/orders').map((r) => ({ index: r.query.index }));
    return { s, a, reads };
  };

  it('blocks on the index of the read that follows, reading the service once, and calls back on a change', async () => {
    const { s, a, reads } = await start(60_000);
    const events: Array<WatchEvent | undefined> = [];
    a.watch(key('orders'), (event) => events.push(event), { readFollows: true });
    const read = await a.listInstances(key('orders'));
    expect(read.map((i) => i.ip)).toEqual(['10.50.0.1']);
    const readIndex = String(s.index());

    await waitUntil(() => s.waitingQueries() === 1, { message: 'the watch blocking' });
    // Only the read itself was answered; the watch waits on its index.
    expect(reads()).toEqual([{ index: undefined }]);
    expect(events).toEqual([]);

    register(s, 'orders-2', '10.50.0.2');
    await waitUntil(() => events.length === 1, { message: 'the change called back' });
    expect(events).toEqual([undefined]);
    expect(reads()).toEqual([{ index: undefined }, { index: readIndex }]);
  });

  it('reads by itself and hands that read over when no read comes within requestTimeoutMs', async () => {
    const { s, a, reads } = await start(300);
    const events: Array<WatchEvent | undefined> = [];
    a.watch(key('orders'), (event) => events.push(event), { readFollows: true });
    await waitUntil(() => events.length === 1, { message: 'the first read of the watch' });
    expect(events[0]?.firstRead?.map((i) => i.ip)).toEqual(['10.50.0.1']);
    await waitUntil(() => s.waitingQueries() === 1, { message: 'the watch blocking' });
    expect(reads()[0]).toEqual({ index: undefined });
  });
});
