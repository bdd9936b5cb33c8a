import * as dnsPacket from 'dns-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wireName, wireOpt, wireQuery, wireQuestion, type WireLabel } from '../../test/support/dns-wire.js';
import { CmdbCache, SnapshotCmdbProvider, parseCmdbFile } from '../cmdb/index.js';
import type { Instance } from '../model/types.js';
import { DnsCatalogue } from './catalogue.js';
import { instanceName } from './names.js';
import { DnsResponder, isEncodableName, srvWeight, type Asker, type DnsReply, type ResponderOptions } from './responder.js';
import { SiteSelector, type SiteSelectorOptions } from './site.js';
import type { DnsInstance, DnsService, ZoneLookup, ZoneNode } from './zone.js';

const ZONE = 'regsync.internal';

function zoneWith(instances: DnsInstance[], name = `orders.svc.${ZONE}`): ZoneLookup {
  const service: DnsService = { name, service: {} as never, cluster: 'c1', instances, ttlSeconds: 2, ports: [] };
  const nodes = new Map<string, ZoneNode>([[ZONE, { kind: 'apex' }], [name, { kind: 'service', service }]]);
  return { zone: ZONE, find: (n) => nodes.get(n) };
}

const inst = (ip: string, weight = 1): DnsInstance => ({ ip, port: 80, weight, healthy: true, enabled: true, metadata: {} });
const opt = (extra: Partial<dnsPacket.OptAnswer> = {}): dnsPacket.OptAnswer =>
  ({ type: 'OPT', name: '.', udpPayloadSize: 4096, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [], ...extra }) as dnsPacket.OptAnswer;

function ask(responder: DnsResponder, packet: dnsPacket.Packet, transport: 'udp' | 'tcp' = 'udp'): { reply: dnsPacket.DecodedPacket; size: number; truncated: boolean } {
  const out = askWire(responder, dnsPacket.encode({ type: 'query', id: 1, ...packet }), { address: '127.0.0.1', transport });
  return { reply: dnsPacket.decode(out.message), size: out.message.length, truncated: out.truncated };
}

/** The answer to a query built octet by octet (test/support/dns-wire.ts). */
function askWire(responder: DnsResponder, message: Buffer, asker: Asker = { address: '127.0.0.1', transport: 'udp' }): DnsReply {
  return responder.respond(message, dnsPacket.decode(message), asker);
}

/** The owner name of the first answer record, as octets: right after the question. */
function firstOwner(reply: Buffer): Buffer {
  const at = 12 + wireQuestion(reply).length;
  let end = at;
  while (reply[end] !== 0 && end < reply.length) end += 1 + (reply[end] ?? 0);
  return reply.subarray(at, end + 1);
}

const many = Array.from({ length: 200 }, (_, i) => inst(`10.0.${i >> 8}.${i & 255}`));

