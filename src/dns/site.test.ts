import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { NACOS_SCENARIO_YAML } from '../../test/support/cmdb-fixtures.js';
import { CmdbCache, FileCmdbProvider, SnapshotCmdbProvider, parseCmdbFile } from '../cmdb/index.js';
import { silentLogger } from '../log.js';
import type { Instance } from '../model/types.js';
import { DnsCatalogue } from './catalogue.js';
import { DnsConfigError } from './dns-config-error.js';
import { startDnsServer, type DnsServer } from './dns-server.js';
import { addressLabel } from './names.js';
import { SiteSelector, type ClientSubnet, type SiteClient, type SiteSelectorOptions } from './site.js';
import type { DnsInstance } from './zone.js';

type Table = Record<string, Record<string, string>>;
const run = promisify(execFile);

/** A CMDB whose whole content is replaced from a table: the real snapshot provider, parsing and events. */
class TableCmdb extends SnapshotCmdbProvider {
  constructor(table: Table) {
    super();
    this.install(content(table), false);
  }

  replace(table: Table): void {
    this.install(content(table), true);
  }
}

function content(table: Table) {
  return parseCmdbFile(JSON.stringify({ labels: { site: null, region: null, rack: null }, entities: { ip: table } }), 'cmdb.json');
}

const NEVER = 3_600_000;
const closers: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
});

async function selectorOver(table: Table, options: Omit<SiteSelectorOptions, 'cmdb'> = {}): Promise<{ site: SiteSelector; cmdb: TableCmdb; cache: CmdbCache }> {
  const cmdb = new TableCmdb(table);
  const cache = new CmdbCache({ provider: cmdb, refreshMs: NEVER, eventPollMs: NEVER });
  await cache.start();
  closers.push(() => cache.stop());
  const site = new SiteSelector({ cmdb: cache, ...options });
  closers.push(() => site.close());
  return { site, cmdb, cache };
}

/** An ECS option as a resolver sends it: the address cut to the prefix. */
function subnet(address: string, sourcePrefix: number): ClientSubnet {
  const v4 = !address.includes(':');
  const full = v4 ? address.split('.').map(Number) : addressLabel(address)!.split('-').flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]);
  const bytes = Uint8Array.from(full.slice(0, Math.ceil(sourcePrefix / 8)));
  const spare = bytes.length * 8 - sourcePrefix;
  if (spare > 0) bytes[bytes.length - 1] = (bytes[bytes.length - 1] ?? 0) & (0xff << spare) & 0xff;
  return { family: v4 ? 1 : 2, sourcePrefix, address: bytes };
}

const inst = (ip: string, extra: Partial<DnsInstance> = {}): DnsInstance => ({ ip, port: 80, weight: 1, healthy: true, enabled: true, metadata: {}, ...extra });
const ips = (list: readonly DnsInstance[]) => list.map((i) => i.ip).sort();
const asker = (labels: Record<string, string>, scope = 0): SiteClient => ({ labels, scope, tailored: true });

