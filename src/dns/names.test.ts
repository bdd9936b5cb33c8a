import { describe, expect, it } from 'vitest';
import { DnsConfigError } from './dns-config-error.js';
import {
  addressLabel,
  aliasName,
  canonicalName,
  emptyNamesAbove,
  instanceName,
  isDnsLabel,
  mapLabel,
  nameHash,
  portName,
  serviceLabel,
  shortNames,
  validateZone,
} from './names.js';

const Z = 'regsync.internal';
const key = (name: string, group = 'DEFAULT_GROUP', namespace = '') => ({ namespace, group, name });

describe('mapLabel', () => {
  it('keeps valid labels exactly, punycode and double dashes included', () => {
    for (const l of ['orders', 'orders-v2', 'a--b', 'xn--bcher-kva', '9lives', 'a'.repeat(63)]) expect(mapLabel(l)).toBe(l);
  });

  it('lowercases and turns _ : @ / . and spaces into one -', () => {
    expect(mapLabel('DEFAULT_GROUP')).toBe('default-group');
    expect(mapLabel('Orders.V2')).toBe('orders-v2');
    expect(mapLabel('a:b@c/d e\tf')).toBe('a-b-c-d-e-f');
    expect(mapLabel('a__::..b')).toBe('a-b');
    expect(mapLabel('__lead..trail--')).toBe('lead-trail');
  });

  it('hashes names with other characters, empty results and long labels', () => {
    expect(mapLabel('a+b')).toBe(`a-b-${nameHash('a+b')}`);
    expect(mapLabel('a#b')).not.toBe(mapLabel('a+b'));
    expect(mapLabel('名前')).toBe(nameHash('名前'));
    expect(mapLabel('')).toBe(nameHash(''));
    expect(mapLabel('___')).toBe(nameHash('___'));
    const long1 = `${'x'.repeat(60)}-one`;
    const long2 = `${'x'.repeat(60)}-two`;
    expect(mapLabel(long1)).toHaveLength(63);
    expect(mapLabel(long1)).toBe(`${'x'.repeat(54)}-${nameHash(long1)}`);
    expect(mapLabel(long1)).not.toBe(mapLabel(long2));
    // Kelvin sign is not ASCII K: never lowercased into a plain name.
    expect(mapLabel('\u212Aey')).toBe(`ey-${nameHash('\u212Aey')}`);
  });

  it('maps names alike that differ only in case or separators (the catalogue reports those)', () => {
    expect(mapLabel('Orders_V2')).toBe(mapLabel('orders.v2'));
  });

  it('always answers a valid label, even for huge and hostile names', () => {
    for (const raw of ['x'.repeat(100_000), '-'.repeat(1000), '🙂'.repeat(40), 'A'.repeat(64), '.a.', ' ', '\u0000']) {
      const l = mapLabel(raw);
      expect(isDnsLabel(l), `${JSON.stringify(raw.slice(0, 20))} -> ${l}`).toBe(true);
    }
  });
});

describe('serviceLabel', () => {
  it('makes one label of a Dubbo key from interface, version and group', () => {
    expect(serviceLabel('providers:com.acme.Echo:1.0.0:g1')).toBe('com-acme-echo-1-0-0-g1');
    expect(serviceLabel('providers:com.acme.Echo:1.0.0:')).toBe('com-acme-echo-1-0-0');
    expect(serviceLabel('providers:com.acme.Echo::')).toBe('com-acme-echo');
    expect(serviceLabel('providers:com.acme.Echo')).toBe('com-acme-echo');
    expect(serviceLabel('providers:com.acme.Echo::g1')).toBe('com-acme-echo-g1');
  });

  it('hashes a long Dubbo key over the whole key', () => {
    const name = `providers:com.acme.${'Very'.repeat(20)}:1.0.0:g1`;
    const l = serviceLabel(name);
    expect(l).toHaveLength(63);
    expect(l.endsWith(`-${nameHash(name)}`)).toBe(true);
  });

  it('maps other names as they are', () => {
    expect(serviceLabel('consumers:com.acme.Echo:1.0.0:')).toBe('consumers-com-acme-echo-1-0-0');
    expect(serviceLabel('com.acme.Echo')).toBe('com-acme-echo');
    expect(serviceLabel('providers::1.0.0:g')).toBe('providers-1-0-0-g');
    expect(serviceLabel('providers:a:b:c:d')).toBe('providers-a-b-c-d');
  });
});

