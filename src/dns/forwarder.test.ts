import { createSocket } from 'node:dgram';
import * as dnsPacket from 'dns-packet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wireQuery, wireQuestion } from '../../test/support/dns-wire.js';
import { closedUdpPort, udpUpstream } from '../../test/support/udp-upstream.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { silentLogger } from '../log.js';
import type { Instance } from '../model/types.js';
import { DnsCatalogue } from './catalogue.js';
import { DnsConfigError } from './dns-config-error.js';
import { startDnsServer, type DnsServer } from './dns-server.js';
import { answersQuery, DnsForwarder, parseUpstream } from './forwarder.js';
import { readQuestion } from './raw-name.js';

const provider = (ip: string): Instance => ({ ip, port: 8080, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: {} });
const NAME = 'web.svc.upstream.test';

function query(name: string, id = 0x1234, type: dnsPacket.RecordType = 'A'): Buffer {
  return dnsPacket.encode({ type: 'query', id, flags: dnsPacket.RECURSION_DESIRED, questions: [{ type, name }] });
}

function answerOf(message: Buffer, address: string, change: { id?: number; name?: string } = {}): Buffer {
  const q = dnsPacket.decode(message);
  const question = q.questions?.[0];
  const name = change.name ?? question?.name ?? '';
  return dnsPacket.encode({
    type: 'response',
    id: change.id ?? q.id ?? 0,
    flags: dnsPacket.AUTHORITATIVE_ANSWER,
    questions: [{ type: 'A', name }],
    answers: [{ type: 'A', name, ttl: 5, data: address }],
  });
}

function addressesOf(message: Buffer): string[] {
  return (dnsPacket.decode(message).answers ?? []).map((a) => (a.type === 'A' ? a.data : ''));
}

describe('parseUpstream', () => {
  it('reads an IPv4 address with or without a port, and IPv6 in brackets', () => {
    expect(parseUpstream('1.2.3.4')).toEqual({ host: '1.2.3.4', port: 53 });
    expect(parseUpstream('1.2.3.4:5353')).toEqual({ host: '1.2.3.4', port: 5353 });
    expect(parseUpstream('[::1]:5353')).toEqual({ host: '::1', port: 5353 });
    expect(parseUpstream('[fd00::1]')).toEqual({ host: 'fd00::1', port: 53 });
    expect(parseUpstream('fd00::1')).toEqual({ host: 'fd00::1', port: 53 });
  });

  it('rejects host names, bad ports and bracketed IPv4 with a DnsConfigError', () => {
    for (const bad of ['dns.example', 'dns.example:53', '1.2.3.4:0', '1.2.3.4:65536', '1.2.3.4:x', '[1.2.3.4]:53', '[::1]:', '', '1.2.3']) {
      expect(() => parseUpstream(bad), bad).toThrow(DnsConfigError);
    }
  });

  it('rejects an empty upstream list and a non-positive timeout', () => {
    expect(() => new DnsForwarder({ upstreams: [] })).toThrow(DnsConfigError);
    expect(() => new DnsForwarder({ upstreams: ['127.0.0.1'], timeoutMs: 0 })).toThrow(DnsConfigError);
    expect(() => new DnsForwarder({ upstreams: [{ host: 'localhost', port: 53 }] })).toThrow(DnsConfigError);
  });
});

