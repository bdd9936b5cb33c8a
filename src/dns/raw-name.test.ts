import * as dnsPacket from 'dns-packet';
import { describe, expect, it } from 'vitest';
import { wireName, wireQuery } from '../../test/support/dns-wire.js';
import { encodeName, lookupKey, rawName, readQuestion, sameName } from './raw-name.js';

const labels = (...parts: Array<string | number[]>): Buffer[] => parts.map((p) => Buffer.from(p));

describe('readQuestion', () => {
  it('reads a label holding dots as one label, and octets that are not UTF-8 as they are', () => {
    const dotted = readQuestion(wireQuery(['orders.svc.regsync.internal'], { qtype: 33 }));
    expect(dotted?.name.map((l) => l.toString('latin1'))).toEqual(['orders.svc.regsync.internal']);
    expect([dotted?.qtype, dotted?.qclass]).toEqual([33, 1]);
    const octets = readQuestion(wireQuery([[0xff, 0x41], 'svc']));
    expect(octets?.name.map((l) => l.toString('hex'))).toEqual(['ff41', '737663']);
    expect(octets?.wire.toString('hex')).toBe(`${wireName([[0xff, 0x41], 'svc']).toString('hex')}00010001`);
    // What dns-packet makes of the same octets: one name of four labels, and U+FFFD.
    expect(dnsPacket.decode(wireQuery(['orders.svc.regsync.internal'])).questions?.[0]?.name).toBe('orders.svc.regsync.internal');
    expect(dnsPacket.decode(wireQuery([[0xff, 0x41], 'svc'])).questions?.[0]?.name).toBe('\ufffdA.svc');
  });

  it('reads the root name and a name of exactly 255 octets', () => {
    expect(readQuestion(wireQuery([]))?.name).toEqual([]);
    // 3 labels of 63 and one of 61: 4 * 1 + 250 + the root = 255 octets.
    const longest = ['a'.repeat(63), 'b'.repeat(63), 'c'.repeat(63), 'd'.repeat(61)];
    expect(readQuestion(wireQuery(longest))?.name).toHaveLength(4);
  });

  it('refuses what is not one question of plain labels within RFC 1035 limits, and never throws', () => {
    const header = (qdcount: number) => Buffer.from([0, 1, 0, 0, 0, qdcount, 0, 0, 0, 0, 0, 0]);
    const bad: Array<[string, Buffer]> = [
      ['QDCOUNT 0', header(0)],
      ['QDCOUNT 2', Buffer.concat([header(2), wireName(['a']), Buffer.from([0, 1, 0, 1]), wireName(['b']), Buffer.from([0, 1, 0, 1])])],
      ['a compression pointer', Buffer.concat([header(1), Buffer.from([0xc0, 0x04, 0, 1, 0, 1])])],
      ['a pointer after a label', Buffer.concat([header(1), Buffer.from([1, 0x61, 0xc0, 0x0c, 0, 1, 0, 1])])],
      ['label type 01', Buffer.concat([header(1), Buffer.from([0x41, 0, 0, 1, 0, 1])])],
      ['256 octets', wireQuery(['a'.repeat(63), 'b'.repeat(63), 'c'.repeat(63), 'd'.repeat(62)])],
      ['no root label', Buffer.concat([header(1), Buffer.from([3, 0x61, 0x62])])],
      ['no QCLASS', Buffer.concat([header(1), wireName(['a']), Buffer.from([0, 1, 0])])],
      ['a header cut short', Buffer.from([0, 1, 0, 0, 0, 1])],
    ];
    for (const [what, message] of bad) expect([what, readQuestion(message)]).toEqual([what, undefined]);
  });
});

describe('sameName', () => {
  it('folds A-Z to a-z and nothing else', () => {
    expect(sameName(labels('ORDERS', 'Svc'), labels('orders', 'sVC'))).toBe(true);
    expect(sameName(labels([0xc1]), labels([0xe1]))).toBe(false); // Latin-1 Á and á are other octets
    expect(sameName(labels('@'), labels('`'))).toBe(false); // 0x40 and 0x60 differ by the case bit, but are not letters
    expect(sameName(labels('[', 'a'), labels('{', 'a'))).toBe(false);
  });

  it('tells a dotted label from two labels', () => {
    expect(sameName(labels('a.b'), labels('a', 'b'))).toBe(false);
    expect(sameName(labels('a', 'b'), labels('a', 'b', 'c'))).toBe(false);
  });
});

describe('lookupKey', () => {
  it('spells names as the index does: lowercase ASCII, and odd octets escaped so that they match nothing', () => {
    expect(lookupKey(labels('Orders', 'SVC', 'regsync', 'internal'))).toBe('orders.svc.regsync.internal');
    expect(lookupKey(labels('orders.svc', 'regsync', 'internal'))).toBe('orders\\046svc.regsync.internal');
    expect(lookupKey(labels([0xff, 0x41], ' ', '\\'))).toBe('\\255a.\\032.\\092');
    expect(lookupKey(labels('_http', '_tcp'))).toBe('_http._tcp');
    expect(lookupKey([])).toBe('');
  });
});

describe('rawName and encodeName', () => {
  it('write the zone\'s own names as plain labels, and raw names octet for octet', () => {
    expect(encodeName(rawName('ns.regsync.internal.'))).toEqual(wireName(['ns', 'regsync', 'internal']));
    expect(encodeName(rawName(''))).toEqual(Buffer.from([0]));
    expect(encodeName(labels('a.b', [0xff]))).toEqual(wireName(['a.b', [0xff]]));
  });
});
