import { execFile } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { promises as dnsPromises } from 'node:dns';
import { randomBytes, randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import * as dnsPacket from 'dns-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntil } from '../../test/support/wait-until.js';
import { startDnsServer, type DnsServer } from './dns-server.js';
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
  const { stdout } = await run('dig', [`@127.0.0.1`, '-p', String(server.port), '+norec', '+time=5', '+tries=1', ...args]);
  return stdout;
}

function resolver(): dnsPromises.Resolver {
  const r = new dnsPromises.Resolver({ timeout: 5000, tries: 1 });
  r.setServers([`127.0.0.1:${server.port}`]);
  return r;
}

/** Sends one datagram and waits for one reply. */
function udpAsk(message: Buffer): Promise<dnsPacket.DecodedPacket> {
  return new Promise((resolve, reject) => {
    const socket = createSocket('udp4');
    socket.once('message', (reply) => {
      socket.close();
      try {
        resolve(dnsPacket.decode(reply));
      } catch (err) {
        reject(err as Error);
      }
    });
    socket.send(message, server.port, '127.0.0.1');
  });
}

function udpFire(message: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    socket.send(message, server.port, '127.0.0.1', () => {
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

  it('answers REFUSED outside the zone, BADVERS for EDNS version 1, NOTIMP for another opcode', async () => {
    expect(await dig('example.com', 'A', '+noall', '+comments')).toContain('status: REFUSED');
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
