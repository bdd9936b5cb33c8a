import { execFile } from 'node:child_process';
import { createSocket, type RemoteInfo, type Socket as UdpSocket } from 'node:dgram';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { promises as dnsPromises } from 'node:dns';
import { randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import * as dnsPacket from 'dns-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wireQuery, wireQuestion, type WireLabel } from '../../test/support/dns-wire.js';
import { closedUdpPort, udpUpstream } from '../../test/support/udp-upstream.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createLogger, silentLogger } from '../log.js';
import type { Instance } from '../model/types.js';
import { DnsCatalogue } from './catalogue.js';
import { startDnsServer, type DnsQueryRecord, type DnsServer, type DnsServerObserver } from './dns-server.js';
import { instanceName } from './names.js';
import type { DnsInstance, DnsService, ZoneLookup, ZoneNode } from './zone.js';

const run = promisify(execFile);
const ZONE = 'regsync.internal';

/** A Map-based stand-in for the catalogue, built from the zone.ts types. */
class MapZone implements ZoneLookup {
  readonly zone = ZONE;
  private readonly nodes = new Map<string, ZoneNode>([
    [ZONE, { kind: 'apex' }],
    [`svc.${ZONE}`, { kind: 'empty' }],
  ]);
  find(name: string): ZoneNode | undefined {
    return this.nodes.get(name);
  }
  addService(label: string, instances: DnsInstance[], ports: DnsService['ports'] = []): DnsService {
    const name = `${label}.svc.${ZONE}`;
    const service: DnsService = { name, service: { namespace: 'public', group: 'DEFAULT_GROUP', name: label } as never, cluster: 'c1', instances, ttlSeconds: 3, ports };
    this.nodes.set(name, { kind: 'service', service });
    for (const instance of instances) this.nodes.set(instanceName(instance.ip, name) ?? instance.ip, { kind: 'instance', service, instance });
    for (const port of ports) this.nodes.set(`_${port.name}._${port.proto}.${name}`, { kind: 'port', service, port });
    return service;
  }
}

function inst(ip: string, port = 8080, extra: Partial<DnsInstance> = {}): DnsInstance {
  return { ip, port, weight: 1, healthy: true, enabled: true, metadata: {}, ...extra };
}

let server: DnsServer;
const zone = new MapZone();
const unique = (): string => `s${randomUUID().slice(0, 8)}`;

async function dig(...args: string[]): Promise<string> {
  return digAt(server.port, ...args);
}

async function digAt(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('dig', [`@127.0.0.1`, '-p', String(port), '+norec', '+time=5', '+tries=1', ...args]);
  return stdout;
}

function resolver(): dnsPromises.Resolver {
  const r = new dnsPromises.Resolver({ timeout: 5000, tries: 1 });
  r.setServers([`127.0.0.1:${server.port}`]);
  return r;
}

/** Sends one datagram and waits for one reply, as octets. */
function udpAskRaw(message: Buffer, port = server.port): Promise<Buffer> {
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    socket.once('message', (reply) => {
      socket.close();
      resolve(reply);
    });
    socket.send(message, port, '127.0.0.1');
  });
}

/** Sends one datagram and waits for one reply, decoded. */
async function udpAsk(message: Buffer, port = server.port): Promise<dnsPacket.DecodedPacket> {
  return dnsPacket.decode(await udpAskRaw(message, port));
}

function udpFire(message: Buffer, port = server.port): Promise<void> {
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    socket.send(message, port, '127.0.0.1', () => {
      socket.close();
      resolve();
    });
  });
}

beforeAll(async () => {
  server = await startDnsServer({ zone, port: 0 });
});
afterAll(async () => {
  await server.close();
});

