import Consul from 'consul';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { startConsulServer, type ConsulServer } from './consul-server.js';
import { waitUntil } from './wait-until.js';

/*
 * The test Consul checked with the real npm `consul` client (2.0.1), as a Consul user's code talks
 * to a Consul agent: agent registration with a TTL check, catalog registration on a node no agent
 * owns, health reads with `passing`, blocking watches, ACL refusals and Consul's meta key rule.
 */

describe('the test Consul server, through the npm consul client', () => {
  let server: ConsulServer;
  let consul: Consul;

  beforeEach(async () => {
    server = await startConsulServer();
    consul = new Consul({ host: '127.0.0.1', port: server.port });
  });
  afterEach(async () => {
    consul.destroy();
    await server.close();
  });

  it('registers through the agent with a TTL check that reads passing only once passed', async () => {
    await consul.agent.service.register({ name: 'web', id: 'web-1', address: '10.20.0.1', port: 8080, tags: ['v1'], meta: { version: '1' }, check: { ttl: '30s' } as never });
    const services = await consul.agent.service.list();
    expect(Object.keys(services)).toEqual(['web-1']);
    // A TTL check starts critical.
    expect(await consul.health.service({ service: 'web', passing: true })).toEqual([]);
    const all = await consul.health.service('web');
    expect(all.map((e: { Service: { ID: string } }) => e.Service.ID)).toEqual(['web-1']);
    expect(all[0].Checks.map((c: { CheckID: string; Status: string }) => `${c.CheckID}=${c.Status}`).sort()).toEqual(['serfHealth=passing', 'service:web-1=critical']);

    await consul.agent.check.pass('service:web-1');
    const passing = await consul.health.service({ service: 'web', passing: true });
    expect(passing.map((e: { Service: { Address: string; Port: number; Tags: string[]; Meta: Record<string, string> } }) => e.Service)).toMatchObject([
      { Address: '10.20.0.1', Port: 8080, Tags: ['v1'], Meta: { version: '1' } },
    ]);
    // Consul's servers list themselves as the service `consul`.
    expect(await consul.catalog.service.list()).toEqual({ consul: [], web: ['v1'] });

    await consul.agent.service.deregister('web-1');
    expect(await consul.health.service('web')).toEqual([]);
  });

  it('keeps catalog registrations on a node no agent owns, with the check status given', async () => {
    await consul.catalog.register({
      node: 'regsync',
      address: '127.0.0.1',
      nodemeta: { 'external-source': 'regsync' },
      service: { id: 'orders-1', service: 'orders', address: '10.20.0.2', port: 9000, tags: ['regsync'], meta: { 'regsync-origin': 'east' } },
      check: { checkid: 'regsync/orders-1', name: 'Copied', status: 'passing', serviceid: 'orders-1' },
    } as never);
    const nodes = await consul.catalog.service.nodes('orders');
    expect(nodes).toMatchObject([{ Node: 'regsync', NodeMeta: { 'external-source': 'regsync' }, ServiceID: 'orders-1', ServiceAddress: '10.20.0.2', ServicePort: 9000 }]);
    const passing = await consul.health.service({ service: 'orders', passing: true });
    expect(passing.map((e: { Checks: Array<{ CheckID: string }> }) => e.Checks.map((c) => c.CheckID))).toEqual([['regsync/orders-1']]);

    await consul.catalog.deregister({ node: 'regsync', serviceid: 'orders-1' } as never);
    expect(await consul.catalog.service.nodes('orders')).toEqual([]);
  });

  it('answers a blocking watch after a change, and a lower index after a restore', async () => {
    const watch = consul.watch({ method: consul.health.service, options: { service: 'pay', passing: 'true', wait: '5s' } });
    const seen: number[] = [];
    watch.on('change', (data: unknown[]) => seen.push(data.length));
    watch.on('error', () => undefined);
    try {
      await waitUntil(() => seen.length >= 1, { message: 'the first answer' });
      expect(seen).toEqual([0]);
      await waitUntil(() => server.waitingQueries() === 1, { message: 'the watch to block' });
      server.catalogRegister({ Node: 'n1', Address: '127.0.0.1', Service: { ID: 'pay-1', Service: 'pay', Address: '10.20.0.3', Port: 1 } });
      await waitUntil(() => seen.at(-1) === 1, { message: 'the watch to see the new instance' });
    } finally {
      watch.end();
    }

    const before = Number((await fetch(`http://${server.endpoint}/v1/health/service/pay`)).headers.get('x-consul-index'));
    server.resetIndex(3);
    const res = await fetch(`http://${server.endpoint}/v1/health/service/pay?index=${before}&wait=5s`);
    expect(Number(res.headers.get('x-consul-index'))).toBeLessThan(before);
  });

  it('moves no index when the same service is registered again', async () => {
    const body = { Node: 'n1', Address: '127.0.0.1', Service: { ID: 's-1', Service: 's', Address: '10.20.0.4', Port: 1 } };
    server.catalogRegister(body);
    const index = server.index();
    server.catalogRegister(body);
    expect(server.index()).toBe(index);
  });

  it("refuses meta keys Consul refuses: 400 on the agent, 500 on the catalog, with Consul's words", async () => {
    await expect(consul.agent.service.register({ name: 'web', meta: { 'spring.boot.version': '3' } })).rejects.toMatchObject({ response: { statusCode: 400 } });
    const agent = await fetch(`http://${server.endpoint}/v1/agent/service/register`, { method: 'PUT', body: JSON.stringify({ Name: 'web', Meta: { 'a.b': '1' } }) });
    expect([agent.status, await agent.text()]).toEqual([400, 'Invalid Service Meta: Key contains invalid characters']);
    const catalog = await fetch(`http://${server.endpoint}/v1/catalog/register`, {
      method: 'PUT',
      body: JSON.stringify({ Node: 'n1', Address: '127.0.0.1', Service: { ID: 'w-1', Service: 'web', Meta: { 'a.b': '1' } } }),
    });
    expect([catalog.status, await catalog.text()]).toEqual([500, 'Invalid Service Meta for node n1 and serviceID w-1: Key contains invalid characters']);
    expect(server.healthService('web')).toEqual([]);
  });

  it('refuses Enterprise parameters as Consul CE does', async () => {
    const ns = await fetch(`http://${server.endpoint}/v1/catalog/services?ns=default`);
    expect([ns.status, await ns.text()]).toEqual([400, 'Namespaces are a Consul Enterprise feature']);
    const header = await fetch(`http://${server.endpoint}/v1/catalog/services`, { headers: { 'X-Consul-Namespace': 'default' } });
    expect(header.status).toBe(400);
  });
});

