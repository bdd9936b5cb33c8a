import { describe, expect, it } from 'vitest';
import { createLogger } from '../log.js';
import { MARK_ORIGIN, type Instance, type ServiceKey } from '../model/types.js';
import { DnsCatalogue } from './catalogue.js';
import { DnsConfigError } from './dns-config-error.js';

const Z = 'regsync.internal';
const key = (name: string, group = 'DEFAULT_GROUP', namespace = ''): ServiceKey => ({ namespace, group, name });
const inst = (ip: string, port = 8080, metadata: Record<string, string> = {}): Instance => ({
  ip,
  port,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata,
});

function serviceAt(c: DnsCatalogue, name: string): ServiceKey | undefined {
  const node = c.find(name);
  return node?.kind === 'service' || node?.kind === 'port' || node?.kind === 'instance' ? node.service.service : undefined;
}

describe('DnsCatalogue', () => {
  it('finds every kind of node, case-insensitively, with or without the trailing dot', () => {
    const c = new DnsCatalogue({ zone: Z });
    c.put('a', key('orders'), [inst('10.0.0.1', 20880, { protocol: 'dubbo' }), inst('2001:db8::1')]);
    expect(c.find('regsync.internal')).toEqual({ kind: 'apex' });
    expect(c.find('REGSYNC.internal.')).toEqual({ kind: 'apex' });
    const canonical = c.find('orders.default-group.public.svc.regsync.internal');
    expect(canonical?.kind).toBe('service');
    if (canonical?.kind !== 'service') return;
    expect(canonical.service.name).toBe('orders.default-group.public.svc.regsync.internal');
    expect(canonical.service.instances.map((i) => i.ip)).toEqual(['10.0.0.1', '2001:db8::1']);
    expect(canonical.service.ttlSeconds).toBe(5);
    expect(c.find('Orders.Default-Group.PUBLIC.svc.regsync.internal.')).toBe(canonical);
    expect(c.find('orders.public.svc.regsync.internal')).toEqual(canonical);
    expect(c.find('orders.svc.regsync.internal')).toEqual(canonical);
    const instance = c.find('10-0-0-1.orders.default-group.public.svc.regsync.internal');
    expect(instance?.kind === 'instance' && instance.instance.port).toBe(20880);
    expect(c.find('2001-db8-0-0-0-0-0-1.orders.default-group.public.svc.regsync.internal')?.kind).toBe('instance');
    const port = c.find('_dubbo._tcp.orders.default-group.public.svc.regsync.internal');
    expect(port?.kind === 'port' && port.port).toEqual({ name: 'dubbo', proto: 'tcp', port: 20880 });
    expect(c.find('_dubbo._tcp.orders.public.svc.regsync.internal')?.kind).toBe('port');
    expect(c.find('_dubbo._tcp.orders.svc.regsync.internal')?.kind).toBe('port');
    for (const empty of ['svc.regsync.internal', 'public.svc.regsync.internal', 'default-group.public.svc.regsync.internal', '_tcp.orders.default-group.public.svc.regsync.internal']) {
      expect(c.find(empty), empty).toEqual({ kind: 'empty' });
    }
    for (const missing of ['nope.regsync.internal', 'other.svc.regsync.internal', '10-0-0-9.orders.default-group.public.svc.regsync.internal', 'orders.default-group.public.svc.elsewhere', 'internal', '_http._tcp.orders.svc.regsync.internal']) {
      expect(c.find(missing), missing).toBeUndefined();
    }
  });

  it('gives short forms only to the default group, and the shortest only in the public namespace', () => {
    const c = new DnsCatalogue({ zone: Z });
    c.put('a', key('pay', 'prod', 'team-a'), [inst('10.0.0.1')]);
    c.put('a', key('cart', 'DEFAULT_GROUP', 'team-a'), [inst('10.0.0.2')]);
    expect(c.find('pay.prod.team-a.svc.regsync.internal')?.kind).toBe('service');
    expect(c.find('pay.team-a.svc.regsync.internal')).toBeUndefined();
    expect(c.find('pay.svc.regsync.internal')).toBeUndefined();
    expect(c.find('cart.team-a.svc.regsync.internal')?.kind).toBe('service');
    expect(c.find('cart.svc.regsync.internal')).toBeUndefined();
    expect(c.find('prod.team-a.svc.regsync.internal')).toEqual({ kind: 'empty' });
    expect(c.find('team-a.svc.regsync.internal')).toEqual({ kind: 'empty' });
  });

  it('names Dubbo services by interface, version and group', () => {
    const c = new DnsCatalogue({ zone: Z });
    c.put('zk', key('providers:com.acme.Echo:1.0.0:g1'), [inst('10.0.0.1', 20880, { protocol: 'dubbo' })]);
    expect(serviceAt(c, 'com-acme-echo-1-0-0-g1.svc.regsync.internal')?.name).toBe('providers:com.acme.Echo:1.0.0:g1');
  });

  it('keeps empty non-terminals while any service is below them, and drops them with the last', () => {
    const c = new DnsCatalogue({ zone: Z });
    c.put('a', key('one', 'g'), [inst('10.0.0.1')]);
    c.put('a', key('two', 'g'), [inst('10.0.0.2')]);
    c.remove('a', key('one', 'g'));
    expect(c.find('g.public.svc.regsync.internal')).toEqual({ kind: 'empty' });
    expect(c.find('one.g.public.svc.regsync.internal')).toBeUndefined();
    expect(c.find('10-0-0-1.one.g.public.svc.regsync.internal')).toBeUndefined();
    c.remove('a', key('two', 'g'));
    expect(c.find('g.public.svc.regsync.internal')).toBeUndefined();
    expect(c.find('svc.regsync.internal')).toBeUndefined();
    expect(c.stats()).toMatchObject({ services: 0, names: 0 });
  });

  it('keeps a service without instances (NODATA, not NXDOMAIN)', () => {
    const c = new DnsCatalogue({ zone: Z });
    c.put('a', key('orders'), []);
    const node = c.find('orders.svc.regsync.internal');
    expect(node?.kind === 'service' && node.service.instances).toEqual([]);
  });

  it('lets a service named like a group or namespace have data where an empty non-terminal is', () => {
    const c = new DnsCatalogue({ zone: Z });
    c.put('a', key('x', 'public', 'public'), [inst('10.0.0.1')]);
    c.put('a', key('public'), [inst('10.0.0.2')]);
    expect(serviceAt(c, 'public.svc.regsync.internal')?.name).toBe('public');
    expect(c.collisions()).toEqual([]);
    c.remove('a', key('public'));
    expect(c.find('public.svc.regsync.internal')).toEqual({ kind: 'empty' });
  });

  it('serves aliases from configuration, metadata and put options', () => {
    const c = new DnsCatalogue({ zone: Z, aliases: { Echo: key('providers:com.acme.Echo:1.0.0:') } });
    c.put('zk', key('providers:com.acme.Echo:1.0.0:'), [inst('10.0.0.1')]);
    c.put('n', key('orders'), [inst('10.0.0.2', 80, { 'dns.alias': 'shop, Buy' })], { aliases: ['checkout'] });
    expect(serviceAt(c, 'echo.regsync.internal')?.name).toBe('providers:com.acme.Echo:1.0.0:');
    for (const a of ['shop', 'buy', 'checkout']) expect(serviceAt(c, `${a}.regsync.internal`)?.name).toBe('orders');
  });

  it('refuses bad configuration with DnsConfigError and leaves bad metadata aliases out', () => {
    expect(() => new DnsCatalogue({ zone: 'cluster.local' })).toThrow(DnsConfigError);
    expect(() => new DnsCatalogue({ zone: Z, aliases: { svc: key('x') } })).toThrow(DnsConfigError);
    expect(() => new DnsCatalogue({ zone: Z, aliases: { 'a.b': key('x') } })).toThrow(DnsConfigError);
    expect(() => new DnsCatalogue({ zone: Z, ttlSeconds: -1 })).toThrow(DnsConfigError);
    const c = new DnsCatalogue({ zone: Z });
    c.put('a', key('orders'), [inst('10.0.0.1', 80, { 'dns.alias': 'svc,a_b,ok' })]);
    expect(c.find('ok.regsync.internal')?.kind).toBe('service');
    expect(c.find('a_b.regsync.internal')).toBeUndefined();
    expect(c.find('svc.regsync.internal')).toEqual({ kind: 'empty' });
  });

  it('reports collisions of mapped names; the first keeps the name and hands it over when it goes', () => {
    const c = new DnsCatalogue({ zone: Z });
    c.put('a', key('Orders_V2'), [inst('10.0.0.1')]);
    c.put('a', key('orders.v2'), [inst('10.0.0.2')]);
    expect(serviceAt(c, 'orders-v2.svc.regsync.internal')?.name).toBe('Orders_V2');
    const collided = c.collisions().find((x) => x.name === 'orders-v2.default-group.public.svc.regsync.internal');
    expect(collided).toEqual({ name: 'orders-v2.default-group.public.svc.regsync.internal', owner: key('Orders_V2'), waiting: [key('orders.v2')] });
    expect(c.collisions().map((x) => x.name).sort()).toEqual([
      'orders-v2.default-group.public.svc.regsync.internal',
      'orders-v2.public.svc.regsync.internal',
      'orders-v2.svc.regsync.internal',
    ]);
    // The waiting service has nothing below a name it does not hold.
    expect(c.find('10-0-0-2.orders-v2.default-group.public.svc.regsync.internal')).toBeUndefined();
    // A re-put of the holder keeps its place.
    c.put('a', key('Orders_V2'), [inst('10.0.0.1'), inst('10.0.0.3')]);
    expect(serviceAt(c, 'orders-v2.svc.regsync.internal')?.name).toBe('Orders_V2');
    c.remove('a', key('Orders_V2'));
    expect(serviceAt(c, 'orders-v2.svc.regsync.internal')?.name).toBe('orders.v2');
    expect(c.find('10-0-0-2.orders-v2.default-group.public.svc.regsync.internal')?.kind).toBe('instance');
    expect(c.find('10-0-0-1.orders-v2.default-group.public.svc.regsync.internal')).toBeUndefined();
    expect(c.collisions()).toEqual([]);
  });

  it('reports a taken alias; configuration wins over metadata', () => {
    const lines: Array<{ level: number; msg: string; name?: string }> = [];
    const logger = createLogger('info', { write: (line: string) => void lines.push(JSON.parse(line)) });
    const warnings = () => lines.filter((l) => l.level === 40);
    const c = new DnsCatalogue({ zone: Z, aliases: { shop: key('cart') }, logger });
    c.put('a', key('orders'), [inst('10.0.0.1', 80, { 'dns.alias': 'shop' })]);
    c.put('a', key('pay'), [inst('10.0.0.2', 80, { 'dns.alias': 'shop' })]);
    expect(serviceAt(c, 'shop.regsync.internal')?.name).toBe('orders');
    c.put('a', key('pay'), [inst('10.0.0.2', 80, { 'dns.alias': 'shop' })]);
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({ name: 'shop.regsync.internal', holder: '/DEFAULT_GROUP/orders', service: '/DEFAULT_GROUP/pay' });
    c.put('a', key('cart'), [inst('10.0.0.3')]);
    expect(serviceAt(c, 'shop.regsync.internal')?.name).toBe('cart');
    expect(c.collisions()).toEqual([{ name: 'shop.regsync.internal', owner: key('cart'), waiting: [key('orders'), key('pay')] }]);
    c.remove('a', key('cart'));
    c.remove('a', key('orders'));
    expect(serviceAt(c, 'shop.regsync.internal')?.name).toBe('pay');
  });

  it('updates one service in place: instances and ports come and go', () => {
    const c = new DnsCatalogue({ zone: Z });
    c.put('a', key('orders'), [inst('10.0.0.1', 80, { 'dns.port-name': 'http' })]);
    c.put('a', key('orders'), [inst('10.0.0.2', 53, { 'dns.port-name': 'dns', 'dns.proto': 'udp' })]);
    expect(c.find('10-0-0-1.orders.default-group.public.svc.regsync.internal')).toBeUndefined();
    expect(c.find('10-0-0-2.orders.default-group.public.svc.regsync.internal')?.kind).toBe('instance');
    expect(c.find('_http._tcp.orders.default-group.public.svc.regsync.internal')).toBeUndefined();
    expect(c.find('_tcp.orders.default-group.public.svc.regsync.internal')).toBeUndefined();
    expect(c.find('_dns._udp.orders.default-group.public.svc.regsync.internal')?.kind).toBe('port');
    const node = c.find('orders.svc.regsync.internal');
    expect(node?.kind === 'service' && node.service.instances.map((i) => i.ip)).toEqual(['10.0.0.2']);
  });

  it('answers the union of the clusters, one instance per address, originals before copies', () => {
    const c = new DnsCatalogue({ zone: Z });
    c.put('copy', key('orders'), [inst('10.0.0.1', 80, { [MARK_ORIGIN]: 'src' }), inst('10.0.0.3')]);
    c.put('src', key('orders'), [inst('10.0.0.1', 80), inst('10.0.0.2')]);
    const node = c.find('orders.svc.regsync.internal');
    if (node?.kind !== 'service') throw new Error('no service');
    expect(node.service.instances.map((i) => `${i.ip}:${i.port}`).sort()).toEqual(['10.0.0.1:80', '10.0.0.2:8080', '10.0.0.3:8080']);
    expect(node.service.instances.find((i) => i.ip === '10.0.0.1')?.metadata).toEqual({});
    expect(node.service.cluster).toBe('copy');
    c.remove('copy', key('orders'));
    const after = c.find('orders.svc.regsync.internal');
    expect(after?.kind === 'service' && after.service.instances.map((i) => i.ip)).toEqual(['10.0.0.1', '10.0.0.2']);
    expect(c.find('10-0-0-3.orders.default-group.public.svc.regsync.internal')).toBeUndefined();
  });

  it('takes TTLs from the first matching glob, else the default', () => {
    const c = new DnsCatalogue({ zone: Z, ttlSeconds: 2, ttl: [{ services: ['orders-*'], seconds: 30 }, { services: ['*'], seconds: 10 }] });
    c.put('a', key('orders-eu'), []);
    c.put('a', key('pay'), []);
    expect(c.service(key('orders-eu'))?.ttlSeconds).toBe(30);
    expect(c.service(key('pay'))?.ttlSeconds).toBe(10);
    expect(new DnsCatalogue({ zone: Z, ttlSeconds: 2 }).zone).toBe(Z);
    expect(() => new DnsCatalogue({ zone: Z, ttl: [{ services: ['[a'], seconds: 1 }] })).toThrow(/ttl\[0\]\.services/);
  });

  it('marks the services of a stale cluster, and clears it when fresh', () => {
    const c = new DnsCatalogue({ zone: Z });
    c.put('a', key('orders'), [inst('10.0.0.1')]);
    c.put('b', key('orders'), [inst('10.0.0.2')]);
    c.put('b', key('pay'), [inst('10.0.0.3')]);
    c.markStale('a', 1000);
    expect(c.service(key('orders'))?.staleSince).toBe(1000);
    expect(c.service(key('pay'))?.staleSince).toBeUndefined();
    const node = c.find('orders.svc.regsync.internal');
    expect(node?.kind === 'service' && node.service.staleSince).toBe(1000);
    c.markStale('b', 500);
    expect(c.service(key('orders'))?.staleSince).toBe(500);
    c.markFresh('b');
    c.markFresh('a');
    expect(c.service(key('orders'))?.staleSince).toBeUndefined();
    const fresh = c.find('orders.svc.regsync.internal');
    expect(fresh?.kind === 'service' && fresh.service.staleSince).toBeUndefined();
  });

  it('leaves out names longer than 253 characters', () => {
    const zone = `${'z'.repeat(60)}.${'y'.repeat(60)}.internal`;
    const c = new DnsCatalogue({ zone });
    const long = (ch: string) => ch.repeat(63);
    c.put('a', key(long('s'), long('g'), long('n')), [inst('2001:db8::1')]);
    expect(c.find(`${long('s')}.${long('g')}.${long('n')}.svc.${zone}`)).toBeUndefined();
    expect(c.find(`${long('n')}.svc.${zone}`)).toEqual({ kind: 'empty' });
  });

  it('keeps a change local: 10,000 services, and a put or remove writes only its own names', () => {
    const c = new DnsCatalogue({ zone: Z });
    const n = 10_000;
    for (let i = 0; i < n; i += 1) c.put('a', key(`svc-${i}`, 'g'), [inst(`10.${i >> 8}.${i & 255}.1`), inst(`10.${i >> 8}.${i & 255}.2`)]);
    // Per service: canonical + 2 instances; shared: svc, public.svc, g.public.svc.
    expect(c.stats()).toMatchObject({ services: n, names: n * 3 + 3, collisions: 0 });
    const before = c.stats().indexWrites;
    c.put('a', key('svc-5000', 'g'), [inst('10.19.136.1'), inst('10.19.136.9')]);
    // One instance name released, one claimed, the nodes of the canonical name and the kept instance replaced.
    expect(c.stats().indexWrites - before).toBe(4);
    const mid = c.stats().indexWrites;
    for (let i = 0; i < n; i += 1) c.remove('a', key(`svc-${i}`, 'g'));
    // Each remove releases its 6 names (3 own, 3 shared references).
    expect(c.stats().indexWrites - mid).toBe(n * 6);
    expect(c.stats()).toMatchObject({ services: 0, names: 0 });
  });
});