describe('SiteSelector: prefix lookup', () => {
  const table: Table = {
    '10.1.1.5': { site: 'x11', region: 'east' },
    '10.1.1.9': { site: 'x11', region: 'east', rack: 'r9' },
    '10.1.2.5': { site: 'x11', region: 'east' },
    '10.1.2.9': { site: 'x12', region: 'east' },
    '10.1.3.1': { region: 'east' },
    '10.1.3.2': { site: 'x13' },
    '2001:db8:0:100::1': { site: 'v6a', region: 'west' },
    '2001:db8:0:1ff::2': { site: 'v6a', region: 'west' },
    '2001:0db8:0000:0200:0000:0000:0000:0001': { site: 'v6b', region: 'west' },
  };

  it('gives the labels all addresses of a /24 agree on', async () => {
    const { site } = await selectorOver(table);
    expect(site.prefixLabels(subnet('10.1.1.0', 24))).toEqual({ site: 'x11', region: 'east' });
  });

  it('drops the site when two addresses of one /24 disagree, keeps the region they share', async () => {
    const { site } = await selectorOver(table);
    expect(site.prefixLabels(subnet('10.1.2.0', 24))).toEqual({ region: 'east' });
    // Wider: still one region, several sites.
    expect(site.prefixLabels(subnet('10.1.0.0', 16))).toEqual({ region: 'east' });
  });

  it('counts a label when every address that has it agrees, ignoring those without it', async () => {
    const { site } = await selectorOver(table);
    // 10.1.3.1 has only a region, 10.1.3.2 only a site: each is the only one with its label.
    expect(site.prefixLabels(subnet('10.1.3.0', 24))).toEqual({ site: 'x13', region: 'east' });
  });

  it('looks a /32 up exactly, and gives nothing for an address or prefix the CMDB does not have', async () => {
    const { site } = await selectorOver(table);
    expect(site.prefixLabels(subnet('10.1.2.9', 32))).toEqual({ site: 'x12', region: 'east' });
    expect(site.prefixLabels(subnet('10.1.2.10', 32))).toEqual({});
    expect(site.prefixLabels(subnet('10.9.0.0', 24))).toEqual({});
    // Only the configured label names: `rack` is not one.
    expect(site.prefixLabels(subnet('10.1.1.9', 32))).toEqual({ site: 'x11', region: 'east' });
  });

  it('looks IPv6 up by /56 whatever the CMDB spelling, and /128 exactly', async () => {
    const { site } = await selectorOver(table);
    expect(site.prefixLabels(subnet('2001:db8:0:100::', 56))).toEqual({ site: 'v6a', region: 'west' });
    expect(site.prefixLabels(subnet('2001:db8:0:200::', 56))).toEqual({ site: 'v6b', region: 'west' });
    expect(site.prefixLabels(subnet('2001:db8::', 48))).toEqual({ region: 'west' });
    expect(site.prefixLabels(subnet('2001:db8:0:200::1', 128))).toEqual({ site: 'v6b', region: 'west' });
  });

  it('follows CMDB changes at the next lookup, address by address or whole', async () => {
    const { site, cmdb, cache } = await selectorOver(table, { trustedResolvers: ['10.0.0.53'] });
    expect(site.prefixLabels(subnet('10.1.2.0', 24))).toEqual({ region: 'east' });
    const { '10.1.1.5': _gone, ...rest } = table;
    cmdb.replace({ ...rest, '10.1.2.9': { site: 'x11', region: 'east' }, '10.1.9.1': { site: 'x19' } });
    expect(await cache.pollEvents()).toBe(true);
    expect(site.prefixLabels(subnet('10.1.2.0', 24))).toEqual({ site: 'x11', region: 'east' });
    expect(site.prefixLabels(subnet('10.1.2.9', 32))).toEqual({ site: 'x11', region: 'east' });
    expect(site.prefixLabels(subnet('10.1.1.5', 32))).toEqual({});
    expect(site.client('10.1.9.1').labels).toEqual({ site: 'x19' });
    // More changed addresses than are read one by one: the whole CMDB again.
    const many: Table = {};
    for (let i = 0; i < 5000; i += 1) many[`10.2.${i >> 8}.${i & 255}`] = { site: `s${i >> 8}`, region: 'big' };
    cmdb.replace(many);
    expect(await cache.pollEvents()).toBe(true);
    expect(site.prefixLabels(subnet('10.2.3.0', 24))).toEqual({ site: 's3', region: 'big' });
    expect(site.prefixLabels(subnet('10.2.0.0', 16))).toEqual({ region: 'big' });
    expect(site.prefixLabels(subnet('10.1.2.0', 24))).toEqual({});
  });
});