describe('DnsResponder', () => {
  it('caps EDNS UDP answers at the configured limit, keeps the OPT, and never caps TCP', () => {
    const r = new DnsResponder(zoneWith(many), { udpSizeLimit: 1232 });
    const q = { questions: [{ type: 'A' as const, name: `orders.svc.${ZONE}` }], additionals: [opt()] };
    const udp = ask(r, q);
    expect(udp.truncated).toBe(true);
    expect(udp.size).toBeLessThanOrEqual(1232);
    expect((udp.reply.flags ?? 0) & dnsPacket.TRUNCATED_RESPONSE).toBeTruthy();
    expect(udp.reply.additionals?.map((a) => a.type)).toEqual(['OPT']);
    expect((udp.reply.additionals?.[0] as dnsPacket.OptAnswer).udpPayloadSize).toBe(1232);
    const tcp = ask(r, q, 'tcp');
    expect(tcp.truncated).toBe(false);
    expect(tcp.reply.answers).toHaveLength(200);
  });

  it('counts requested sizes under 512 as 512', () => {
    const r = new DnsResponder(zoneWith(many.slice(0, 6)));
    // 6 A records: more than the 100 octets asked for, less than 512.
    const small = ask(r, { questions: [{ type: 'A', name: `orders.svc.${ZONE}` }], additionals: [opt({ udpPayloadSize: 100 })] });
    expect(small.truncated).toBe(false);
    expect(small.reply.answers).toHaveLength(6);
    expect(small.size).toBeGreaterThan(100);
  });

  it('answers FORMERR for two OPTs and for a malformed ECS option', () => {
    const r = new DnsResponder(zoneWith([]));
    const q = { type: 'A' as const, name: ZONE };
    expect((ask(r, { questions: [q], additionals: [opt(), opt()] }).reply.flags ?? 0) & 0xf).toBe(1);
    // Source prefix 24 but 4 address bytes: too many (RFC 7871 §7.1.2).
    const ecs = Buffer.from([0, 1, 24, 0, 203, 0, 113, 7]);
    expect((ask(r, { questions: [q], additionals: [opt({ options: [{ code: 8, data: ecs } as dnsPacket.PacketOpt] })] }).reply.flags ?? 0) & 0xf).toBe(1);
  });

  it('puts the high bits of BADVERS into the OPT', () => {
    const { reply } = ask(new DnsResponder(zoneWith([])), { questions: [{ type: 'A', name: ZONE }], additionals: [opt({ ednsVersion: 1 })] });
    expect((reply.flags ?? 0) & 0xf).toBe(0);
    expect((reply.additionals?.[0] as dnsPacket.OptAnswer).extendedRcode).toBe(1);
  });

  it('orders by weight: with pinned randomness the heavier instance comes first', () => {
    const r = new DnsResponder(zoneWith([inst('10.9.0.1', 1), inst('10.9.0.2', 100)]), { random: () => 0.5 });
    const { reply } = ask(r, { questions: [{ type: 'A', name: `orders.svc.${ZONE}` }] });
    expect(reply.answers?.map((a) => (a as dnsPacket.StringAnswer).data)).toEqual(['10.9.0.2', '10.9.0.1']);
  });

  it('skips SRV targets whose names would not fit the wire', () => {
    const longName = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(35)}.svc.${ZONE}`; // 248 chars; its targets 257
    const r = new DnsResponder(zoneWith([inst('10.9.0.1')], longName));
    const { reply } = ask(r, { questions: [{ type: 'SRV', name: longName }] });
    expect(reply.answers).toEqual([]);
    expect(reply.authorities?.[0]?.type).toBe('SOA');
  });

  it('tells the server what it answered: out of zone, stale, how many records; RA only when asked', () => {
    const service: DnsService = { name: `orders.svc.${ZONE}`, service: {} as never, cluster: 'c1', instances: [inst('10.9.0.1')], ttlSeconds: 2, ports: [], staleSince: 1 };
    const zone: ZoneLookup = { zone: ZONE, find: (n) => (n === service.name ? { kind: 'service', service } : undefined) };
    const query = (name: string) => dnsPacket.encode({ type: 'query', id: 1, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type: 'A', name }] });
    const plain = new DnsResponder(zone);
    const stale = askWire(plain, query(service.name), { address: '127.0.0.1', transport: 'udp' });
    expect([stale.stale, stale.answers, stale.outOfZone]).toEqual([true, 1, false]);
    expect(dnsPacket.decode(stale.message).flags! & dnsPacket.RECURSION_AVAILABLE).toBe(0);
    const outside = askWire(plain, query('example.com'), { address: '127.0.0.1', transport: 'udp' });
    expect([outside.rcode, outside.outOfZone, outside.stale]).toEqual([5, true, false]);
    const forwarding = askWire(new DnsResponder(zone, { recursionAvailable: true }), query(service.name), { address: '127.0.0.1', transport: 'udp' });
    expect(dnsPacket.decode(forwarding.message).flags! & dnsPacket.RECURSION_AVAILABLE).toBeTruthy();
  });

  it('maps names and weights as documented', () => {
    expect(instanceName('10.0.0.1', 's.z')).toBe('10-0-0-1.s.z');
    expect(instanceName('2001:db8::1', 's.z')).toBe('2001-db8-0-0-0-0-0-1.s.z');
    expect(isEncodableName(`${'a'.repeat(64)}.x`)).toBe(false);
    expect(isEncodableName('a..b')).toBe(false);
    expect([srvWeight(0.2), srvWeight(2.6), srvWeight(1e9)]).toEqual([1, 3, 65535]);
  });
});

describe('DnsResponder: names as sent', () => {
  const zone = zoneWith([inst('10.9.0.1')]);
  const r = new DnsResponder(zone);
  const flagsOf = (reply: Buffer) => reply.readUInt16BE(2);
  const rcodeOf = (reply: Buffer) => flagsOf(reply) & 0xf;

  it('reads a label holding dots as one label: never the service, REFUSED outside the zone, NXDOMAIN inside', () => {
    const service = askWire(r, wireQuery(['orders', 'svc', 'regsync', 'internal']));
    expect([service.rcode, service.answers]).toEqual([0, 1]);
    const cases: Array<[WireLabel[], number]> = [
      [['orders.svc.regsync.internal'], 5],
      [['orders', 'svc.regsync', 'internal'], 5],
      [['orders.svc', 'regsync', 'internal'], 3],
      [['orders', 'svc', 'regsync.internal'], 5],
    ];
    for (const [labels, rcode] of cases) {
      const query = wireQuery(labels);
      const out = askWire(r, query);
      expect([labels, out.rcode, out.answers, out.outOfZone], String(labels)).toEqual([labels, rcode, 0, rcode === 5]);
      expect(wireQuestion(out.message).equals(wireQuestion(query)), String(labels)).toBe(true);
    }
  });

  it('keeps octets that are not UTF-8 as they are, in every kind of answer', () => {
    const name: WireLabel[] = [[0xff, 0x41], 'svc', 'Regsync', 'internal'];
    const variants: Array<[string, Buffer, number]> = [
      ['NXDOMAIN', wireQuery(name), 3],
      ['NXDOMAIN with EDNS', wireQuery(name, { additionals: [wireOpt()] }), 3],
      ['two OPTs: FORMERR', wireQuery(name, { additionals: [wireOpt(), wireOpt()] }), 1],
      ['EDNS version 1: BADVERS', wireQuery(name, { additionals: [wireOpt(1232, 1)] }), 0],
      ['NOTIFY: NOTIMP', wireQuery(name, { flags: 4 << 11 }), 4],
      ['class CH: REFUSED', wireQuery(name, { qclass: 3 }), 5],
      ['outside the zone: REFUSED', wireQuery([[0xff, 0xfe, 0x2e], [0x80]]), 5],
      ['NODATA at the apex', wireQuery(['REGSYNC', 'Internal'], { qtype: 16 }), 0],
    ];
    for (const [what, query, rcode] of variants) {
      const out = askWire(r, query);
      expect([what, rcodeOf(out.message)]).toEqual([what, rcode]);
      expect(out.message.readUInt16BE(4), what).toBe(1);
      expect(wireQuestion(out.message).toString('hex'), what).toBe(wireQuestion(query).toString('hex'));
    }
  });

  it('matches ASCII letters case-insensitively and echoes them, in the question and the owner names, as sent', () => {
    const name: WireLabel[] = ['ORDERS', 'Svc', 'regsync', 'INTERNAL'];
    const out = askWire(r, wireQuery(name));
    expect([out.rcode, out.answers]).toEqual([0, 1]);
    expect(wireQuestion(out.message).subarray(0, -4).equals(wireName(name))).toBe(true);
    expect(firstOwner(out.message).equals(wireName(name))).toBe(true);
    expect(dnsPacket.decode(out.message).answers?.[0]).toMatchObject({ type: 'A', name: 'ORDERS.Svc.regsync.INTERNAL', data: '10.9.0.1' });
    // Octets above 0x7f are compared exactly: 0xcf is not 'O' (0x4f) with the high bit set, nor 'o'.
    expect(askWire(r, wireQuery([[0xcf, 0x52, 0x44, 0x45, 0x52, 0x53], 'svc', 'regsync', 'internal'])).rcode).toBe(3);
  });

  it('echoes the question as sent in a truncated answer', () => {
    const big = new DnsResponder(zoneWith(many));
    const query = wireQuery(['Orders', 'SVC', 'regsync', 'internal']);
    const out = askWire(big, query);
    expect(out.truncated).toBe(true);
    expect(out.message.length).toBeLessThanOrEqual(512);
    expect(wireQuestion(out.message).equals(wireQuestion(query))).toBe(true);
  });

  it('answers FORMERR without a question to a question that uses a compression pointer (nothing comes before it to point at)', () => {
    // c0 04: a pointer into the header, which dns-packet reads as the root name.
    const query = Buffer.concat([Buffer.from([0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]), Buffer.from([0xc0, 0x04, 0, 1, 0, 1])]);
    const out = askWire(r, query);
    expect([out.rcode, out.message.length, out.message.readUInt16BE(0), out.message.readUInt16BE(4)]).toEqual([1, 12, 0x1234, 0]);
  });

  it('echoes the question as sent in the FORMERR to a message with a readable question and an unreadable rest', () => {
    const query = wireQuery(['A', [0xff], 'regsync', 'internal'], { additionals: [Buffer.from([1, 2, 3])] });
    expect(() => dnsPacket.decode(query)).toThrow();
    const out = r.respondToUndecodable(query);
    expect(out && [out.readUInt16BE(0), out.readUInt16BE(2) & 0x800f, out.readUInt16BE(4)]).toEqual([0x5a5a, 0x8001, 1]);
    expect(out && wireQuestion(out).equals(wireQuestion(query))).toBe(true);
    expect(out?.length).toBe(12 + wireQuestion(query).length);
  });
});

/** A CMDB served from one fixed table: the real snapshot provider and parser behind a real cache. */
class TableCmdb extends SnapshotCmdbProvider {
  constructor(table: Record<string, Record<string, string>>) {
    super();
    this.install(parseCmdbFile(JSON.stringify({ labels: { site: null, region: null }, entities: { ip: table } }), 'cmdb.json'), false);
  }
}

describe('DnsResponder with same-site answers', () => {
  const cmdb = new CmdbCache({ provider: new TableCmdb({
    '10.1.0.1': { site: 'x11', region: 'east' },
    '10.1.0.2': { site: 'x12', region: 'east' },
    '10.2.0.1': { site: 'x21', region: 'west' },
    '33.33.33.33': { site: 'x11', region: 'east' },
    '33.33.34.1': { site: 'x21', region: 'west' },
    '2001:db8::1': { site: 'x11', region: 'east' },
  }), refreshMs: 3_600_000, eventPollMs: 3_600_000 });
  const catalogue = new DnsCatalogue({ zone: ZONE, aliases: { shop: { namespace: '', group: 'DEFAULT_GROUP', name: 'orders' } } });
  const selectors: SiteSelector[] = [];
  const provider = (ip: string, extra: Partial<Instance> = {}): Instance => ({ ip, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: { protocol: 'http' }, ...extra });

  beforeAll(async () => {
    await cmdb.start();
    catalogue.put('c1', { namespace: '', group: 'DEFAULT_GROUP', name: 'orders' }, [provider('10.1.0.1'), provider('10.1.0.2'), provider('10.2.0.1'), provider('2001:db8::1')]);
    catalogue.put('c1', { namespace: 'team', group: 'blue', name: 'pay' }, [provider('10.1.0.1', { healthy: false }), provider('10.2.0.1', { healthy: false }), provider('10.1.0.2')]);
  });
  afterAll(async () => {
    for (const s of selectors) s.close();
    await cmdb.stop();
  });

  const responder = (site: Omit<SiteSelectorOptions, 'cmdb'> | undefined, extra: ResponderOptions = {}): DnsResponder => {
    if (site === undefined) return new DnsResponder(catalogue, extra);
    const selector = new SiteSelector({ cmdb, ...site });
    selectors.push(selector);
    return new DnsResponder(catalogue, { ...extra, site: selector });
  };
  const ecsOpt = (ip: string, sourcePrefixLength: number, family = 1) => opt({ options: [{ code: 8, family, sourcePrefixLength, scopePrefixLength: 0, ip } as dnsPacket.PacketOpt] });
  const query = (r: DnsResponder, name: string, type: dnsPacket.RecordType, from: string, additionals: dnsPacket.Answer[] = []) => {
    const out = askWire(r, dnsPacket.encode({ type: 'query', id: 7, questions: [{ type, name }], additionals }), { address: from, transport: 'udp' });
    const reply = dnsPacket.decode(out.message);
    const ecs = (reply.additionals?.find((a) => a.type === 'OPT') as dnsPacket.OptAnswer | undefined)?.options.find((o) => o.code === 8) as { scopePrefixLength: number; sourcePrefixLength: number } | undefined;
    const data = (reply.answers ?? []).map((a) => (a.type === 'SRV' ? `${a.data.target}:${a.data.port}` : String((a as { data: unknown }).data))).sort();
    return { reply, data, rcode: out.rcode, ecs };
  };
  const ORDERS = `orders.default-group.public.svc.${ZONE}`;

  it('answers a trusted resolver\'s ECS client from its site, with SCOPE = the source prefix', () => {
    const r = responder({ trustedResolvers: ['10.0.0.53'] });
    const x11 = query(r, ORDERS, 'A', '10.0.0.53', [ecsOpt('33.33.33.0', 24)]);
    expect(x11.data).toEqual(['10.1.0.1']);
    expect(x11.ecs).toMatchObject({ sourcePrefixLength: 24, scopePrefixLength: 24 });
    const x21 = query(r, ORDERS, 'A', '10.0.0.53', [ecsOpt('33.33.34.1', 32)]);
    expect([x21.data, x21.ecs?.scopePrefixLength]).toEqual([['10.2.0.1'], 32]);
    // A /16 holding both sites and regions: nothing shared, all of them; still tied to the prefix.
    const wide = query(r, ORDERS, 'A', '10.0.0.53', [ecsOpt('33.33.0.0', 16)]);
    expect([wide.data, wide.ecs?.scopePrefixLength]).toEqual([['10.1.0.1', '10.1.0.2', '10.2.0.1'], 16]);
  });

  it('ignores ECS from an untrusted sender (SCOPE 0) and opts out on source prefix 0', () => {
    const r = responder({ trustedResolvers: ['10.0.0.53'] });
    // From 10.2.0.1 (site x21) claiming 33.33.33.0/24 (x11): its own site, SCOPE 0.
    const claimed = query(r, ORDERS, 'A', '10.2.0.1', [ecsOpt('33.33.33.0', 24)]);
    expect([claimed.data, claimed.ecs?.scopePrefixLength]).toEqual([['10.2.0.1'], 0]);
    const optedOut = query(r, ORDERS, 'A', '10.0.0.53', [ecsOpt('0.0.0.0', 0)]);
    expect([optedOut.data, optedOut.ecs?.scopePrefixLength]).toEqual([['10.1.0.1', '10.1.0.2', '10.2.0.1'], 0]);
  });

  it('gives SCOPE 0 to answers that do not depend on the client, and adds no ECS to a query without one', () => {
    const r = responder({ trustedResolvers: ['10.0.0.53'] });
    expect(query(r, `10-1-0-1.${ORDERS}`, 'A', '10.0.0.53', [ecsOpt('33.33.33.0', 24)]).ecs?.scopePrefixLength).toBe(0);
    expect(query(r, `nothing.svc.${ZONE}`, 'A', '10.0.0.53', [ecsOpt('33.33.33.0', 24)]).ecs?.scopePrefixLength).toBe(0);
    expect(query(r, `orders.svc.x21.site.${ZONE}`, 'A', '10.0.0.53', [ecsOpt('33.33.33.0', 24)]).ecs?.scopePrefixLength).toBe(0);
    const plain = query(r, ORDERS, 'A', '10.0.0.53', [opt()]);
    expect(plain.reply.additionals?.find((a) => a.type === 'OPT')).toMatchObject({ options: [] });
    expect(query(r, ORDERS, 'A', '10.0.0.53').reply.additionals).toEqual([]);
  });

  it('chooses per address family and for SRV, at the name and in the _port._proto form', () => {
    const r = responder({});
    // 10.2.0.1 is x21: no x21 instance is IPv6, so AAAA falls back to all (the one) instead of nothing.
    expect(query(r, ORDERS, 'AAAA', '10.2.0.1').data).toEqual(['2001:db8::1']);
    expect(query(r, ORDERS, 'A', '2001:db8::1').data).toEqual(['10.1.0.1']);
    expect(query(r, ORDERS, 'SRV', '10.2.0.1').data).toEqual([`10-2-0-1.${ORDERS}:8080`]);
    expect(query(r, `_http._tcp.orders.svc.${ZONE}`, 'SRV', '10.1.0.2').data).toEqual([`10-1-0-2.${ORDERS}:8080`]);
  });

  it('serves <name>.<site>.site.<zone> with that site pinned, for every form of the name', () => {
    const r = responder({});
    for (const name of [`orders.default-group.public.svc.x12.site.${ZONE}`, `orders.public.svc.x12.site.${ZONE}`, `Orders.SVC.X12.site.${ZONE}`, `shop.x12.site.${ZONE}`]) {
      expect(query(r, name, 'A', '10.2.0.1').data).toEqual(['10.1.0.2']);
    }
    const srv = query(r, `_http._tcp.orders.svc.x21.site.${ZONE}`, 'SRV', '10.1.0.1');
    expect(srv.data).toEqual([`10-2-0-1.${ORDERS}:8080`]);
    expect(srv.reply.answers?.[0]?.name).toBe(`_http._tcp.orders.svc.x21.site.${ZONE}`);
    // A site without instances: the asker's region (10.1.0.1 is east), then all.
    expect(query(r, `orders.svc.x99.site.${ZONE}`, 'A', '10.1.0.1').data).toEqual(['10.1.0.1', '10.1.0.2']);
    expect(query(r, `orders.svc.x99.site.${ZONE}`, 'A', '192.0.2.1').data).toEqual(['10.1.0.1', '10.1.0.2', '10.2.0.1']);
  });

  it('answers a pinned site whose label is not UTF-8 with the owner names as sent', () => {
    const r = responder({});
    const name: WireLabel[] = ['Orders', 'svc', [0xff, 0x41], 'site', 'regsync', 'internal'];
    const query = wireQuery(name);
    const out = askWire(r, query, { address: '10.1.0.1', transport: 'udp' });
    // No instance has that site: the asker's region (east) answers.
    expect([out.rcode, out.answers]).toEqual([0, 2]);
    expect(wireQuestion(out.message).equals(wireQuestion(query))).toBe(true);
    expect(firstOwner(out.message).equals(wireName(name))).toBe(true);
  });

  it('answers NODATA for site.<zone>, <x>.site.<zone> and empty non-terminals under a site, NXDOMAIN for the rest', () => {
    const r = responder({});
    for (const name of [`site.${ZONE}`, `x11.site.${ZONE}`, `svc.x11.site.${ZONE}`, `public.svc.x11.site.${ZONE}`]) {
      const nodata = query(r, name, 'A', '10.1.0.1');
      expect([name, nodata.rcode, nodata.data, nodata.reply.authorities?.[0]?.type]).toEqual([name, 0, [], 'SOA']);
    }
    for (const name of [`nothing.svc.x11.site.${ZONE}`, `10-1-0-1.${ORDERS.replace(`.${ZONE}`, '')}.x11.site.${ZONE}`]) {
      expect(query(r, name, 'A', '10.1.0.1').rcode).toBe(3);
    }
    // Without a site selector, site names do not exist.
    expect(query(responder(undefined), `orders.svc.x11.site.${ZONE}`, 'A', '10.1.0.1').rcode).toBe(3);
    expect(query(responder(undefined), `site.${ZONE}`, 'A', '10.1.0.1').rcode).toBe(3);
  });

  it('answers unhealthy instances too below the protect threshold, and only healthy ones otherwise', () => {
    const pay = `pay.blue.team.svc.${ZONE}`;
    expect(query(responder({ protectThreshold: 0.5 }), pay, 'A', '10.2.0.1').data).toEqual(['10.2.0.1']);
    expect(query(responder({ protectThreshold: 0.5 }), pay, 'A', '192.0.2.1').data).toEqual(['10.1.0.1', '10.1.0.2', '10.2.0.1']);
    expect(query(responder({}), pay, 'A', '10.2.0.1').data).toEqual(['10.1.0.2']);
    expect(query(responder(undefined), pay, 'A', '10.2.0.1').data).toEqual(['10.1.0.2']);
  });

  it('never throws on odd askers or options', () => {
    const r = responder({ trustedResolvers: ['10.0.0.53', '::1'] });
    for (const from of ['', 'garbage', '::1', 'fe80::1%eth0']) {
      for (const extra of [[], [ecsOpt('2001:db8::', 56, 2)], [ecsOpt('33.33.33.0', 24)]]) {
        expect(query(r, ORDERS, 'A', from, extra).rcode).toBe(0);
      }
    }
    const v6 = query(r, ORDERS, 'A', '::1', [ecsOpt('2001:db8::', 56, 2)]);
    // 2001:db8::/56 holds 2001:db8::1 only (x11).
    expect([v6.data, v6.ecs?.scopePrefixLength]).toEqual([['10.1.0.1'], 56]);
  });
});