describe('name forms', () => {
  it('builds the canonical name with public for the empty namespace', () => {
    expect(canonicalName(key('orders'), Z)).toBe('orders.default-group.public.svc.regsync.internal');
    expect(canonicalName(key('providers:com.acme.Echo:1.0.0:g1', 'prod', 'team-a'), Z)).toBe('com-acme-echo-1-0-0-g1.prod.team-a.svc.regsync.internal');
  });

  it('gives short forms only to the default group, the shortest only in the public namespace', () => {
    expect(shortNames(key('orders'), Z)).toEqual(['orders.public.svc.regsync.internal', 'orders.svc.regsync.internal']);
    expect(shortNames(key('orders', 'DEFAULT_GROUP', 'public'), Z)).toHaveLength(2);
    expect(shortNames(key('orders', 'DEFAULT_GROUP', 'team-a'), Z)).toEqual(['orders.team-a.svc.regsync.internal']);
    expect(shortNames(key('orders', 'prod'), Z)).toEqual([]);
  });

  it('lists the empty non-terminals above a service', () => {
    expect(emptyNamesAbove(key('orders', 'prod', 'team-a'), Z)).toEqual(['svc.regsync.internal', 'team-a.svc.regsync.internal', 'prod.team-a.svc.regsync.internal']);
  });

  it('names instances by dashed address, one label for every spelling of an IPv6 address', () => {
    expect(addressLabel('10.0.0.1')).toBe('10-0-0-1');
    expect(addressLabel('2001:db8::1')).toBe('2001-db8-0-0-0-0-0-1');
    expect(addressLabel('2001:0DB8:0000::0001')).toBe('2001-db8-0-0-0-0-0-1');
    expect(addressLabel('::')).toBe('0-0-0-0-0-0-0-0');
    expect(addressLabel('::1')).toBe('0-0-0-0-0-0-0-1');
    expect(addressLabel('fe80::')).toBe('fe80-0-0-0-0-0-0-0');
    expect(addressLabel('::ffff:10.0.0.1')).toBe('0-0-0-0-0-ffff-a00-1');
    expect(addressLabel('1:2:3:4:5:6:7:8')).toBe('1-2-3-4-5-6-7-8');
    for (const bad of ['host.example', 'fe80::1%eth0', '', '10.0.0', '1::2::3']) expect(addressLabel(bad)).toBeUndefined();
    expect(instanceName('10.0.0.1', 'orders.x')).toBe('10-0-0-1.orders.x');
  });

  it('names ports the RFC 2782 way, in one label each', () => {
    expect(portName({ name: 'dubbo', proto: 'tcp' }, 'o.z')).toBe('_dubbo._tcp.o.z');
    expect(portName({ name: 'Grpc_Web', proto: 'udp' }, 'o.z')).toBe('_grpc-web._udp.o.z');
    const long = portName({ name: 'p'.repeat(80), proto: 'tcp' }, 'o.z');
    expect(long.split('.')[0]).toHaveLength(63);
  });
});

describe('validateZone', () => {
  it('normalises a valid zone', () => {
    expect(validateZone('RegSync.Internal.')).toBe('regsync.internal');
    expect(validateZone('dns1.example.com')).toBe('dns1.example.com');
  });

  it('refuses .local, cluster.local and names that are not DNS names', () => {
    for (const bad of ['local', 'cluster.local', 'x.LOCAL.', '', '.', 'a..b', '-a.b', 'a-.b', 'a_b.internal', 'ä.internal', `${'a'.repeat(64)}.x`, `${'a.'.repeat(127)}a`]) {
      expect(() => validateZone(bad), bad).toThrow(DnsConfigError);
    }
    try {
      validateZone('cluster.local');
    } catch (err) {
      expect(err).toBeInstanceOf(DnsConfigError);
      expect((err as DnsConfigError).code).toBe('dns-config-invalid');
      expect((err as Error).message).toMatch(/multicast DNS/);
    }
  });

  it('checks aliases: one label, not reserved', () => {
    expect(aliasName('Echo', Z)).toBe('echo.regsync.internal');
    for (const bad of ['svc', 'site', 'a.b', 'a_b', '', '-x']) expect(() => aliasName(bad, Z), bad).toThrow(DnsConfigError);
  });
});

describe('the model’s empty group and namespace', () => {
  it('name the default group and the public namespace, as the adapters read them', () => {
    expect(canonicalName({ namespace: '', group: '', name: 'orders' }, 'regsync.internal')).toBe('orders.default-group.public.svc.regsync.internal');
    expect(shortNames({ namespace: '', group: '', name: 'orders' }, 'regsync.internal')).toContain('orders.svc.regsync.internal');
  });
});