describe('DNS server with real clients', () => {
  it('answers A, AAAA and TTLs from healthy enabled instances only (Node resolver)', async () => {
    const label = unique();
    zone.addService(label, [inst('10.1.0.1'), inst('10.1.0.2'), inst('10.1.0.3', 1, { healthy: false }), inst('10.1.0.4', 1, { enabled: false }), inst('fd00::5')]);
    const name = `${label}.svc.${ZONE}`;
    const a = await resolver().resolve4(name, { ttl: true });
    expect(a.map((r) => r.address).sort()).toEqual(['10.1.0.1', '10.1.0.2']);
    expect(a.every((r) => r.ttl === 3)).toBe(true);
    expect(await resolver().resolve6(name)).toEqual(['fd00::5']);
  });

  it('answers SRV at the name and in the _port._proto form, with glue in additional (dig)', async () => {
    const label = unique();
    zone.addService(label, [inst('10.2.0.1', 20880, { weight: 2.6 }), inst('10.2.0.2', 20881, { weight: 0.2 }), inst('10.2.0.3', 20882, { weight: 0 })], [20880, 20881, 20882].map((port) => ({ name: 'dubbo', proto: 'tcp' as const, port })));
    const name = `${label}.svc.${ZONE}`;
    const out = await dig(name, 'SRV', '+noall', '+answer', '+additional');
    expect(out).toContain(`SRV\t0 3 20880 10-2-0-1.${name}.`);
    expect(out).toContain(`SRV\t0 1 20881 10-2-0-2.${name}.`);
    expect(out).not.toContain('10-2-0-3');
    expect(out).toMatch(new RegExp(`^10-2-0-1\\.${name.replace(/\./g, '\\.')}\\.\\s+3\\s+IN\\s+A\\s+10\\.2\\.0\\.1$`, 'm'));
    const srv = await resolver().resolveSrv(`_dubbo._tcp.${name}`);
    expect(srv.map((r) => r.port).sort()).toEqual([20880, 20881]);
    // The target resolves.
    expect(await resolver().resolve4(`10-2-0-1.${name}`)).toEqual(['10.2.0.1']);
  });

  it('answers TXT of an instance as key=value strings, split at 255 bytes', async () => {
    const label = unique();
    const long = 'x'.repeat(300);
    zone.addService(label, [inst('10.3.0.1', 80, { metadata: { site: 'x11', long } })]);
    const txt = await resolver().resolveTxt(`10-3-0-1.${label}.svc.${ZONE}`);
    expect(txt).toContainEqual(['site=x11']);
    const split = txt.find((t) => t[0]?.startsWith('long='));
    expect(split?.map((s) => Buffer.byteLength(s))).toEqual([255, 50]);
    expect(split?.join('')).toBe(`long=${long}`);
  });

  it('answers SOA and NS at the apex, and ns.<zone> has an address', async () => {
    const soa = await resolver().resolveSoa(ZONE);
    expect(soa).toMatchObject({ nsname: `ns.${ZONE}`, hostmaster: `hostmaster.${ZONE}`, minttl: 5 });
    expect(await resolver().resolveNs(ZONE)).toEqual([`ns.${ZONE}`]);
    expect(await resolver().resolve4(`ns.${ZONE}`)).toEqual(['127.0.0.1']);
  });

  it('tells NXDOMAIN from NODATA, both with the SOA in authority', async () => {
    const label = unique();
    zone.addService(label, [inst('10.4.0.1')]);
    await expect(resolver().resolve4(`nope-${label}.svc.${ZONE}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(resolver().resolve6(`${label}.svc.${ZONE}`)).rejects.toMatchObject({ code: 'ENODATA' });
    await expect(resolver().resolve4(`svc.${ZONE}`)).rejects.toMatchObject({ code: 'ENODATA' });
    const nx = await dig(`nope-${label}.svc.${ZONE}`, 'A', '+noall', '+comments', '+authority');
    expect(nx).toContain('status: NXDOMAIN');
    expect(nx).toMatch(/flags: qr aa;/);
    expect(nx).toMatch(new RegExp(`^${ZONE.replace('.', '\\.')}\\.\\s+5\\s+IN\\s+SOA\\s+ns\\.`, 'm'));
    const nodata = await dig(`${label}.svc.${ZONE}`, 'TXT', '+noall', '+comments', '+authority');
    expect(nodata).toContain('status: NOERROR');
    expect(nodata).toContain('ANSWER: 0');
    expect(nodata).toMatch(/IN\s+SOA\s+ns\./);
  });

  it('answers NODATA for a service whose instances are all unhealthy', async () => {
    const label = unique();
    zone.addService(label, [inst('10.5.0.1', 80, { healthy: false })]);
    await expect(resolver().resolve4(`${label}.svc.${ZONE}`)).rejects.toMatchObject({ code: 'ENODATA' });
  });

  it('sets TC over UDP for a big answer and dig retries over TCP on the same port to get all', async () => {
    const label = unique();
    const ips = Array.from({ length: 60 }, (_, i) => `10.6.${Math.floor(i / 200)}.${(i % 200) + 1}`);
    zone.addService(label, ips.map((ip) => inst(ip)));
    const name = `${label}.svc.${ZONE}`;
    const out = await dig(name, 'A', '+bufsize=512', '+noall', '+answer', '+comments');
    expect(out).toContain(';; Truncated, retrying in TCP mode.');
    expect(out.match(/\sIN\s+A\s+10\.6\./g)).toHaveLength(60);
    const raw = await dig(name, 'A', '+noedns', '+ignore', '+noall', '+comments', '+answer');
    expect(raw).toMatch(/flags: qr aa tc;/);
    expect(raw).toContain('ANSWER: 0');
    // EDNS answers keep the OPT when truncated.
    const truncated = await dig(name, 'A', '+bufsize=512', '+ignore', '+noall', '+comments');
    expect(truncated).toMatch(/flags: qr aa tc;/);
    expect(truncated).toContain('OPT PSEUDOSECTION');
    // Node's resolver (no EDNS) follows TC to TCP.
    expect((await resolver().resolve4(name)).sort()).toEqual([...ips].sort());
    expect(server.stats().truncated).toBeGreaterThan(0);
  });

  it('echoes the question exactly as sent (0x20) and matches case-insensitively', async () => {
    const label = unique();
    zone.addService(label, [inst('10.7.0.1')]);
    const mixed = `${label.toUpperCase()}.Svc.Regsync.Internal`;
    const out = await dig(mixed, 'A', '+noall', '+comments', '+question', '+answer');
    expect(out).toContain(`;${mixed}.\t`);
    expect(out).toMatch(/IN\s+A\s+10\.7\.0\.1/);
  });

  it('reads names as sent (dig): a label holding a dot is not the service, octets that are not UTF-8 come back as they went', async () => {
    const label = unique();
    zone.addService(label, [inst('10.7.1.1')]);
    const asked = (name: string, out: string): boolean => out.split('\n').some((line) => line.split(/\s+/).join(' ') === `;${name}. IN A`);
    for (const transport of ['+notcp', '+tcp']) {
      const cases: Array<[string, string]> = [
        [`${label}\\.svc.${ZONE}`, 'NXDOMAIN'],
        [`${label}\\.svc\\.regsync\\.internal`, 'REFUSED'],
        [`\\255${label.toUpperCase()}.svc.${ZONE}`, 'NXDOMAIN'],
      ];
      for (const [name, status] of cases) {
        const out = await dig(name, 'A', transport, '+noall', '+comments', '+question');
        expect([name, transport, out.includes(`status: ${status}`), asked(name, out)]).toEqual([name, transport, true, true]);
      }
    }
    expect(await dig(`${label}.svc.${ZONE}`, 'A', '+short')).toBe('10.7.1.1\n');
  });

  it('answers REFUSED outside the zone, BADVERS for EDNS version 1, NOTIMP for another opcode', async () => {
    const refused = await dig('example.com', 'A', '+noall', '+comments');
    expect(refused).toContain('status: REFUSED');
    expect(refused).toMatch(/flags: qr;/); // no RA without forwarding
    expect(await dig(`svc.${ZONE}`, 'A', '+edns=1', '+noednsneg', '+noall', '+comments')).toContain('status: BADVERS');
    const notify = await udpAsk(dnsPacket.encode({ type: 'query', id: 7, flags: 4 << 11, questions: [{ type: 'SOA', name: ZONE }] }));
    expect((notify.flags ?? -1) & 0xf).toBe(4);
    expect(notify.id).toBe(7);
  });

  it('answers FORMERR for two questions and echoes ECS with scope 0', async () => {
    const two = await udpAsk(dnsPacket.encode({ type: 'query', id: 9, questions: [{ type: 'A', name: ZONE }, { type: 'A', name: `svc.${ZONE}` }] }));
    expect((two.flags ?? -1) & 0xf).toBe(1);
    expect(two.id).toBe(9);
    const out = await dig(`svc.${ZONE}`, 'A', '+subnet=203.0.113.7/24', '+noall', '+comments');
    expect(out).toContain('status: NOERROR');
    expect(out).toContain('CLIENT-SUBNET: 203.0.113.0/24/0');
  });

  it('keeps answering after malformed packets', async () => {
    const label = unique();
    zone.addService(label, [inst('10.8.0.1')]);
    const hugeLabels = Buffer.alloc(12 + 2 * 200);
    hugeLabels.writeUInt16BE(0x1234, 0);
    hugeLabels.writeUInt16BE(1, 4);
    for (let i = 0; i < 200; i++) hugeLabels.writeUInt8(1, 12 + 2 * i); // 200 labels of 1 octet, over 255, no terminator
    const pointerLoop = Buffer.from([0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 12, 0, 1, 0, 1]);
    for (const bad of [randomBytes(40), randomBytes(5), Buffer.alloc(0), Buffer.from([0, 1, 0]), hugeLabels, pointerLoop]) await udpFire(bad);
    // A readable query header with an undecodable body gets FORMERR.
    const formerr = await udpAsk(hugeLabels);
    expect(formerr.id).toBe(0x1234);
    expect((formerr.flags ?? -1) & 0xf).toBe(1);
    expect(await resolver().resolve4(`${label}.svc.${ZONE}`)).toEqual(['10.8.0.1']);
    expect(server.stats().dropped.malformed).toBeGreaterThan(0);
  });
});

describe('DNS server rate limit', () => {
  it('drops queries over the per-address bucket and counts them', async () => {
    const limited = await startDnsServer({ zone, port: 0, rateLimit: { perSecond: 0.001, burst: 2 } });
    try {
      const query = dnsPacket.encode({ type: 'query', id: 3, questions: [{ type: 'SOA', name: ZONE }] });
      const socket = createSocket('udp4');
      const replies: Buffer[] = [];
      socket.on('message', (m) => replies.push(m));
      for (let i = 0; i < 3; i++) socket.send(query, limited.port, '127.0.0.1');
      await waitUntil(() => limited.stats().dropped.rateLimited === 1 && replies.length === 2);
      socket.close();
      expect(limited.stats().answersByRcode).toEqual({ NOERROR: 2 });
    } finally {
      await limited.close();
    }
  });
});

const provider = (ip: string): Instance => ({ ip, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: {} });

/** An observer that keeps what it is told. */
function recorder(): DnsServerObserver & { records: DnsQueryRecord[]; drops: string[] } {
  const records: DnsQueryRecord[] = [];
  const drops: string[] = [];
  return { records, drops, query: (r) => records.push(r), dropped: (reason) => drops.push(reason) };
}

function rcodeOf(message: dnsPacket.DecodedPacket): number {
  return (message.flags ?? -1) & 0xf;
}

function query(name: string, id: number, type: dnsPacket.RecordType = 'A'): Buffer {
  return dnsPacket.encode({ type: 'query', id, questions: [{ type, name }] });
}

/** Frames a message for DNS over TCP. */
function frame(message: Buffer): Buffer {
  const out = Buffer.alloc(2 + message.length);
  out.writeUInt16BE(message.length, 0);
  message.copy(out, 2);
  return out;
}

/** Collects the DNS messages arriving on a TCP connection. */
function tcpMessages(socket: Socket): dnsPacket.DecodedPacket[] {
  const messages: dnsPacket.DecodedPacket[] = [];
  let pending = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    pending = Buffer.concat([pending, chunk]);
    while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
      messages.push(dnsPacket.decode(pending.subarray(2, 2 + pending.readUInt16BE(0))));
      pending = pending.subarray(2 + pending.readUInt16BE(0));
    }
  });
  return messages;
}

describe('DNS server forwarding names outside the zone', () => {
  let upstream: DnsServer;
  let forwarding: DnsServer;
  const upstreamSeen = recorder();
  const seen = recorder();
  const bigIps = Array.from({ length: 60 }, (_, i) => `10.95.0.${i + 1}`);

  beforeAll(async () => {
    const catalogue = new DnsCatalogue({ zone: 'upstream.test', logger: silentLogger() });
    catalogue.put('c1', { namespace: 'public', group: 'DEFAULT_GROUP', name: 'web' }, [provider('10.90.0.1')]);
    catalogue.put('c1', { namespace: 'public', group: 'DEFAULT_GROUP', name: 'big' }, bigIps.map(provider));
    upstream = await startDnsServer({ zone: catalogue, observer: upstreamSeen });
    forwarding = await startDnsServer({ zone, forward: { upstreams: [`127.0.0.1:${upstream.port}`] }, observer: seen });
  });
  afterAll(async () => {
    await forwarding?.close();
    await upstream?.close();
  });

  it('answers from the upstream over UDP, with RA and the client ID (raw, Node resolver, dig)', async () => {
    const reply = await udpAsk(query('web.svc.upstream.test', 0x4242), forwarding.port);
    expect(reply.id).toBe(0x4242);
    expect((reply.flags ?? 0) & dnsPacket.RECURSION_AVAILABLE).toBeTruthy();
    expect(reply.answers?.map((a) => (a.type === 'A' ? a.data : ''))).toEqual(['10.90.0.1']);
    const r = new dnsPromises.Resolver({ timeout: 5000, tries: 1 });
    r.setServers([`127.0.0.1:${forwarding.port}`]);
    expect(await r.resolve4('web.svc.upstream.test')).toEqual(['10.90.0.1']);
    const out = await digAt(forwarding.port, 'Web.Svc.Upstream.Test', 'A', '+noall', '+comments', '+question', '+answer');
    expect(out).toContain('status: NOERROR');
    expect(out).toMatch(/flags: qr aa ra;/);
    expect(out).toContain(';Web.Svc.Upstream.Test.\t');
    expect(out).toMatch(/IN\s+A\s+10\.90\.0\.1/);
    expect(upstreamSeen.records.filter((x) => x.transport === 'udp').length).toBeGreaterThanOrEqual(3);
    expect(seen.records.at(-1)).toMatchObject({ transport: 'udp', qtype: 'A', rcode: 'NOERROR', answers: 1, stale: false, truncated: false, forwarded: 'answered' });
  });

  it('forwards over TCP what came over TCP', async () => {
    const before = upstreamSeen.records.filter((x) => x.transport === 'tcp').length;
    const out = await digAt(forwarding.port, 'web.svc.upstream.test', 'A', '+tcp', '+noall', '+comments', '+answer');
    expect(out).toContain('status: NOERROR');
    expect(out).toMatch(/flags: qr aa ra;/);
    expect(out).toMatch(/IN\s+A\s+10\.90\.0\.1/);
    expect(upstreamSeen.records.filter((x) => x.transport === 'tcp').length).toBe(before + 1);
    expect(seen.records.at(-1)).toMatchObject({ transport: 'tcp', forwarded: 'answered' });
  });

  it('relays a truncated UDP answer as it is, and the client gets all over TCP through us', async () => {
    const out = await digAt(forwarding.port, 'big.svc.upstream.test', 'A', '+bufsize=512', '+noall', '+answer', '+comments');
    expect(out).toContain(';; Truncated, retrying in TCP mode.');
    expect(out.match(/\sIN\s+A\s+10\.95\./g)).toHaveLength(60);
    expect(seen.records.slice(-2)).toMatchObject([
      { transport: 'udp', truncated: true, forwarded: 'answered' },
      { transport: 'tcp', truncated: false, answers: 60, forwarded: 'answered' },
    ]);
  });

  it('sets RA on its own answers for names in the zone, and relays NXDOMAIN from upstream', async () => {
    const own = await digAt(forwarding.port, ZONE, 'SOA', '+noall', '+comments');
    expect(own).toMatch(/flags: qr aa ra;/);
    const nx = await digAt(forwarding.port, 'nothing.svc.upstream.test', 'A', '+noall', '+comments');
    expect(nx).toContain('status: NXDOMAIN');
    expect(forwarding.stats().forwarded.answered).toBeGreaterThan(0);
    expect(forwarding.stats().answersByRcode.NXDOMAIN).toBeGreaterThan(0);
  });

  it('falls through a dead upstream (silent, or a closed port) to the next, over UDP and TCP', async () => {
    const silent = await udpUpstream();
    const fallthrough = await startDnsServer({ zone, forward: { upstreams: [`127.0.0.1:${silent.port}`, `127.0.0.1:${await closedUdpPort()}`, `127.0.0.1:${upstream.port}`], timeoutMs: 1000 } });
    try {
      expect(await digAt(fallthrough.port, 'web.svc.upstream.test', 'A', '+short')).toBe('10.90.0.1\n');
      expect(await digAt(fallthrough.port, 'web.svc.upstream.test', 'A', '+short', '+tcp')).toBe('10.90.0.1\n');
      expect(silent.received).toHaveLength(1);
    } finally {
      await fallthrough.close();
      await silent.close();
    }
  });

  it('answers SERVFAIL with the question when every upstream failed or timed out', async () => {
    const silent = await udpUpstream();
    const failed = recorder();
    const dead = await startDnsServer({ zone, forward: { upstreams: [`127.0.0.1:${silent.port}`, `127.0.0.1:${await closedUdpPort()}`], timeoutMs: 100 }, observer: failed });
    const timedOut = recorder();
    const silentOnly = await startDnsServer({ zone, forward: { upstreams: [`127.0.0.1:${silent.port}`], timeoutMs: 100 }, observer: timedOut });
    try {
      const out = await digAt(dead.port, 'web.svc.upstream.test', 'A', '+noall', '+comments', '+question');
      expect(out).toContain('status: SERVFAIL');
      expect(out).toMatch(/flags: qr ra;/);
      expect(out).toContain('QUERY: 1,');
      expect(out).toContain(';web.svc.upstream.test.\t');
      expect(out).toContain('OPT PSEUDOSECTION');
      expect(failed.records).toMatchObject([{ qtype: 'A', rcode: 'SERVFAIL', answers: 0, forwarded: 'failed' }]);
      expect(dead.stats().forwarded).toEqual({ answered: 0, failed: 1, timeout: 0, busy: 0 });
      const r = new dnsPromises.Resolver({ timeout: 5000, tries: 1 });
      r.setServers([`127.0.0.1:${silentOnly.port}`]);
      await expect(r.resolve4('web.svc.upstream.test')).rejects.toMatchObject({ code: 'ESERVFAIL' });
      expect(timedOut.records).toMatchObject([{ rcode: 'SERVFAIL', forwarded: 'timeout' }]);
    } finally {
      await dead.close();
      await silentOnly.close();
      await silent.close();
    }
  });

  it('forwards the question as sent and relays the answer with it, whatever case the upstream echoes', async () => {
    // Answers NXDOMAIN with the question's ASCII capitals lowercased (these queries have no other section).
    const lowering = await udpUpstream((m, from, socket) => {
      const reply = Buffer.from(m);
      reply.writeUInt16BE(0x8000 | dnsPacket.AUTHORITATIVE_ANSWER | 3, 2);
      for (let i = 12; i < reply.length - 4; i++) if ((reply[i] ?? 0) >= 0x41 && (reply[i] ?? 0) <= 0x5a) reply[i] = (reply[i] ?? 0) | 0x20;
      socket.send(reply, from.port, from.address);
    });
    const label = unique();
    zone.addService(label, [inst('10.7.2.1')]);
    const relay = await startDnsServer({ zone, forward: { upstreams: [`127.0.0.1:${lowering.port}`] } });
    try {
      // One label holding the service's whole name is outside the zone: it goes upstream.
      const names: WireLabel[][] = [[`${label}.svc.${ZONE}`], ['Web', [0xff, 0x41], 'Example']];
      for (const [i, name] of names.entries()) {
        const query = wireQuery(name, { id: 0x7000 + i });
        const reply = await udpAskRaw(query, relay.port);
        expect([reply.readUInt16BE(0), reply.readUInt16BE(2) & 0xf]).toEqual([0x7000 + i, 3]);
        expect(wireQuestion(reply).toString('hex')).toBe(wireQuestion(query).toString('hex'));
        expect(wireQuestion(lowering.received[i] ?? Buffer.alloc(0)).toString('hex')).toBe(wireQuestion(query).toString('hex'));
      }
      expect(lowering.received).toHaveLength(2);
    } finally {
      await relay.close();
      await lowering.close();
    }
  });

  it('answers SERVFAIL with the question as sent when forwarding fails', async () => {
    const dead = await startDnsServer({ zone, forward: { upstreams: [`127.0.0.1:${await closedUdpPort()}`], timeoutMs: 1000 } });
    try {
      const query = wireQuery(['Web', [0xff, 0x41], 'Example'], { id: 0x7100 });
      const reply = await udpAskRaw(query, dead.port);
      expect([reply.readUInt16BE(0), reply.readUInt16BE(2) & 0xf, reply.readUInt16BE(4)]).toEqual([0x7100, 2, 1]);
      expect(wireQuestion(reply).toString('hex')).toBe(wireQuestion(query).toString('hex'));
    } finally {
      await dead.close();
    }
  });

  it('ignores an upstream answer with a wrong ID and relays the right one', async () => {
    const fake = createSocket('udp4');
    fake.on('message', (m: Buffer, from: RemoteInfo) => {
      const q = dnsPacket.decode(m);
      const answer = (id: number, data: string): Buffer =>
        dnsPacket.encode({ type: 'response', id, questions: q.questions, answers: [{ type: 'A', name: q.questions?.[0]?.name ?? '', ttl: 5, data }] });
      fake.send(answer(((q.id ?? 0) + 1) & 0xffff, '6.6.6.6'), from.port, from.address);
      fake.send(answer(q.id ?? 0, '10.96.0.1'), from.port, from.address);
    });
    await new Promise<void>((resolve) => fake.bind(0, '127.0.0.1', resolve));
    const spoofed = await startDnsServer({ zone, forward: { upstreams: [`127.0.0.1:${(fake as UdpSocket).address().port}`] } });
    try {
      expect(await digAt(spoofed.port, 'x.example', 'A', '+short')).toBe('10.96.0.1\n');
    } finally {
      await spoofed.close();
      await new Promise<void>((r) => fake.close(() => r()));
    }
  });

  it('answers SERVFAIL at once past maxInFlight (busy), and close() ends what is in flight', async () => {
    const silent = await udpUpstream();
    const busy = recorder();
    const bounded = await startDnsServer({ zone, forward: { upstreams: [`127.0.0.1:${silent.port}`], timeoutMs: 60_000, maxInFlight: 1 }, observer: busy });
    try {
      await udpFire(query('a.example', 1), bounded.port);
      await waitUntil(() => silent.received.length === 1);
      const reply = await udpAsk(query('b.example', 2), bounded.port);
      expect(reply.id).toBe(2);
      expect((reply.flags ?? 0) & 0xf).toBe(2);
      expect(busy.records).toMatchObject([{ rcode: 'SERVFAIL', forwarded: 'busy' }]);
      // Names in the zone are still answered.
      expect(rcodeOf(await udpAsk(query(ZONE, 3, 'SOA'), bounded.port))).toBe(0);
    } finally {
      await bounded.close();
      await silent.close();
    }
    expect(busy.records.filter((r) => r.forwarded)).toHaveLength(1);
  });

  it('answers in-zone queries on a TCP connection while a forwarded one waits, framing intact, and survives the client leaving', async () => {
    const held: Array<{ socket: Socket; message: Buffer }> = [];
    const tcpUpstream: Server = createServer((socket) => {
      let pending = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        pending = Buffer.concat([pending, chunk]);
        if (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) held.push({ socket, message: pending.subarray(2, 2 + pending.readUInt16BE(0)) });
      });
      socket.on('error', () => socket.destroy());
    });
    await new Promise<void>((resolve) => tcpUpstream.listen(0, '127.0.0.1', resolve));
    const address = tcpUpstream.address();
    const upstreamPort = typeof address === 'object' && address ? address.port : 0;
    const release = (index: number): void => {
      const h = held[index];
      if (!h) throw new Error('nothing held');
      const q = dnsPacket.decode(h.message);
      h.socket.write(frame(dnsPacket.encode({ type: 'response', id: q.id ?? 0, questions: q.questions, answers: [{ type: 'A', name: q.questions?.[0]?.name ?? '', ttl: 5, data: '10.97.0.1' }] })));
    };
    const ooo = await startDnsServer({ zone, forward: { upstreams: [`127.0.0.1:${upstreamPort}`] } });
    const client = connect({ host: '127.0.0.1', port: ooo.port });
    try {
      const messages = tcpMessages(client);
      client.write(Buffer.concat([frame(query('late.example', 11)), frame(query(ZONE, 12, 'SOA'))]));
      await waitUntil(() => messages.length === 1 && held.length === 1);
      expect(messages[0]?.id).toBe(12);
      release(0);
      await waitUntil(() => messages.length === 2);
      expect(messages[1]?.id).toBe(11);
      expect((messages[1]?.flags ?? -1) & 0xf).toBe(0);
      expect(messages[1]?.answers?.map((a) => (a.type === 'A' ? a.data : ''))).toEqual(['10.97.0.1']);
      // A client gone before its forwarded answer: nothing is written to the dead socket, serving goes on.
      const leaving = connect({ host: '127.0.0.1', port: ooo.port });
      leaving.write(frame(query('gone.example', 13)));
      await waitUntil(() => held.length === 2);
      leaving.destroy();
      await waitUntil(() => leaving.closed);
      release(1);
      await waitUntil(() => ooo.stats().forwarded.answered === 2);
      expect(rcodeOf(await udpAsk(query(ZONE, 14, 'SOA'), ooo.port))).toBe(0);
    } finally {
      client.destroy();
      await ooo.close();
      await new Promise<void>((r) => {
        tcpUpstream.close(() => r());
        for (const h of held) h.socket.destroy();
      });
    }
  });
});

describe('DNS server observer', () => {
  it('sees every answer (qtype, rcode, answers, stale) and every drop, and the stats agree', async () => {
    const seen = recorder();
    const observed = await startDnsServer({ zone, observer: seen });
    try {
      const label = unique();
      const service = zone.addService(label, [inst('10.98.0.1')]);
      service.staleSince = Date.now();
      const r = new dnsPromises.Resolver({ timeout: 5000, tries: 1 });
      r.setServers([`127.0.0.1:${observed.port}`]);
      expect(await r.resolve4(`${label}.svc.${ZONE}`)).toEqual(['10.98.0.1']);
      await expect(r.resolve4(`nope-${label}.svc.${ZONE}`)).rejects.toMatchObject({ code: 'ENOTFOUND' });
      expect(await digAt(observed.port, 'example.com', 'A', '+noall', '+comments', '+tcp')).toContain('status: REFUSED');
      const header = Buffer.alloc(13);
      header.writeUInt16BE(0x77, 0);
      header.writeUInt16BE(1, 4); // one question, cut off
      expect((await udpAsk(header, observed.port)).id).toBe(0x77);
      await udpFire(randomBytes(5), observed.port);
      await udpFire(dnsPacket.encode({ type: 'response', id: 5, questions: [{ type: 'A', name: ZONE }] }), observed.port);
      await waitUntil(() => seen.drops.length === 2);
      expect(seen.records).toMatchObject([
        { transport: 'udp', qtype: 'A', rcode: 'NOERROR', answers: 1, stale: true, truncated: false },
        { transport: 'udp', qtype: 'A', rcode: 'NXDOMAIN', answers: 0, stale: false },
        { transport: 'tcp', qtype: 'A', rcode: 'REFUSED', answers: 0 },
        { transport: 'udp', qtype: 'NONE', rcode: 'FORMERR', answers: 0 },
      ]);
      expect(seen.records.every((x) => x.forwarded === undefined && x.seconds >= 0)).toBe(true);
      expect(seen.drops).toEqual(['malformed', 'notQuery']);
      const stats = observed.stats();
      expect(stats.staleAnswers).toBe(1);
      expect(stats.answersByRcode).toEqual({ NOERROR: 1, NXDOMAIN: 1, REFUSED: 1, FORMERR: 1 });
      expect(stats.dropped).toEqual({ malformed: 1, rateLimited: 0, notQuery: 1 });
      expect(stats.forwarded).toEqual({ answered: 0, failed: 0, timeout: 0, busy: 0 });
    } finally {
      await observed.close();
    }
  });

  it('is told about rate-limited drops', async () => {
    const seen = recorder();
    const limited = await startDnsServer({ zone, observer: seen, rateLimit: { perSecond: 0.001, burst: 1 } });
    try {
      await udpAsk(query(ZONE, 1, 'SOA'), limited.port);
      await udpFire(query(ZONE, 2, 'SOA'), limited.port);
      await waitUntil(() => seen.drops.length === 1);
      expect(seen.drops).toEqual(['rateLimited']);
      expect(seen.records).toHaveLength(1);
    } finally {
      await limited.close();
    }
  });

  it('keeps serving when the observer throws, and logs that once', async () => {
    const lines: string[] = [];
    const logger = createLogger('warn', { write: (line: string) => lines.push(line) });
    const throwing: DnsServerObserver = {
      query: () => {
        throw new Error('observer broke');
      },
      dropped: () => {
        throw new Error('observer broke');
      },
    };
    const fragile = await startDnsServer({ zone, observer: throwing, logger });
    try {
      for (let id = 1; id <= 3; id++) expect(rcodeOf(await udpAsk(query(ZONE, id, 'SOA'), fragile.port))).toBe(0);
      await udpFire(randomBytes(3), fragile.port);
      await waitUntil(() => fragile.stats().dropped.malformed === 1);
      expect(rcodeOf(await udpAsk(query(ZONE, 4, 'SOA'), fragile.port))).toBe(0);
      expect(lines.filter((l) => l.includes('observer threw'))).toHaveLength(1);
    } finally {
      await fragile.close();
    }
  });
});