describe('SiteSelector: who asks', () => {
  const table: Table = { '33.33.33.33': { site: 'x11' }, '10.0.0.53': { site: 'resolver-site' }, '10.7.0.1': { site: 'host-site' }, '127.0.0.1': { site: 'lo' } };

  it('believes ECS from trusted resolvers only, and says what SCOPE it is good for', async () => {
    const { site } = await selectorOver(table, { trustedResolvers: ['10.0.0.0/24'] });
    expect(site.client('10.0.0.53', subnet('33.33.33.0', 24))).toEqual({ labels: { site: 'x11' }, scope: 24, tailored: true });
    // The same ECS from anyone else is ignored: the sender's own labels, SCOPE 0.
    expect(site.client('10.0.1.53', subnet('33.33.33.0', 24))).toEqual({ labels: {}, scope: 0, tailored: true });
    // No ECS from a trusted resolver: its own address.
    expect(site.client('10.0.0.53')).toEqual({ labels: { site: 'resolver-site' }, scope: 0, tailored: true });
  });

  it('takes source prefix 0 as an opt-out: nothing is tailored', async () => {
    const { site } = await selectorOver(table, { trustedResolvers: ['10.0.0.53'] });
    const optedOut = site.client('10.0.0.53', { family: 1, sourcePrefix: 0, address: new Uint8Array(0) });
    expect(optedOut).toMatchObject({ tailored: false, scope: 0 });
    const choice = site.select([inst('33.33.33.33'), inst('44.44.44.44')], optedOut);
    expect([ips(choice.instances), choice.byClient]).toEqual([['33.33.33.33', '44.44.44.44'], false]);
  });

  it('gives loopback askers the labels of loopbackAs, or of the loopback address itself', async () => {
    const { site } = await selectorOver(table, { loopbackAs: '10.7.0.1' });
    expect(site.client('127.0.0.1').labels).toEqual({ site: 'host-site' });
    expect(site.client('127.8.9.10').labels).toEqual({ site: 'host-site' });
    expect(site.client('::1').labels).toEqual({ site: 'host-site' });
    expect(site.client('::ffff:127.0.0.1').labels).toEqual({ site: 'host-site' });
    const plain = (await selectorOver(table)).site;
    expect(plain.client('127.0.0.1').labels).toEqual({ site: 'lo' });
    expect(plain.client('::ffff:33.33.33.33').labels).toEqual({ site: 'x11' });
    expect(plain.client('not-an-address').labels).toEqual({});
  });

  it('refuses settings it cannot use', async () => {
    const cache = (await selectorOver({})).cache;
    expect(() => new SiteSelector({ cmdb: cache, trustedResolvers: ['10.0.0.0/33'] })).toThrow(DnsConfigError);
    expect(() => new SiteSelector({ cmdb: cache, trustedResolvers: ['resolver.example'] })).toThrow(DnsConfigError);
    expect(() => new SiteSelector({ cmdb: cache, protectThreshold: 1.5 })).toThrow(DnsConfigError);
    expect(() => new SiteSelector({ cmdb: cache, loopbackAs: 'localhost' })).toThrow(DnsConfigError);
    expect(() => new SiteSelector({ cmdb: cache, labels: [] })).toThrow(DnsConfigError);
  });
});

