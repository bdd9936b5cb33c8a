import Consul from 'consul';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ClusterSpec, ServiceKey, WatchEvent } from '../../src/model/index.js';
import { startConsulServer, type ConsulServer, type ConsulTokenPolicy } from '../../test/support/consul-server.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createConsulAdapter, type ConsulAdapter } from './consul-adapter.js';

/*
 * A blocking query answered while the cluster's token could not read the service (an answer
 * emptied by ACLs, `X-Consul-Results-Filtered-By-ACLs`) carries a change the adapter cannot see.
 * Its index must not be taken: the watch asks again at the index before it, so that once the token
 * may read again the change is called back at once, not after the next change or the query's wait.
 */
describe('ConsulAdapter watch across an answer emptied by ACLs', () => {
  let server: ConsulServer;
  let adapter: ConsulAdapter;
  let app: Consul;
  const tokens: Record<string, ConsulTokenPolicy> = {};
  const key = (name: string): ServiceKey => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });

  beforeEach(async () => {
    tokens['regsync-token'] = 'read';
    tokens['app-token'] = 'write';
    server = await startConsulServer({ tokens });
    // Applications register with the real npm client, as a Consul user's code does.
    app = new Consul({ host: '127.0.0.1', port: server.port, defaults: { token: 'app-token' } });
    await app.catalog.register({ node: 'n1', address: '127.0.0.1', service: { id: 'orders-1', service: 'orders', address: '10.71.0.1', port: 8080 } });
    const spec: ClusterSpec = {
      id: 'consul-acl-watch',
      kind: 'consul',
      endpoints: [server.endpoint],
      labels: {},
      password: 'regsync-token',
      // A wait far longer than the test: only the watch's own re-read can bring the change.
      options: { blockingWaitMs: 300_000, backoffMaxMs: 200 },
    };
    adapter = createConsulAdapter(spec, { logger: pino({ level: 'silent' }) });
  });
  afterEach(async () => {
    await adapter.close();
    app.destroy();
    await server.close();
  });

  it('reads again at the old index after a filtered answer and calls back with the change once the token may read', async () => {
    const events: Array<WatchEvent | undefined> = [];
    adapter.watch(key('orders'), (event) => events.push(event));
    await waitUntil(() => events.length === 1, { message: 'the first read' });
    expect(events[0]?.firstRead?.map((i) => i.ip)).toEqual(['10.71.0.1']);
    await waitUntil(() => server.waitingQueries() === 1, { message: 'the watch blocking' });
    const blockedAt = server.index();

    // The token loses its read rights (a policy edited); an instance is registered meanwhile.
    tokens['regsync-token'] = 'none';
    const answered = server.requests.length;
    await app.catalog.register({ node: 'n1', address: '127.0.0.1', service: { id: 'orders-2', service: 'orders', address: '10.71.0.2', port: 8080 } });
    const reads = () => server.requests.slice(answered).filter((r) => r.path === '/v1/health/service/orders');
    await waitUntil(() => reads().length > 0, { message: 'the blocking query answered, emptied by ACLs' });
    expect(events).toHaveLength(1);

    // The rights come back, and nothing changes in Consul after that.
    tokens['regsync-token'] = 'read';
    await waitUntil(() => events.length === 2, { message: 'the change called back', timeoutMs: 10_000 });
    expect(events[1]).toBeUndefined();
    expect((await adapter.listInstances(key('orders'))).map((i) => i.ip).sort()).toEqual(['10.71.0.1', '10.71.0.2']);
    // Every read after the filtered answer asked at the index before the change.
    expect(reads().map((r) => r.query.index)).toContain(String(blockedAt));
  });

  it('keeps calling back changes after the filtered answer (the loop blocks again on the new index)', async () => {
    const events: Array<WatchEvent | undefined> = [];
    adapter.watch(key('orders'), (event) => events.push(event));
    await waitUntil(() => events.length === 1 && server.waitingQueries() === 1, { message: 'the watch blocking' });
    tokens['regsync-token'] = 'none';
    const answered = server.requests.length;
    await app.catalog.register({ node: 'n1', address: '127.0.0.1', service: { id: 'orders-2', service: 'orders', address: '10.71.0.2', port: 8080 } });
    await waitUntil(() => server.requests.slice(answered).some((r) => r.path === '/v1/health/service/orders'), { message: 'the filtered answer' });
    tokens['regsync-token'] = 'read';
    await waitUntil(() => events.length === 2, { message: 'the change called back', timeoutMs: 10_000 });
    await waitUntil(() => server.waitingQueries() === 1, { message: 'the watch blocking on the new index' });
    await app.catalog.deregister({ node: 'n1', serviceid: 'orders-1' });
    await waitUntil(() => events.length === 3, { message: 'the next change called back', timeoutMs: 10_000 });
  });
});
