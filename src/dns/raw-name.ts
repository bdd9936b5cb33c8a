/*
 * DNS names as they travel: labels of octets. dns-packet decodes a name into one string (the labels
 * decoded as UTF-8 and joined with '.'), which loses a dot inside a label (`orders.svc` sent as ONE
 * label reads like two) and every octet that is not UTF-8 (`ff` becomes U+FFFD, `ef bf bd` when
 * encoded again). So the responder and the forwarder read the question's name from the message
 * with the functions here, compare it by RFC 4343's rule and echo it octet for octet.
 * Behaviour is described in src/dns/README.md ("Names as sent").
 */

/**
 * A DNS name as octets: its labels from the leftmost, without the empty root label (`[]` is the
 * root). Labels may hold any octet, `.` included.
 */
export type RawName = readonly Buffer[];

/** The one question of a query, as sent. */
export interface RawQuestion {
  name: RawName;
  qtype: number;
  qclass: number;
  /** The question's octets exactly as sent (name, QTYPE, QCLASS): what every answer echoes. */
  wire: Buffer;
}

/** Octets of the DNS header; the question starts right after it. */
export const DNS_HEADER_LENGTH = 12;
/** Longest label, octets (RFC 1035 §2.3.4); the length octets 64-255 are pointers and obsolete types. */
const MAX_LABEL_OCTETS = 63;
/** Longest name on the wire, octets, length octets and the root label included (RFC 1035 §2.3.4). */
const MAX_NAME_OCTETS = 255;

/**
 * The question of a message that has exactly one (QDCOUNT 1), read from its octets. Undefined when
 * QDCOUNT is not 1, when the name is not plain labels (a compression pointer: before the first
 * question there is no name it could point to, RFC 1035 §4.1.4; the label types 01 and 10, RFC 6891
 * §5), when the name is longer than 255 octets, or when the message ends before QCLASS.
 * Looks at no more than the first 271 octets (header, name, QTYPE, QCLASS); never throws. The
 * labels and `wire` are views of `message`, not copies.
 */
export function readQuestion(message: Buffer): RawQuestion | undefined {
  if (message.length < DNS_HEADER_LENGTH || message.readUInt16BE(4) !== 1) return undefined;
  const labels: Buffer[] = [];
  let at = DNS_HEADER_LENGTH;
  for (;;) {
    const length = message[at];
    if (length === undefined || length > MAX_LABEL_OCTETS) return undefined;
    if (length === 0) break;
    // This label, its length octet, and the root label that must still follow.
    if (at - DNS_HEADER_LENGTH + 1 + length + 1 > MAX_NAME_OCTETS || at + 1 + length > message.length) return undefined;
    labels.push(message.subarray(at + 1, at + 1 + length));
    at += 1 + length;
  }
  const end = at + 1 + 4;
  if (end > message.length) return undefined;
  return { name: labels, qtype: message.readUInt16BE(at + 1), qclass: message.readUInt16BE(at + 3), wire: message.subarray(DNS_HEADER_LENGTH, end) };
}

/**
 * RFC 4343: the same name when both have the same labels, octet for octet, where the ASCII letters
 * A-Z and a-z count as one. No other octet folds (no Latin-1 or UTF-8 case), and a label holding a
 * dot is never two labels.
 */
export function sameName(a: RawName, b: RawName): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as Buffer;
    const y = b[i] as Buffer;
    if (x.length !== y.length) return false;
    for (let j = 0; j < x.length; j++) {
      if (fold(x[j] as number) !== fold(y[j] as number)) return false;
    }
  }
  return true;
}

/**
 * The name as the zone's index spells it (the `ZoneLookup.find` key): labels joined with `.`, A-Z
 * as a-z, and every octet that is `.`, `\` or not printable ASCII (0x21-0x7e) as `\DDD` (the RFC 1035
 * §5.1 escape, three decimal digits). Distinct names (after folding) give distinct keys, a dotted
 * label `orders.svc` gives `orders\046svc`, and since the index only holds names of letters,
 * digits, `-` and `_`, a name with any escaped octet exists nowhere in it.
 */
export function lookupKey(name: RawName): string {
  let out = '';
  for (let i = 0; i < name.length; i++) {
    if (i > 0) out += '.';
    for (const octet of name[i] as Buffer) {
      if (octet > 0x20 && octet < 0x7f && octet !== 0x2e && octet !== 0x5c) out += String.fromCharCode(fold(octet));
      else out += `\\${String(octet).padStart(3, '0')}`;
    }
  }
  return out;
}

/**
 * One of the zone's own names (`ns.regsync.internal`, plain labels of ASCII; a trailing dot is
 * ignored) as octets. Never for a name a client sent: that one is read with {@link readQuestion}.
 */
export function rawName(text: string): RawName {
  const trimmed = text.endsWith('.') ? text.slice(0, -1) : text;
  return trimmed === '' ? [] : trimmed.split('.').map((label) => Buffer.from(label, 'utf8'));
}

/** The name on the wire, uncompressed: each label after its length octet, then the root label. */
export function encodeName(name: RawName): Buffer {
  let length = 1;
  for (const label of name) length += 1 + label.length;
  const out = Buffer.alloc(length);
  let at = 0;
  for (const label of name) {
    out[at] = label.length;
    label.copy(out, at + 1);
    at += 1 + label.length;
  }
  return out;
}

function fold(octet: number): number {
  return octet >= 0x41 && octet <= 0x5a ? octet | 0x20 : octet;
}