describe('answersQuery', () => {
  const q = query('Web.Example.COM', 7);
  it('takes the same ID and question, case-insensitively', () => {
    expect(readQuestion(q)?.wire.length).toBe('Web.Example.COM'.length + 2 + 4);
    expect(answersQuery(q, answerOf(q, '10.0.0.1'))).toBe(true);
    expect(answersQuery(q, answerOf(q, '10.0.0.1', { name: 'web.example.com' }))).toBe(true);
  });
  it('refuses another ID, another name, a query and a short message', () => {
    expect(answersQuery(q, answerOf(q, '10.0.0.1', { id: 8 }))).toBe(false);
    expect(answersQuery(q, answerOf(q, '10.0.0.1', { name: 'web.example.org' }))).toBe(false);
    expect(answersQuery(q, q)).toBe(false);
    expect(answersQuery(q, q.subarray(0, 20))).toBe(false);
  });
  it('folds the case of letters in labels only: QTYPE, QCLASS and other octets must be the same', () => {
    const asAnswer = (m: Buffer): Buffer => {
      const out = Buffer.from(m);
      out.writeUInt16BE(out.readUInt16BE(2) | 0x8000, 2);
      return out;
    };
    // 0x41 (HTTPS, 65) and 0x61 (97) differ by the ASCII case bit.
    const https = wireQuery(['Web', 'Example'], { id: 3, qtype: 65 });
    expect(answersQuery(https, asAnswer(wireQuery(['wEB', 'example'], { id: 3, qtype: 65 })))).toBe(true);
    expect(answersQuery(https, asAnswer(wireQuery(['Web', 'Example'], { id: 3, qtype: 97 })))).toBe(false);
    expect(answersQuery(https, asAnswer(wireQuery(['Web', 'Example'], { id: 3, qtype: 65, qclass: 0x21 })))).toBe(false);
    // Octets above 0x7f are not letters: 0xc1 and 0xe1 differ.
    const high = wireQuery([[0xc1], 'example'], { id: 4 });
    expect(answersQuery(high, asAnswer(wireQuery([[0xc1], 'example'], { id: 4 })))).toBe(true);
    expect(answersQuery(high, asAnswer(wireQuery([[0xe1], 'example'], { id: 4 })))).toBe(false);
  });
});

