import { execFile } from 'node:child_process';
import { promises as dnsPromises } from 'node:dns';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runUp, type UpHandle } from '../../src/cli/up-command.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { NACOS_SCENARIO_YAML } from '../support/cmdb-fixtures.js';
import { addRegistry, api, copiesIn, defineGrpcClusters, defineTask, registerNative, startFixture, stopFixture, testLogger, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

const run = promisify(execFile);
const ECHO = 'echo.svc.regsync.internal';

/**
 * Nacos' classic same-site example, in DNS, with the service coming from two registries through
 * regsync's own sync: provider 11.11.11.11 (site x11) registers in A and is copied to B, provider
 * 22.22.22.22 (site x12) registers in B; the DNS interface of `regsync up` serves B. Consumers
 * 33.33.33.33 (x11), 44.44.44.44 (x12) and 55.55.55.55 (x13) ask through a trusted resolver that
 * sends their subnet (dig +subnet), and get [11], [22] and both.
 */
describe('DNS interface beside regsync up', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let dir: string;
  let up: UpHandle;
  let url: string;
  const natives: NativeInstance[] = [];

  const dig = async (...args: string[]): Promise<string> => (await run('dig', ['@127.0.0.1', '-p', String(up.dns?.port), '+norec', '+time=5', '+tries=1', ...args])).stdout;
  const addressesFor = async (client: string): Promise<string[]> =>
    (await dig(`+subnet=${client}/32`, '+short', ECHO, 'A'))
      .split('\n')
      .filter((l) => l !== '')
      .sort();
  const resolver = () => {
    const r = new dnsPromises.Resolver({ timeout: 5_000, tries: 1 });
    r.setServers([`127.0.0.1:${up.dns?.port}`]);
    return r;
  };

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'regsync-dns-'));
    const cmdbFile = join(dir, 'cmdb.yaml');
    const dnsFile = join(dir, 'dns.yaml');
    await writeFile(cmdbFile, NACOS_SCENARIO_YAML);
    await writeFile(dnsFile, 'dns:\n  refreshMs: 300\n  site:\n    trustedResolvers: [127.0.0.1]\n');
    fx = await startFixture();
    a = await addRegistry(fx, 'a', { grpc: { pushMergeWindowMs: 50 } });
    b = await addRegistry(fx, 'b', { grpc: { pushMergeWindowMs: 50 } });
    up = await runUp(
      { listen: '127.0.0.1:0', redis: fx.redis.url, dataDir: dir, cmdb: cmdbFile, dnsListen: '127.0.0.1:0', dnsConfig: dnsFile, dnsClusters: 'b', leaseTtlMs: 2_000 },
      testLogger(),
    );
    url = up.node.url as string;
    await defineGrpcClusters(url, fx);
    await defineTask(url, 'echo-a-b', 'a', 'b', 'echo');
    natives.push(await registerNative(() => a, 'echo', '11.11.11.11', 8080));
    natives.push(await registerNative(() => b, 'echo', '22.22.22.22', 8080));
    await waitUntil(() => copiesIn(b, 'echo').length === 1, { message: '11.11.11.11 copied to B' });
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await up?.close();
    await stopFixture(fx);
    await rm(dir, { recursive: true, force: true });
  });

  it('answers each consumer with the providers of its own site, and all of them to a site without one', async () => {
    await waitUntil(async () => (await resolver().resolve4(ECHO).catch(() => [])).length === 2, { message: 'both providers answered' });
    expect(await addressesFor('33.33.33.33')).toEqual(['11.11.11.11']);
    expect(await addressesFor('44.44.44.44')).toEqual(['22.22.22.22']);
    expect(await addressesFor('55.55.55.55')).toEqual(['11.11.11.11', '22.22.22.22']);
    // The answer depends on the whole /32 it was tailored for.
    expect(await dig('+subnet=33.33.33.33/32', ECHO, 'A')).toContain('CLIENT-SUBNET: 33.33.33.33/32/32');
  });

  it('reads names as sent (dig): a label holding a dot is not the service; case and other octets come back as sent', async () => {
    const out = async (name: string): Promise<string> => dig(name, 'A', '+noall', '+comments', '+question', '+answer');
    const asked = (name: string, text: string): boolean => text.split('\n').some((line) => line.split(/\s+/).join(' ') === `;${name}. IN A`);
    const cases: Array<[string, string]> = [
      ['echo\\.svc.regsync.internal', 'NXDOMAIN'],
      ['echo\\.svc\\.regsync\\.internal', 'REFUSED'],
      ['\\255cho.svc.regsync.internal', 'NXDOMAIN'],
      ['ECHO.Svc.regsync.INTERNAL', 'NOERROR'],
    ];
    for (const [name, status] of cases) {
      const text = await out(name);
      expect([name, text.includes(`status: ${status}`), asked(name, text)]).toEqual([name, true, true]);
    }
    expect(await out('ECHO.Svc.regsync.INTERNAL')).toMatch(/^ECHO\.Svc\.regsync\.INTERNAL\.\s+\d+\s+IN\s+A\s+(11\.11\.11\.11|22\.22\.22\.22)$/m);
  });

  it('follows a change in the registry at the next query', async () => {
    const extra = await registerNative(() => b, 'echo', '10.60.0.1', 8080);
    natives.push(extra);
    await waitUntil(async () => (await resolver().resolve4(ECHO)).includes('10.60.0.1'), { message: 'the new instance answered' });
    await extra.deregister();
    await waitUntil(async () => !(await resolver().resolve4(ECHO)).includes('10.60.0.1'), { message: 'the removed instance no longer answered' });
  });

  it('shows its state on the REST API and its counters in the metrics', async () => {
    const status = (await api(url, 'GET', '/api/v1/dns')).body;
    expect(status).toMatchObject({ zone: 'regsync.internal', clusters: [{ id: 'b', state: 'fresh' }], sameSite: { cmdb: true, trustedResolvers: ['127.0.0.1'] } });
    expect(status.catalogue.services).toBeGreaterThanOrEqual(1);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/regsync_dns_queries_total\{qtype="A",rcode="NOERROR",transport="udp"\} [1-9]/);
    expect(metrics).toMatch(/regsync_dns_services [1-9]/);
  });

  it('keeps answering from the last good read while the registry is down, and says so', async () => {
    fx.registries.delete('b');
    for (const n of natives) n.stop();
    await b.close();
    await waitUntil(async () => (await api(url, 'GET', '/api/v1/dns')).body.clusters[0]?.state === 'stale', { message: 'cluster b stale' });
    expect((await resolver().resolve4(ECHO)).sort()).toEqual(['11.11.11.11', '22.22.22.22']);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).toMatch(/regsync_dns_stale_answers_total [1-9]/);
    expect(metrics).toContain('regsync_dns_cluster_stale{cluster="b"} 1');
  });
});