describe('the test Consul server with ACLs', () => {
  let server: ConsulServer;

  beforeEach(async () => {
    server = await startConsulServer({ tokens: { 'write-secret': 'write', 'read-secret': 'read' } });
    server.catalogRegister({ Node: 'n1', Address: '127.0.0.1', Service: { ID: 'db-1', Service: 'db', Address: '10.20.0.5', Port: 5432 } });
  });
  afterEach(async () => server.close());

  it('filters anonymous reads, refuses an unknown token and writes without permission', async () => {
    const anonymous = new Consul({ host: '127.0.0.1', port: server.port });
    const reader = new Consul({ host: '127.0.0.1', port: server.port, defaults: { token: 'read-secret' } });
    const writer = new Consul({ host: '127.0.0.1', port: server.port, defaults: { token: 'write-secret' } });
    const stranger = new Consul({ host: '127.0.0.1', port: server.port, defaults: { token: 'who-knows' } });
    try {
      expect(await anonymous.catalog.service.list()).toEqual({});
      expect(Object.keys(await reader.catalog.service.list()).sort()).toEqual(['consul', 'db']);
      await expect(stranger.catalog.service.list()).rejects.toMatchObject({ response: { statusCode: 403 } });
      const unknown = await fetch(`http://${server.endpoint}/v1/catalog/services`, { headers: { 'X-Consul-Token': 'who-knows' } });
      expect([unknown.status, await unknown.text()]).toEqual([403, 'ACL not found']);
      await expect(reader.agent.service.register({ name: 'db', id: 'db-2' })).rejects.toMatchObject({ response: { statusCode: 403 } });
      await writer.agent.service.register({ name: 'db', id: 'db-2', address: '10.20.0.6', port: 5432 });
      const bearer = await fetch(`http://${server.endpoint}/v1/health/service/db`, { headers: { authorization: 'Bearer read-secret' } });
      expect(((await bearer.json()) as unknown[]).length).toBe(2);
    } finally {
      for (const c of [anonymous, reader, writer, stranger]) c.destroy();
    }
  });
});
