import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ClusterSpec } from '../../src/model/index.js';
import { startConsulServer, type ConsulServer } from '../../test/support/consul-server.js';
import { createConsulAdapter, type ConsulAdapter } from './consul-adapter.js';
import { ConsulRequestError } from './consul-request-error.js';

const silent = pino({ level: 'silent' });
const scope = { namespace: 'public', group: 'DEFAULT_GROUP' };
const key = (name: string) => ({ ...scope, name });

/**
 * Reads of a Consul with ACLs in default deny: an answer that ACLs emptied
 * (`X-Consul-Results-Filtered-By-ACLs: true`) is no proof that the service has no instances.
 */
describe('ConsulAdapter reads under ACLs', () => {
  let server: ConsulServer;
  const adapters: ConsulAdapter[] = [];
  const adapter = (password?: string): ConsulAdapter => {
    const spec: ClusterSpec = { id: 'consul-acl', kind: 'consul', endpoints: [server.endpoint], labels: {}, options: { requestTimeoutMs: 2_000 }, ...(password === undefined ? {} : { password }) };
    const created = createConsulAdapter(spec, { logger: silent });
    adapters.push(created);
    return created;
  };

  beforeAll(async () => {
    server = await startConsulServer({ tokens: { 'read-secret': 'read' } });
    server.catalogRegister({ Node: 'n1', Address: '10.90.0.9', Service: { ID: 'db-1', Service: 'db', Address: '10.90.0.1', Port: 5432 } });
  });
  afterAll(async () => {
    await Promise.all(adapters.map((a) => a.close()));
    await server.close();
  });

  it('reads with the token', async () => {
    const withToken = adapter('read-secret');
    expect(await withToken.listServices(scope)).toEqual([key('db')]);
    expect((await withToken.listInstances(key('db'))).map((i) => `${i.ip}:${i.port}`)).toEqual(['10.90.0.1:5432']);
    // Empty and not filtered: a service with no instances.
    expect(await withToken.listInstances(key('nothing-here'))).toEqual([]);
  });

  it('fails a read that ACLs emptied, naming the token, instead of answering no instances', async () => {
    const anonymous = adapter();
    const refused = { code: 'consul-auth-failed', message: expect.stringContaining('filtered by ACLs: the anonymous token') };
    await expect(anonymous.listInstances(key('db'))).rejects.toBeInstanceOf(ConsulRequestError);
    await expect(anonymous.listInstances(key('db'))).rejects.toMatchObject(refused);
    await expect(anonymous.listServices(scope)).rejects.toMatchObject(refused);
  });
});

/**
 * Two registrations at one address: a copy regsync wrote and the application's own (it moved from
 * the source registry to Consul, keeping its address).
 */
describe('ConsulAdapter reads of an address registered twice', () => {
  let server: ConsulServer;
  let consul: ConsulAdapter;
  const copy = (service: string, ip: string, meta: Record<string, string>) =>
    server.catalogRegister({ Node: 'regsync', Address: '127.0.0.1', Service: { ID: `${service}-copy`, Service: service, Address: ip, Port: 80, Meta: meta } });
  const native = (service: string, ip: string) => server.catalogRegister({ Node: 'app-host', Address: '10.91.9.9', Service: { ID: `${service}-1`, Service: service, Address: ip, Port: 80 } });
  const nodes = (service: string) => server.healthService(service).map((e) => e.Node.Node).sort();

  beforeAll(async () => {
    server = await startConsulServer();
    consul = createConsulAdapter({ id: 'consul', kind: 'consul', endpoints: [server.endpoint], labels: {}, options: { requestTimeoutMs: 2_000 } }, { logger: silent });
  });
  afterAll(async () => {
    await consul.close();
    await server.close();
  });

  it("reads regsync's copy, so that its task removes it, and leaves the application's registration", async () => {
    copy('moved', '10.91.0.1', { 'regsync-origin': 'nacos', 'regsync-path': 'nacos', 'regsync-task': 'n2c' });
    native('moved', '10.91.0.1');
    const [read] = await consul.listInstances(key('moved'));
    expect(read?.metadata).toMatchObject({ 'regsync.task': 'n2c', 'regsync.origin': 'nacos' });
    expect(consul.readIssues(key('moved'))).toEqual([expect.stringMatching(/^10\.91\.0\.1:80#DEFAULT is registered on nodes .+; read the one on regsync$/)]);
    await consul.apply(key('moved'), { upsert: [], remove: [read!] });
    expect(nodes('moved')).toEqual(['app-host']);
  });

  it('reads the registry\'s own where the entry on regsync\'s node is no copy of a task', async () => {
    copy('unmarked', '10.91.0.2', {});
    native('unmarked', '10.91.0.2');
    const read = await consul.listInstances(key('unmarked'));
    expect(read).toHaveLength(1);
    expect(read[0]?.metadata).toEqual({});
    expect(consul.readIssues(key('unmarked'))).toEqual([expect.stringMatching(/^10\.91\.0\.2:80#DEFAULT is registered on nodes .+; read the one on app-host$/)]);
  });
});
