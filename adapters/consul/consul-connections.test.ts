import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { ClusterSpec, Instance, ServiceKey } from '../../src/model/index.js';
import { startConsulServer, type ConsulServer } from '../../test/support/consul-server.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createConsulAdapter, type ConsulAdapter } from './consul-adapter.js';
import { CONSUL_CONNECTIONS } from './consul-http.js';

/*
 * A blocking query holds its HTTP/1.1 connection for as long as it waits. A `*` task watches every
 * service of the source, so a Consul with more services than the adapter keeps connections must
 * still answer every watch at once, and reads and writes must not queue behind them.
 */

const silent = pino({ level: 'silent' });
const key = (name: string): ServiceKey => ({ namespace: 'public', group: 'DEFAULT_GROUP', name });
const copy: Instance = { ip: '10.40.0.9', port: 9000, weight: 1, healthy: true, enabled: true, ephemeral: false, cluster: 'DEFAULT', metadata: {} };

describe('ConsulAdapter connections', () => {
  let server: ConsulServer | undefined;
  let adapter: ConsulAdapter | undefined;
  afterEach(async () => {
    await adapter?.close();
    await server?.close();
    adapter = undefined;
    server = undefined;
  });

  it('keeps every watch of more services than it has connections blocking, and reads and writes answering', async () => {
    const s = await startConsulServer();
    server = s;
    const names = Array.from({ length: CONSUL_CONNECTIONS + 8 }, (_, i) => `watched-${i}`);
    for (const [i, name] of names.entries()) {
      s.catalogRegister({ Node: 'agent-7', Address: '127.0.0.1', Service: { ID: `${name}-1`, Service: name, Address: '10.40.0.1', Port: 8000 + i } });
    }
    const spec: ClusterSpec = { id: 'consul-many', kind: 'consul', endpoints: [s.endpoint], labels: {}, options: { blockingWaitMs: 60_000 } };
    const a = createConsulAdapter(spec, { logger: silent });
    adapter = a;
    const firstReads = new Set<string>();
    for (const name of names) a.watch(key(name), (event) => (event?.firstRead ? firstReads.add(name) : undefined));

    await waitUntil(() => firstReads.size === names.length, { message: 'the first read of every watch' });
    await waitUntil(() => s.waitingQueries() === names.length, { message: `all ${names.length} blocking queries waiting at once` });

    const read = await a.listInstances(key('watched-0'));
    expect(read.map((i) => `${i.ip}:${i.port}`)).toEqual(['10.40.0.1:8000']);
    await a.apply(key('watched-1'), { upsert: [copy], remove: [] });
    expect(s.healthService('watched-1').map((e) => `${e.Node.Node} ${e.Service.Address}:${e.Service.Port}`).sort()).toEqual(['agent-7 10.40.0.1:8001', 'regsync 10.40.0.9:9000']);
  });
});