describe('SiteSelector: selection', () => {
  const table: Table = {
    '10.0.1.1': { site: 'x11', region: 'east' },
    '10.0.1.2': { site: 'x11', region: 'east' },
    '10.0.2.1': { site: 'x12', region: 'east' },
    '10.0.3.1': { site: 'x21', region: 'west' },
  };
  const all = [inst('10.0.1.1'), inst('10.0.1.2'), inst('10.0.2.1'), inst('10.0.3.1')];

  it('prefers the same site, then the same region, then all', async () => {
    const { site } = await selectorOver(table);
    expect(site.select(all, asker({ site: 'x11', region: 'east' }))).toMatchObject({ level: 'site', byClient: true });
    expect(ips(site.select(all, asker({ site: 'x11', region: 'east' })).instances)).toEqual(['10.0.1.1', '10.0.1.2']);
    // x13 has no instance: its region.
    const region = site.select(all, asker({ site: 'x13', region: 'east' }));
    expect([ips(region.instances), region.level]).toEqual([['10.0.1.1', '10.0.1.2', '10.0.2.1'], 'region']);
    // Nothing shared, or nothing known: all of them, never none.
    expect(ips(site.select(all, asker({ site: 'x99', region: 'north' })).instances)).toHaveLength(4);
    expect(ips(site.select(all, asker({})).instances)).toHaveLength(4);
  });

  it('falls back when the same-site instances are not live', async () => {
    const { site } = await selectorOver(table);
    const some = [inst('10.0.1.1', { healthy: false }), inst('10.0.1.2', { enabled: false }), inst('10.0.2.1'), inst('10.0.3.1'), inst('10.0.3.2', { weight: 0 })];
    const choice = site.select(some, asker({ site: 'x11', region: 'east' }));
    expect([ips(choice.instances), choice.level]).toEqual([['10.0.2.1'], 'region']);
  });

  it('reads an instance\'s own metadata labels before the CMDB\'s', async () => {
    const { site } = await selectorOver(table);
    const moved = [inst('10.0.1.1', { metadata: { site: 'x21' } }), inst('10.0.1.2'), inst('10.0.3.1')];
    expect(ips(site.select(moved, asker({ site: 'x21' })).instances)).toEqual(['10.0.1.1', '10.0.3.1']);
  });

  it('answers unhealthy instances too when fewer than the protect threshold are healthy', async () => {
    const { site } = await selectorOver(table, { protectThreshold: 0.5 });
    const sick = [inst('10.0.1.1', { healthy: false }), inst('10.0.1.2', { healthy: false }), inst('10.0.2.1', { healthy: false }), inst('10.0.3.1'), inst('10.0.9.9', { enabled: false })];
    // 1 of 4 answerable instances is healthy (the disabled one does not count): protected.
    const x11 = site.select(sick, asker({ site: 'x11' }));
    expect([ips(x11.instances), x11.protected]).toEqual([['10.0.1.1', '10.0.1.2'], true]);
    expect(ips(site.select(sick, asker({})).instances)).toEqual(['10.0.1.1', '10.0.1.2', '10.0.2.1', '10.0.3.1']);
    // Half healthy is not below 0.5: only the healthy ones.
    const half = [inst('10.0.1.1', { healthy: false }), inst('10.0.3.1')];
    expect(site.select(half, asker({ site: 'x11' }))).toMatchObject({ protected: false, instances: [{ ip: '10.0.3.1' }] });
    // Off by default: only the healthy one.
    expect(ips((await selectorOver(table)).site.select(sick, asker({ site: 'x11' })).instances)).toEqual(['10.0.3.1']);
  });

  it('pins a site by its DNS label, falling back on the asker\'s region, then all', async () => {
    const { site } = await selectorOver({ ...table, '10.0.4.1': { site: 'X_22', region: 'west' } });
    const with22 = [...all, inst('10.0.4.1')];
    const pinned = site.select(with22, asker({ site: 'x11', region: 'east' }), 'x21');
    expect([ips(pinned.instances), pinned.byClient]).toEqual([['10.0.3.1'], false]);
    expect(ips(site.select(with22, asker({}), 'x-22').instances)).toEqual(['10.0.4.1']);
    const fallback = site.select(with22, asker({ region: 'east' }, 24), 'x99');
    expect([ips(fallback.instances), fallback.byClient]).toEqual([['10.0.1.1', '10.0.1.2', '10.0.2.1'], true]);
    expect(site.select(with22, asker({}), 'x99').instances).toHaveLength(5);
  });

  it('does not tie a choice of one to the asker', async () => {
    const { site } = await selectorOver(table);
    expect(site.select([inst('10.0.1.1')], asker({ site: 'x12' }))).toMatchObject({ byClient: false, instances: [{ ip: '10.0.1.1' }] });
  });
});

