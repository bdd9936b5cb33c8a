import * as dnsPacket from 'dns-packet';
import { describe, expect, it } from 'vitest';
import { instanceName } from './names.js';
import { DnsResponder, isEncodableName, srvWeight } from './responder.js';
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
  const out = responder.respond(dnsPacket.decode(dnsPacket.encode({ type: 'query', id: 1, ...packet })), { address: '127.0.0.1', transport });
  return { reply: dnsPacket.decode(out.message), size: out.message.length, truncated: out.truncated };
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
    const query = (name: string) => dnsPacket.decode(dnsPacket.encode({ type: 'query', id: 1, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type: 'A', name }] }));
    const plain = new DnsResponder(zone);
    const stale = plain.respond(query(service.name), { address: '127.0.0.1', transport: 'udp' });
    expect([stale.stale, stale.answers, stale.outOfZone]).toEqual([true, 1, false]);
    expect(dnsPacket.decode(stale.message).flags! & dnsPacket.RECURSION_AVAILABLE).toBe(0);
    const outside = plain.respond(query('example.com'), { address: '127.0.0.1', transport: 'udp' });
    expect([outside.rcode, outside.outOfZone, outside.stale]).toEqual([5, true, false]);
    const forwarding = new DnsResponder(zone, { recursionAvailable: true }).respond(query(service.name), { address: '127.0.0.1', transport: 'udp' });
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