describe('DnsForwarder', () => {
  let upstream: DnsServer;
  let refusing: DnsServer;

  beforeAll(async () => {
    const catalogue = new DnsCatalogue({ zone: 'upstream.test', logger: silentLogger() });
    catalogue.put('c1', { namespace: 'public', group: 'DEFAULT_GROUP', name: 'web' }, [provider('10.90.0.1')]);
    upstream = await startDnsServer({ zone: catalogue });
    refusing = await startDnsServer({ zone: new DnsCatalogue({ zone: 'other.test', logger: silentLogger() }) });
  });
  afterAll(async () => {
    await upstream?.close();
    await refusing?.close();
  });

  it('relays the upstream answer over UDP and TCP with the client ID restored and RA set', async () => {
    const forwarder = new DnsForwarder({ upstreams: [`127.0.0.1:${upstream.port}`] });
    for (const transport of ['udp', 'tcp'] as const) {
      const result = await forwarder.forward(query(NAME, 0xbeef), transport);
      expect(result.outcome).toBe('answered');
      if (result.outcome !== 'answered') continue;
      const reply = dnsPacket.decode(result.message);
      expect(reply.id).toBe(0xbeef);
      expect((reply.flags ?? 0) & dnsPacket.RECURSION_AVAILABLE).toBeTruthy();
      expect(addressesOf(result.message)).toEqual(['10.90.0.1']);
    }
    forwarder.close();
  });

  it('sends a fresh ID upstream', async () => {
    const fake = await udpUpstream((m, from, socket) => socket.send(answerOf(m, '10.91.0.1'), from.port, from.address));
    const forwarder = new DnsForwarder({ upstreams: [`127.0.0.1:${fake.port}`] });
    try {
      for (let i = 0; i < 2; i++) expect((await forwarder.forward(query('a.example', 0x1111), 'udp')).outcome).toBe('answered');
      // Two random 16-bit IDs both equal to the client's: a chance of 1 in 2^32.
      expect(fake.received.map((m) => m.readUInt16BE(0)).some((id) => id !== 0x1111)).toBe(true);
    } finally {
      forwarder.close();
      await fake.close();
    }
  });

  it('relays the answer with the question as the client sent it, when the upstream echoes another case', async () => {
    const lowering = await udpUpstream((m, from, socket) => socket.send(answerOf(m, '10.91.0.2', { name: 'web.example.com' }), from.port, from.address));
    const forwarder = new DnsForwarder({ upstreams: [`127.0.0.1:${lowering.port}`] });
    try {
      const sent = query('WEB.Example.Com', 0x3333);
      const result = await forwarder.forward(sent, 'udp');
      expect(result.outcome).toBe('answered');
      if (result.outcome === 'answered') {
        expect(wireQuestion(result.message).toString('hex')).toBe(wireQuestion(sent).toString('hex'));
        expect(addressesOf(result.message)).toEqual(['10.91.0.2']);
      }
    } finally {
      forwarder.close();
      await lowering.close();
    }
  });

  it('ignores answers with a wrong ID, a wrong question or from another port, and takes the right one', async () => {
    const intruder = createSocket('udp4');
    await new Promise<void>((resolve) => intruder.bind(0, '127.0.0.1', resolve));
    const fake = await udpUpstream((m, from, socket) => {
      const id = m.readUInt16BE(0);
      socket.send(answerOf(m, '6.6.6.1', { id: id ^ 1 }), from.port, from.address);
      socket.send(answerOf(m, '6.6.6.2', { name: 'other.example' }), from.port, from.address);
      // The right ID and question from another source port: the connected socket never sees it.
      intruder.send(answerOf(m, '6.6.6.3'), from.port, from.address, () => socket.send(answerOf(m, '10.92.0.1'), from.port, from.address));
    });
    const forwarder = new DnsForwarder({ upstreams: [`127.0.0.1:${fake.port}`] });
    try {
      const result = await forwarder.forward(query('b.example', 0x2222), 'udp');
      expect(result.outcome).toBe('answered');
      if (result.outcome === 'answered') {
        expect(addressesOf(result.message)).toEqual(['10.92.0.1']);
        expect(result.message.readUInt16BE(0)).toBe(0x2222);
      }
    } finally {
      forwarder.close();
      await fake.close();
      await new Promise<void>((r) => intruder.close(() => r()));
    }
  });

  it('falls through a silent upstream, a closed port and a REFUSED answer to the next', async () => {
    const silent = await udpUpstream(() => undefined);
    const forwarder = new DnsForwarder({ upstreams: [`127.0.0.1:${silent.port}`, `127.0.0.1:${await closedUdpPort()}`, `127.0.0.1:${refusing.port}`, `127.0.0.1:${upstream.port}`], timeoutMs: 1000 });
    try {
      const result = await forwarder.forward(query(NAME), 'udp');
      expect(result.outcome).toBe('answered');
      expect(silent.received).toHaveLength(1);
    } finally {
      forwarder.close();
      await silent.close();
    }
  });

  it('says timeout when every upstream timed out and failed when one failed otherwise', async () => {
    const silent = await udpUpstream(() => undefined);
    const timingOut = new DnsForwarder({ upstreams: [`127.0.0.1:${silent.port}`, `127.0.0.1:${silent.port}`], timeoutMs: 100 });
    const failing = new DnsForwarder({ upstreams: [`127.0.0.1:${silent.port}`, `127.0.0.1:${refusing.port}`], timeoutMs: 100 });
    try {
      expect(await timingOut.forward(query(NAME), 'udp')).toEqual({ outcome: 'timeout' });
      expect(await timingOut.forward(query(NAME), 'tcp')).toEqual({ outcome: 'failed' }); // nothing listens on that TCP port
      expect(await failing.forward(query(NAME), 'udp')).toEqual({ outcome: 'failed' });
    } finally {
      timingOut.close();
      failing.close();
      await silent.close();
    }
  });

  it('answers busy past maxInFlight, and close() ends the queries in flight', async () => {
    const silent = await udpUpstream(() => undefined);
    const forwarder = new DnsForwarder({ upstreams: [`127.0.0.1:${silent.port}`], timeoutMs: 60_000, maxInFlight: 2 });
    try {
      const first = forwarder.forward(query(NAME, 1), 'udp');
      const second = forwarder.forward(query(NAME, 2), 'udp');
      expect(await forwarder.forward(query(NAME, 3), 'udp')).toEqual({ outcome: 'busy' });
      await waitUntil(() => silent.received.length === 2);
      forwarder.close();
      expect(await Promise.all([first, second])).toEqual([{ outcome: 'failed' }, { outcome: 'failed' }]);
      expect(forwarder.pending).toBe(0);
    } finally {
      await silent.close();
    }
  });
});
