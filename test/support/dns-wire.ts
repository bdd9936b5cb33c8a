/*
 * DNS queries built octet by octet, for tests that need names no codec will write: a label holding
 * a dot, octets that are not UTF-8, case as sent. dns-packet turns names into strings, so these
 * messages are put together here and read back with the helpers below.
 */

/** One label: text (its UTF-8 octets, so only ASCII is meant) or the octets themselves. */
export type WireLabel = string | readonly number[] | Buffer;

/** What a hand-built query holds besides its name; every field has a default. */
export interface WireQueryOptions {
  id?: number;
  /** Header flags (default 0x0100: RD). */
  flags?: number;
  /** QTYPE (default 1: A). */
  qtype?: number;
  /** QCLASS (default 1: IN). */
  qclass?: number;
  /** Records of the additional section, already encoded (see {@link wireOpt}). */
  additionals?: readonly Buffer[];
}

/** A name on the wire: each label length-prefixed, then the root label. */
export function wireName(labels: readonly WireLabel[]): Buffer {
  const parts: Buffer[] = [];
  for (const label of labels) {
    const octets = typeof label === 'string' ? Buffer.from(label, 'utf8') : Buffer.from(label);
    parts.push(Buffer.from([octets.length]), octets);
  }
  parts.push(Buffer.from([0]));
  return Buffer.concat(parts);
}

/** A query with one question, exactly as given. */
export function wireQuery(labels: readonly WireLabel[], options: WireQueryOptions = {}): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(options.id ?? 0x5a5a, 0);
  header.writeUInt16BE(options.flags ?? 0x0100, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(options.additionals?.length ?? 0, 10);
  const tail = Buffer.alloc(4);
  tail.writeUInt16BE(options.qtype ?? 1, 0);
  tail.writeUInt16BE(options.qclass ?? 1, 2);
  return Buffer.concat([header, wireName(labels), tail, ...(options.additionals ?? [])]);
}

/** An OPT record (RFC 6891): root owner, the UDP size, EDNS version, no options. */
export function wireOpt(udpSize = 1232, version = 0): Buffer {
  const opt = Buffer.alloc(11);
  opt.writeUInt16BE(41, 1);
  opt.writeUInt16BE(udpSize, 3);
  opt.writeUInt8(version, 6);
  return opt;
}

/** The octets of the question section of a message with one question (name, QTYPE, QCLASS). */
export function wireQuestion(message: Buffer): Buffer {
  let at = 12;
  while (at < message.length && message[at] !== 0) at += 1 + (message[at] ?? 0);
  return message.subarray(12, at + 1 + 4);
}
