import { execFile } from 'node:child_process';
import { promises as dnsPromises } from 'node:dns';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import type { Instance } from '../model/types.js';
import { DnsCatalogue } from './catalogue.js';
import { startDnsServer, type DnsServer } from './dns-server.js';

const run = promisify(execFile);
const provider = (ip: string, port: number, metadata: Record<string, string> = {}): Instance => ({ ip, port, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata });

/** The catalogue behind the server: names as the catalogue indexes them answer as the responder builds them. */
describe('DNS catalogue served', () => {
  let catalogue: DnsCatalogue;
  let server: DnsServer;
  const resolver = () => {
    const r = new dnsPromises.Resolver({ timeout: 5_000, tries: 1 });
    r.setServers([`127.0.0.1:${server.port}`]);
    return r;
  };

  beforeAll(async () => {
    catalogue = new DnsCatalogue({ zone: 'regsync.internal', logger: silentLogger() });
    catalogue.put('zk', { namespace: '', group: '', name: 'providers:com.acme.Echo:1.0.0:g1' }, [provider('10.40.0.1', 20880, { protocol: 'dubbo' }), provider('10.40.0.2', 20881, { protocol: 'dubbo' })]);
    catalogue.put('sh', { namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' }, [provider('10.41.0.1', 8080, { site: 'sh' })]);
    server = await startDnsServer({ zone: catalogue, logger: silentLogger() });
  });
  afterAll(async () => {
    await server?.close();
  });

  it('answers a Dubbo service under its mapped name, with SRV targets that resolve', async () => {
    const name = 'com-acme-echo-1-0-0-g1.svc.regsync.internal';
    expect((await resolver().resolve4(name)).sort()).toEqual(['10.40.0.1', '10.40.0.2']);
    const srv = await resolver().resolveSrv(`_dubbo._tcp.${name}`);
    expect(srv.map((r) => `${r.name}:${r.port}`).sort()).toEqual([`10-40-0-1.com-acme-echo-1-0-0-g1.default-group.public.svc.regsync.internal:20880`, `10-40-0-2.com-acme-echo-1-0-0-g1.default-group.public.svc.regsync.internal:20881`]);
    for (const target of srv) expect(await resolver().resolve4(target.name)).toHaveLength(1);
  });

  it('answers the canonical and short forms alike, TXT of an instance, and NODATA for an empty non-terminal', async () => {
    expect(await resolver().resolve4('orders.default-group.public.svc.regsync.internal')).toEqual(['10.41.0.1']);
    expect(await resolver().resolve4('orders.public.svc.regsync.internal')).toEqual(['10.41.0.1']);
    expect((await resolver().resolveTxt('10-41-0-1.orders.default-group.public.svc.regsync.internal')).map((t) => t.join(''))).toContain('site=sh');
    await expect(resolver().resolve4('public.svc.regsync.internal')).rejects.toMatchObject({ code: 'ENODATA' });
    const { stdout } = await run('dig', ['@127.0.0.1', '-p', String(server.port), '+norec', '+time=5', '+tries=1', 'nothing.svc.regsync.internal', 'A']);
    expect(stdout).toContain('status: NXDOMAIN');
    expect(stdout).toMatch(/AUTHORITY SECTION:\nregsync\.internal\.\s+\d+\s+IN\s+SOA/);
  });

  it('follows the catalogue: a removed service is gone at the next query', async () => {
    catalogue.remove('sh', { namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' });
    await expect(resolver().resolve4('orders.svc.regsync.internal')).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });
});
