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