describe('same-site answers served to dig (Nacos\' classic example)', () => {
  let dir: string;
  let server: DnsServer;
  let site: SiteSelector;
  let cache: CmdbCache;
  let file: FileCmdbProvider;
  const NAME = 'orders.default-group.public.svc.regsync.internal';

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'regsync-dns-site-'));
    await writeFile(join(dir, 'cmdb.yaml'), NACOS_SCENARIO_YAML);
    file = new FileCmdbProvider({ path: join(dir, 'cmdb.yaml') });
    await file.start();
    cache = new CmdbCache({ provider: file, refreshMs: NEVER, eventPollMs: NEVER });
    await cache.start();
    site = new SiteSelector({ cmdb: cache, trustedResolvers: ['127.0.0.1'] });
    const catalogue = new DnsCatalogue({ zone: 'regsync.internal', logger: silentLogger() });
    const provider = (ip: string): Instance => ({ ip, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: {} });
    // One service, its providers read from two registries.
    catalogue.put('nacos-a', { namespace: '', group: 'DEFAULT_GROUP', name: 'orders' }, [provider('11.11.11.11')]);
    catalogue.put('nacos-b', { namespace: '', group: 'DEFAULT_GROUP', name: 'orders' }, [provider('22.22.22.22')]);
    server = await startDnsServer({ zone: catalogue, logger: silentLogger(), responder: { site } });
  });
  afterAll(async () => {
    await server?.close();
    site?.close();
    await cache?.stop();
    await file?.close();
    await rm(dir, { recursive: true, force: true });
  });

  const dig = async (...args: string[]): Promise<string> =>
    (await run('dig', ['@127.0.0.1', '-p', String(server.port), '+norec', '+time=5', '+tries=1', ...args])).stdout;
  const addresses = (out: string): string[] =>
    [...out.matchAll(/^orders\.\S+\s+\d+\s+IN\s+A\s+(\S+)$/gm)].map((m) => m[1]!).sort();

  it('gives consumers 33, 44 and 55 the providers [11], [22] and both, with SCOPE = the source prefix', async () => {
    const x11 = await dig(`+subnet=33.33.33.33/32`, NAME, 'A');
    expect(addresses(x11)).toEqual(['11.11.11.11']);
    expect(x11).toContain('CLIENT-SUBNET: 33.33.33.33/32/32');
    const x12 = await dig(`+subnet=44.44.44.44/32`, NAME, 'A');
    expect(addresses(x12)).toEqual(['22.22.22.22']);
    expect(x12).toContain('CLIENT-SUBNET: 44.44.44.44/32/32');
    const x13 = await dig(`+subnet=55.55.55.55/32`, NAME, 'A');
    expect(addresses(x13)).toEqual(['11.11.11.11', '22.22.22.22']);
    expect(x13).toContain('CLIENT-SUBNET: 55.55.55.55/32/32');
  });

  it('looks a /24 up by prefix, answers the pinned site name, and gives SCOPE 0 where the asker does not matter', async () => {
    const prefix = await dig('+subnet=33.33.33.0/24', NAME, 'A');
    expect([addresses(prefix), prefix.includes('CLIENT-SUBNET: 33.33.33.0/24/24')]).toEqual([['11.11.11.11'], true]);
    const pinned = await dig('+subnet=33.33.33.33/32', 'orders.svc.x12.site.regsync.internal', 'A');
    expect([addresses(pinned), pinned.includes('CLIENT-SUBNET: 33.33.33.33/32/0')]).toEqual([['22.22.22.22'], true]);
    // dig itself (127.0.0.1, no CMDB labels) without ECS: both providers.
    expect(addresses(await dig(NAME, 'A'))).toEqual(['11.11.11.11', '22.22.22.22']);
  });
});
