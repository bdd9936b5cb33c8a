import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startConsulServer, type ConsulServer } from './consul-server.js';
import { waitUntil } from './wait-until.js';

/*
 * The test Consul keeps services by name and checks by service (so that a read of one service does
 * not walk the whole catalog); these are the cases where those indexes must follow the catalog:
 * a service id registered again under another name, checks moving between services, removals, and
 * blocking queries woken only by the writes that concern them.
 */

describe('the test Consul, reads through its indexes', () => {
  let server: ConsulServer;
  beforeEach(async () => {
    server = await startConsulServer();
  });
  afterEach(async () => {
    await server.close();
  });

  const ids = (name: string) => server.healthService(name).map((e) => `${e.Node.Node}/${e.Service.ID}`);
  const checks = (name: string) => server.healthService(name).map((e) => e.Checks.map((c) => c.CheckID));
  const svc = (node: string, id: string, name: string) => server.catalogRegister({ Node: node, Address: '127.0.0.1', Service: { ID: id, Service: name, Address: '10.60.0.1', Port: 80 } });

  it('lists a service by node name, then in the order the node keeps its services', () => {
    svc('n-b', 'w-2', 'web');
    svc('n-a', 'w-9', 'web');
    svc('n-b', 'db-1', 'db');
    svc('n-b', 'w-1', 'web');
    expect(ids('web')).toEqual(['n-a/w-9', 'n-b/w-2', 'n-b/w-1']);
    expect(ids('db')).toEqual(['n-b/db-1']);
  });

  it('moves a service id registered under another name, keeping its place among the node', () => {
    svc('n-1', 'a', 'web');
    svc('n-1', 'b', 'db');
    svc('n-1', 'c', 'web');
    svc('n-1', 'a', 'db');
    expect(ids('web')).toEqual(['n-1/c']);
    // `a` was registered on the node before `b`: it is listed first.
    expect(ids('db')).toEqual(['n-1/a', 'n-1/b']);
  });

  it("gives each entry its node's checks and its own, in the order the node got them", () => {
    svc('n-1', 'a', 'web');
    svc('n-1', 'b', 'web');
    server.catalogRegister({ Node: 'n-1', SkipNodeUpdate: true, Check: { CheckID: 'check-a', Status: 'passing', ServiceID: 'a' } });
    server.catalogRegister({ Node: 'n-1', SkipNodeUpdate: true, Check: { CheckID: 'serfHealth', Status: 'passing' } });
    server.catalogRegister({ Node: 'n-1', SkipNodeUpdate: true, Check: { CheckID: 'check-b', Status: 'passing', ServiceID: 'b' } });
    expect(checks('web')).toEqual([
      ['check-a', 'serfHealth'],
      ['serfHealth', 'check-b'],
    ]);
    // The same check id given to another service moves there and keeps its place.
    server.catalogRegister({ Node: 'n-1', SkipNodeUpdate: true, Check: { CheckID: 'check-a', Status: 'warning', ServiceID: 'b' } });
    expect(checks('web')).toEqual([['serfHealth'], ['check-a', 'serfHealth', 'check-b']]);
    server.catalogDeregister({ Node: 'n-1', CheckID: 'check-a' });
    expect(checks('web')).toEqual([['serfHealth'], ['serfHealth', 'check-b']]);
    server.catalogDeregister({ Node: 'n-1', ServiceID: 'b' });
    expect(checks('web')).toEqual([['serfHealth']]);
    // A check of the removed service is gone with it: registering `b` again brings no old check.
    svc('n-1', 'b', 'web');
    expect(checks('web')).toEqual([['serfHealth'], ['serfHealth']]);
    server.catalogDeregister({ Node: 'n-1' });
    expect(server.healthService('web')).toEqual([]);
  });

  it('answers a blocking query when its own service changes, not when another one does', async () => {
    svc('n-1', 'a', 'web');
    svc('n-1', 'd', 'db');
    const index = (await fetch(`http://${server.endpoint}/v1/health/service/web`)).headers.get('x-consul-index');
    const answered: string[] = [];
    const web = fetch(`http://${server.endpoint}/v1/health/service/web?index=${index}&wait=30s`).then(async (res) => {
      answered.push(((await res.json()) as Array<{ Service: { ID: string } }>).map((e) => e.Service.ID).join(','));
    });
    // Not written yet: its index is the services table's, which any new service moves.
    const none = fetch(`http://${server.endpoint}/v1/health/service/none?index=${server.index()}&wait=30s`).then(async (res) => {
      answered.push(`none:${((await res.json()) as unknown[]).length}`);
    });
    await waitUntil(() => server.waitingQueries() === 2, { message: 'both queries waiting' });
    svc('n-1', 'd', 'db'); // the same registration again: nothing moves
    server.catalogRegister({ Node: 'n-1', SkipNodeUpdate: true, Check: { CheckID: 'check-d', Status: 'passing', ServiceID: 'd' } });
    expect(server.waitingQueries()).toBe(2);
    svc('n-2', 'o', 'other'); // a new service moves the table's index, not web's
    expect(server.waitingQueries()).toBe(1);
    await none;
    expect(answered).toEqual(['none:0']);
    svc('n-1', 'b', 'web');
    await web;
    expect(answered).toEqual(['none:0', 'a,b']);
  });
});
