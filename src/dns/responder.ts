import { isIPv4, isIPv6 } from 'node:net';
import * as dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket } from 'dns-packet';
import type { DnsInstance, DnsService, ZoneLookup, ZoneNode } from './zone.js';
import { instanceName } from './names.js';
import { DNS_HEADER_LENGTH, encodeName, lookupKey, rawName, readQuestion, type RawName, type RawQuestion } from './raw-name.js';
import type { ClientSubnet, SiteClient, SiteSelector } from './site.js';

/*
 * The DNS wire side of regsync's DNS server: a query in, an encoded answer out, from a ZoneLookup.
 * No sockets here (src/dns/dns-server.ts owns them), so every RFC rule is unit-testable. The
 * question's name is read from the octets (src/dns/raw-name.ts), never from dns-packet's string, and
 * written back as sent; dns-packet encodes everything after each owner name.
 * Behaviour is described in src/dns/README.md.
 */

/** RCODEs the responder sets (RFC 1035 §4.1.1, RFC 6891 §9 for BADVERS). */
export const RCODE = {
  NOERROR: 0,
  FORMERR: 1,
  SERVFAIL: 2,
  NXDOMAIN: 3,
  NOTIMP: 4,
  REFUSED: 5,
  BADVERS: 16,
} as const;

/** Names of the RCODEs above, for stats and logs. */
export const RCODE_NAMES: Readonly<Record<number, string>> = Object.fromEntries(Object.entries(RCODE).map(([k, v]) => [v, k]));

/** The UDP payload size without EDNS (RFC 1035 §4.2.1). */
export const CLASSIC_UDP_SIZE = 512;
/** The default ceiling on an EDNS UDP answer: DNS Flag Day 2020's size against fragmentation. */
export const DEFAULT_UDP_SIZE_LIMIT = 1232;
/** The largest DNS message over TCP (2-byte length prefix). */
export const TCP_SIZE_LIMIT = 65535;
/** Default negative-caching TTL (SOA MINIMUM and SOA TTL): low, so an emptied service comes back quickly. */
export const DEFAULT_NEGATIVE_TTL_SECONDS = 5;

const OPCODE_QUERY = 0;
const CLASS_IN = 1;
const ECS_OPTION = 8;
const MAX_TTL = 2 ** 31 - 1;

/** How the responder is tuned; every field has a default. */
export interface ResponderOptions {
  /** Ceiling on EDNS UDP answers, bytes (default 1232; at least 512). */
  udpSizeLimit?: number;
  /** SOA TTL and MINIMUM, hence the negative TTL (default 5 s). */
  negativeTtlSeconds?: number;
  /** What `ns.<zone>` answers for A (default 127.0.0.1: the server's own loopback address). */
  nsAddress?: string;
  /** SOA serial (default 1: the zone is synthesised, secondaries never transfer it). */
  serial?: number;
  /** Source of randomness for the weighted shuffle (default Math.random); tests may pin it. */
  random?: () => number;
  /** Sets RA on every answer: true only where names outside the zone are forwarded (default false). */
  recursionAvailable?: boolean;
  /**
   * Same-site answers (src/dns/site.ts): A/AAAA/SRV of services prefer the asker's site, then its
   * region; `<name>.<site>.site.<zone>` pins a site. Without it every asker gets every live
   * instance and site names do not exist.
   */
  site?: SiteSelector | undefined;
}

/** Who asks and how: the transport decides the size limit. */
export interface Asker {
  address: string;
  transport: 'udp' | 'tcp';
}

/** An encoded answer and what it was, for stats and logs. */
export interface DnsReply {
  message: Buffer;
  /** Full RCODE (up to 4095, BADVERS = 16). */
  rcode: number;
  /** QTYPE of the question ('NONE' when there was none to read). */
  qtype: string;
  truncated: boolean;
  /** REFUSED because the name is outside the zone: a server with an upstream forwards the query instead. */
  outOfZone: boolean;
  /** Answered from a service served stale (its registry cannot be read now). */
  stale: boolean;
  /** Records in the answer section. */
  answers: number;
}

/** A record without its owner name: what dns-packet encodes after the name. */
type WithoutName<T> = T extends unknown ? Omit<T, 'name'> : never;
type Rdata = WithoutName<Answer>;

/** A record to send: the owner as octets (the question's name as sent, or one of the zone's), and the rest. */
interface WireRecord {
  owner: RawName;
  record: Rdata;
}

interface Draft {
  rcode: number;
  aa: boolean;
  outOfZone?: boolean;
  stale?: boolean;
  /** The question as sent, echoed as it is; undefined when the query has no single readable one. */
  question: RawQuestion | undefined;
  /** RRsets, each kept or dropped whole on truncation. */
  answers: WireRecord[][];
  authorities: WireRecord[][];
  additionals: WireRecord[][];
  /** ECS SCOPE PREFIX of the answer: > 0 when it was tailored to a trusted ECS. */
  scope?: number;
}

/** Same-site choice for one query: the selector, and who asks (worked out only when an answer needs it). */
interface SiteContext {
  site: SiteSelector;
  client: () => SiteClient;
}

/** A `<prefix>.<site>.site.<zone>` name: the name it stands for and the pinned site label. */
interface PinnedName {
  name: string;
  site: string;
}

/** The label that marks a pinned site: `<site>.site.<zone>`. */
const SITE_LABEL = 'site';

/**
 * Answers DNS queries for one zone. Holds no per-query state; `respond` is safe to call for any
 * input that dns-packet could decode, and never throws for anything a client can send.
 *
 * Names are compared and echoed as octets (RFC 4343): A-Z and a-z are one, every other octet only
 * itself, a label holding a dot stays one label; the question goes back exactly as it came.
 */
export class DnsResponder {
  private readonly udpSizeLimit: number;
  private readonly negativeTtl: number;
  private readonly nsAddress: string;
  private readonly serial: number;
  private readonly random: () => number;
  private readonly ra: number;
  private readonly site: SiteSelector | undefined;

  constructor(
    private readonly zone: ZoneLookup,
    options: ResponderOptions = {},
  ) {
    this.udpSizeLimit = Math.min(TCP_SIZE_LIMIT, Math.max(CLASSIC_UDP_SIZE, Math.floor(options.udpSizeLimit ?? DEFAULT_UDP_SIZE_LIMIT)));
    this.negativeTtl = clampTtl(options.negativeTtlSeconds ?? DEFAULT_NEGATIVE_TTL_SECONDS);
    this.nsAddress = options.nsAddress !== undefined && isIPv4(options.nsAddress) ? options.nsAddress : '127.0.0.1';
    this.serial = options.serial ?? 1;
    this.random = options.random ?? Math.random;
    this.ra = options.recursionAvailable ? dnsPacket.RECURSION_AVAILABLE : 0;
    this.site = options.site;
  }

  private get zoneName(): string {
    return normaliseName(this.zone.zone);
  }

  /**
   * The answer to a query (a message with QR=0): `message` as received and `query` its decoding by
   * dns-packet, which gives the header, QTYPE and EDNS; the name is read from `message`.
   */
  respond(message: Buffer, query: DecodedPacket, asker: Asker): DnsReply {
    const questions = query.questions ?? [];
    const qtype = questions.length === 1 && questions[0] ? questions[0].type : 'NONE';
    const opts = (query.additionals ?? []).filter((a) => a.type === 'OPT') as dnsPacket.OptAnswer[];
    const header = { id: query.id ?? 0, flags: query.flags ?? 0 };
    const limit = asker.transport === 'tcp' ? TCP_SIZE_LIMIT : this.udpLimitFor(opts.length === 1 ? opts[0]?.udpPayloadSize : undefined);
    // Echoed in every answer that has a question (RFC 1035 §4.1; RFC 4343 §4.1: case as sent).
    const question = readQuestion(message);
    const draft: Draft = { rcode: RCODE.NOERROR, aa: false, question, answers: [], authorities: [], additionals: [] };

    // RFC 6891 §6.1.1: more than one OPT is a format error; the reply then carries no OPT.
    if (opts.length > 1) return this.finish(header, { ...draft, rcode: RCODE.FORMERR }, undefined, limit, qtype);
    const opt = opts[0];
    const optOut = opt ? ({ type: 'OPT', name: '.', udpPayloadSize: this.udpSizeLimit, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [] } as dnsPacket.OptAnswer) : undefined;
    if (opt && opt.ednsVersion > 0) return this.finish(header, { ...draft, rcode: RCODE.BADVERS }, optOut, limit, qtype);
    if (opcodeOf(header.flags) !== OPCODE_QUERY) return this.finish(header, { ...draft, rcode: RCODE.NOTIMP }, optOut, limit, qtype);
    // QDCOUNT other than 1, or a name that is not plain labels (a compression pointer in the first
    // question points at nothing): no question to answer or to echo.
    if (!question) return this.finish(header, { ...draft, rcode: RCODE.FORMERR }, optOut, limit, qtype);
    let ecs: { echo: dnsPacket.PacketOpt & { data: Buffer }; subnet: ClientSubnet } | undefined;
    if (opt && optOut) {
      const parsed = readClientSubnet(opt);
      if (parsed === 'malformed') return this.finish(header, { ...draft, rcode: RCODE.FORMERR }, optOut, limit, qtype);
      ecs = parsed;
      if (ecs) optOut.options.push(ecs.echo);
    }
    if (question.qclass !== CLASS_IN) return this.finish(header, { ...draft, rcode: RCODE.REFUSED }, optOut, limit, qtype);
    // The index's spelling: lowercase, and a dot or other odd octet inside a label escaped, so that
    // such a label never matches a name of the zone, nor the zone itself.
    const name = lookupKey(question.name);
    if (!this.inZone(name)) return this.finish(header, { ...draft, rcode: RCODE.REFUSED, outOfZone: true }, optOut, limit, qtype);
    draft.aa = true;
    let context: SiteContext | undefined;
    if (this.site) {
      const site = this.site;
      let client: SiteClient | undefined;
      context = { site, client: () => (client ??= site.client(asker.address, ecs?.subnet)) };
    }
    this.answerInZone(name, question.name, qtype, draft, context);
    // RFC 7871 §7.2.1: SCOPE says how much of the client's address the answer depends on.
    if (ecs && draft.scope !== undefined && draft.scope > 0) ecs.echo.data.writeUInt8(Math.min(draft.scope, ecs.subnet.sourcePrefix), 3);
    return this.finish(header, draft, optOut, limit, qtype);
  }

  /**
   * The reply to a message dns-packet could not decode: FORMERR with the header (ID, opcode and RD
   * copied) and the question as sent when it can be read (QDCOUNT 1, plain labels), when the header
   * is readable and the message is a query; undefined (drop) otherwise, so garbage and stray
   * responses are never answered.
   */
  respondToUndecodable(message: Buffer): Buffer | undefined {
    if (message.length < DNS_HEADER_LENGTH || message.readUInt16BE(2) & 0x8000) return undefined;
    return this.headerReply(message, RCODE.FORMERR);
  }

  /**
   * SERVFAIL for a query whose answer could not be built: the header (ID, opcode and RD copied) and
   * the question as sent when it can be read; undefined for a message shorter than a header.
   */
  respondToFailure(message: Buffer): Buffer | undefined {
    if (message.length < DNS_HEADER_LENGTH) return undefined;
    return this.headerReply(message, RCODE.SERVFAIL);
  }

  private headerReply(message: Buffer, rcode: number): Buffer {
    const question = readQuestion(message);
    const out = Buffer.alloc(DNS_HEADER_LENGTH + (question?.wire.length ?? 0));
    out.writeUInt16BE(message.readUInt16BE(0), 0);
    out.writeUInt16BE(0x8000 | (message.readUInt16BE(2) & 0x7900) | this.ra | rcode, 2);
    if (question) {
      out.writeUInt16BE(1, 4);
      question.wire.copy(out, DNS_HEADER_LENGTH);
    }
    return out;
  }

  private inZone(name: string): boolean {
    const zone = this.zoneName;
    return name === zone || name.endsWith(`.${zone}`);
  }

  /** `name` is the lookup key of the question's name; `owner` that name as sent, the owner of the answers. */
  private answerInZone(name: string, owner: RawName, qtype: string, draft: Draft, context: SiteContext | undefined): void {
    const nsName = `ns.${this.zoneName}`;
    if (name === nsName) {
      if (qtype === 'A' || qtype === 'ANY') draft.answers.push([{ owner, record: { type: 'A', ttl: this.negativeTtl, data: this.nsAddress } }]);
      return this.negativeIfEmpty(draft, true);
    }
    let node = this.zone.find(name);
    let pinned: string | undefined;
    if (!node && context) {
      const site = this.pinnedName(name);
      if (site === 'empty') return this.negativeIfEmpty(draft, true);
      if (site) {
        const base = this.zone.find(site.name);
        // Only names that answer with a choice of instances have site forms.
        if (base?.kind === 'service' || base?.kind === 'port') [node, pinned] = [base, site.site];
        else if (base?.kind === 'empty') return this.negativeIfEmpty(draft, true);
      }
    }
    if (!node) return this.negativeIfEmpty(draft, false);
    if (node.kind !== 'apex' && node.kind !== 'empty' && node.service.staleSince !== undefined) draft.stale = true;
    this.answerNode(node, owner, qtype, draft, this.chooser(context, draft, pinned));
    this.negativeIfEmpty(draft, true);
  }

  /**
   * `site.<zone>` and `<x>.site.<zone>`: 'empty' (NODATA); `<prefix>.<x>.site.<zone>`: the name
   * `<prefix>.<zone>` with site `x`; anything else: undefined.
   */
  private pinnedName(name: string): PinnedName | 'empty' | undefined {
    const zone = this.zoneName;
    const rest = name.slice(0, name.length - zone.length - 1);
    if (rest === SITE_LABEL) return 'empty';
    if (!rest.endsWith(`.${SITE_LABEL}`)) return undefined;
    const head = rest.slice(0, rest.length - SITE_LABEL.length - 1);
    const dot = head.lastIndexOf('.');
    if (dot === -1) return head === '' ? undefined : 'empty';
    const site = head.slice(dot + 1);
    const prefix = head.slice(0, dot);
    if (site === '' || prefix === '') return undefined;
    return { name: `${prefix}.${zone}`, site };
  }

  /**
   * The instances a question about one service gets, weighted-shuffled: every live one, or with a
   * site selector the asker's (or the pinned) site's first; notes on the draft when the choice
   * depended on a trusted ECS.
   */
  private chooser(context: SiteContext | undefined, draft: Draft, pinned: string | undefined): (instances: readonly DnsInstance[]) => DnsInstance[] {
    if (!context) return (instances) => this.shuffle(liveInstances(instances));
    return (instances) => {
      const client = context.client();
      const choice = context.site.select(instances, client, pinned);
      if (choice.byClient && client.scope > 0) draft.scope = Math.max(draft.scope ?? 0, client.scope);
      return this.shuffle(choice.instances);
    };
  }

  private answerNode(node: ZoneNode, owner: RawName, qtype: string, draft: Draft, choose: (instances: readonly DnsInstance[]) => DnsInstance[]): void {
    const add = (rrset: WireRecord[], into: WireRecord[][] = draft.answers): void => {
      if (rrset.length > 0) into.push(rrset);
    };
    switch (node.kind) {
      case 'apex':
        if (qtype === 'SOA' || qtype === 'ANY') add([this.soa(owner)]);
        if (qtype === 'NS' || qtype === 'ANY') {
          add([{ owner, record: { type: 'NS', ttl: this.negativeTtl, data: `ns.${this.zoneName}` } }]);
          add([{ owner: rawName(`ns.${this.zoneName}`), record: { type: 'A', ttl: this.negativeTtl, data: this.nsAddress } }], draft.additionals);
        }
        return;
      case 'service': {
        // Chosen per address family: a site whose instances are all IPv6 must not leave A empty.
        const { instances } = node.service;
        for (const family of ['A', 'AAAA'] as const) {
          if (qtype === family || qtype === 'ANY') add(addressRecords(owner, node.service, choose(instances.filter((i) => ipFamily(i.ip) === family)), family));
        }
        if (qtype === 'SRV') this.addSrv(owner, node.service, choose(instances).map((i) => ({ instance: i, port: i.port })), draft);
        return;
      }
      case 'port': {
        // Every port number the service has under this name and protocol (Dubbo providers each on
        // their own port share the name `dubbo`).
        const { name, proto } = node.port;
        const numbers = new Set(node.service.ports.filter((p) => p.name === name && p.proto === proto).map((p) => p.port));
        numbers.add(node.port.port);
        if (qtype === 'SRV') this.addSrv(owner, node.service, choose(node.service.instances.filter((i) => numbers.has(i.port))).map((i) => ({ instance: i, port: i.port })), draft);
        return;
      }
      case 'instance': {
        const family = isIPv4(node.instance.ip) ? 'A' : 'AAAA';
        if (qtype === family || qtype === 'ANY') add(addressRecords(owner, node.service, [node.instance], family));
        if (qtype === 'TXT' || qtype === 'ANY') add(txtRecords(owner, node.service, node.instance));
        return;
      }
      case 'empty':
        return;
    }
  }

  private addSrv(owner: RawName, service: DnsService, targets: Array<{ instance: DnsInstance; port: number }>, draft: Draft): void {
    const ttl = clampTtl(service.ttlSeconds);
    const srv: WireRecord[] = [];
    const glueA: WireRecord[] = [];
    const glueAAAA: WireRecord[] = [];
    const seen = new Set<string>();
    for (const { instance, port } of targets) {
      const family = ipFamily(instance.ip);
      if (!family || !Number.isInteger(port) || port < 0 || port > 65535) continue;
      // The name the catalogue indexes the instance under (names.ts): a target that resolves.
      const target = instanceName(instance.ip, normaliseName(service.name));
      if (target === undefined || !isEncodableName(target) || seen.has(`${port} ${target}`)) continue;
      seen.add(`${port} ${target}`);
      srv.push({ owner, record: { type: 'SRV', ttl, data: { priority: 0, weight: srvWeight(instance.weight), port, target } } });
      const glue: WireRecord = { owner: rawName(target), record: { type: family, ttl, data: instance.ip } };
      if (!seen.has(target)) (family === 'A' ? glueA : glueAAAA).push(glue);
      seen.add(target);
    }
    if (srv.length > 0) draft.answers.push(srv);
    // Glue is additional data, one RRset per target name.
    for (const glue of [...glueA, ...glueAAAA]) draft.additionals.push([glue]);
  }

  private negativeIfEmpty(draft: Draft, exists: boolean): void {
    if (draft.answers.length > 0) return;
    if (!exists) draft.rcode = RCODE.NXDOMAIN;
    draft.additionals = [];
    draft.authorities.push([this.soa(rawName(this.zoneName))]);
  }

  private soa(owner: RawName): WireRecord {
    const zone = this.zoneName;
    return {
      owner,
      record: {
        type: 'SOA',
        ttl: this.negativeTtl,
        data: { mname: `ns.${zone}`, rname: `hostmaster.${zone}`, serial: this.serial, refresh: 3600, retry: 600, expire: 86400, minimum: this.negativeTtl },
      },
    };
  }

  /** Weighted-random order (Efraimidis-Spirakis): heavier instances come first more often. */
  private shuffle(instances: DnsInstance[]): DnsInstance[] {
    return instances
      .map((instance) => ({ instance, key: Math.pow(this.random() || Number.MIN_VALUE, 1 / instance.weight) }))
      .sort((a, b) => b.key - a.key)
      .map((e) => e.instance);
  }

  /**
   * The encoded answer: header, the question as sent, then whole RRsets while they fit `limit`.
   * Each record is encoded once; sizes are summed, so truncation is linear in the records.
   */
  private finish(header: { id: number; flags: number }, draft: Draft, opt: dnsPacket.OptAnswer | undefined, limit: number, qtype: string): DnsReply {
    if (opt) opt.extendedRcode = draft.rcode >> 4;
    const question = draft.question?.wire;
    const optRecord = opt ? encodeRecord({ owner: [], record: opt }) : undefined;
    let room = limit - DNS_HEADER_LENGTH - (question?.length ?? 0) - (optRecord?.length ?? 0);
    // Too big: keep whole RRsets that fit. Missing additional data alone does not set TC (RFC 2181 §9).
    const fit = (sets: WireRecord[][]): { kept: Buffer[]; all: boolean } => {
      const kept: Buffer[] = [];
      for (const set of sets) {
        const encoded = set.map(encodeRecord);
        const size = encoded.reduce((n, b) => n + b.length, 0);
        if (size > room) return { kept, all: false };
        room -= size;
        kept.push(...encoded);
      }
      return { kept, all: true };
    };
    const answers = fit(draft.answers);
    const authorities = answers.all ? fit(draft.authorities) : { kept: [], all: false };
    const additionals = answers.all && authorities.all ? fit(draft.additionals).kept : [];
    const truncated = !answers.all || !authorities.all;
    if (optRecord) additionals.push(optRecord);

    const head = Buffer.alloc(DNS_HEADER_LENGTH);
    head.writeUInt16BE(header.id, 0);
    const flags = (header.flags & 0x7800) | (header.flags & dnsPacket.RECURSION_DESIRED) | (draft.aa ? dnsPacket.AUTHORITATIVE_ANSWER : 0) | this.ra | (draft.rcode & 0xf);
    head.writeUInt16BE(0x8000 | flags | (truncated ? dnsPacket.TRUNCATED_RESPONSE : 0), 2);
    head.writeUInt16BE(question ? 1 : 0, 4);
    head.writeUInt16BE(answers.kept.length, 6);
    head.writeUInt16BE(authorities.kept.length, 8);
    head.writeUInt16BE(additionals.length, 10);
    return {
      message: Buffer.concat([head, ...(question ? [question] : []), ...answers.kept, ...authorities.kept, ...additionals]),
      rcode: draft.rcode,
      qtype,
      truncated,
      outOfZone: draft.outOfZone === true,
      stale: draft.stale === true,
      answers: answers.kept.length,
    };
  }

  private udpLimitFor(requested: number | undefined): number {
    if (requested === undefined) return CLASSIC_UDP_SIZE;
    return Math.min(this.udpSizeLimit, Math.max(CLASSIC_UDP_SIZE, requested));
  }
}

/** Lowercase, no trailing dot: the form ZoneLookup.find expects (RFC 4343: ASCII case only). */
export function normaliseName(name: string): string {
  return name.replace(/\.$/, '').replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/** True when `name` fits the wire: labels of 1..63 octets, at most 255 octets in all. */
export function isEncodableName(name: string): boolean {
  const trimmed = name.replace(/\.$/, '');
  if (trimmed === '') return true;
  let wire = 1;
  for (const label of trimmed.split('.')) {
    const len = Buffer.byteLength(label);
    if (len < 1 || len > 63) return false;
    wire += len + 1;
  }
  return wire <= 255;
}

/** SRV weight from a Nacos float weight: at least 1 for any weight > 0, at most 65535. */
export function srvWeight(weight: number): number {
  return Math.min(65535, Math.max(1, Math.round(weight)));
}

function liveInstances(instances: readonly DnsInstance[]): DnsInstance[] {
  return instances.filter((i) => i.healthy && i.enabled && i.weight > 0 && Number.isFinite(i.weight) && ipFamily(i.ip) !== undefined);
}

function addressRecords(owner: RawName, service: DnsService, instances: readonly DnsInstance[], type: 'A' | 'AAAA'): WireRecord[] {
  const ttl = clampTtl(service.ttlSeconds);
  const seen = new Set<string>();
  const out: WireRecord[] = [];
  for (const i of instances) {
    if (ipFamily(i.ip) !== type || seen.has(i.ip)) continue;
    seen.add(i.ip);
    out.push({ owner, record: { type, ttl, data: i.ip } });
  }
  return out;
}

/** RFC 1464 `key=value` strings, one TXT record per entry, split into 255-octet character-strings. */
function txtRecords(owner: RawName, service: DnsService, instance: DnsInstance): WireRecord[] {
  const ttl = clampTtl(service.ttlSeconds);
  return Object.keys(instance.metadata)
    .sort()
    .map((key) => {
      const bytes = Buffer.from(`${key}=${instance.metadata[key] ?? ''}`);
      const chunks: Buffer[] = [];
      for (let at = 0; at < bytes.length; at += 255) chunks.push(bytes.subarray(at, at + 255));
      return { owner, record: { type: 'TXT', ttl, data: chunks } };
    });
}

/** One record on the wire: the owner's octets, then what dns-packet encodes after a name (type, class, TTL, RDATA). */
function encodeRecord({ owner, record }: WireRecord): Buffer {
  // A message holding this record alone, owned by the root: the header and one octet come before the rest.
  const alone = dnsPacket.encode({ answers: [{ ...record, name: '.' } as Answer] });
  return Buffer.concat([encodeName(owner), alone.subarray(DNS_HEADER_LENGTH + 1)]);
}

function ipFamily(ip: string): 'A' | 'AAAA' | undefined {
  if (isIPv4(ip)) return 'A';
  if (isIPv6(ip) && !ip.includes('%')) return 'AAAA';
  return undefined;
}

function clampTtl(ttl: number): number {
  if (!Number.isFinite(ttl) || ttl < 0) return 0;
  return Math.min(MAX_TTL, Math.floor(ttl));
}

function opcodeOf(flags: number): number {
  return (flags >> 11) & 0xf;
}

/**
 * The query's ECS option and the one to echo (RFC 7871 §7.2.1: FAMILY, SOURCE PREFIX and ADDRESS
 * as sent, SCOPE 0 until an answer depends on the subnet), 'malformed' for a broken one (FORMERR,
 * §7.1.2), undefined when the query has none.
 */
function readClientSubnet(opt: dnsPacket.OptAnswer): { echo: dnsPacket.PacketOpt & { data: Buffer }; subnet: ClientSubnet } | 'malformed' | undefined {
  const ecs = (opt.options ?? []).filter((o) => o.code === ECS_OPTION);
  if (ecs.length === 0) return undefined;
  if (ecs.length > 1) return 'malformed';
  const data = ecs[0]?.data;
  if (!data || data.length < 4) return 'malformed';
  const family = data.readUInt16BE(0);
  const source = data.readUInt8(2);
  const maxBits = family === 1 ? 32 : family === 2 ? 128 : -1;
  if (maxBits < 0 || source > maxBits) return 'malformed';
  const address = data.subarray(4);
  if (address.length !== Math.ceil(source / 8)) return 'malformed';
  const spare = address.length * 8 - source;
  if (spare > 0 && (address[address.length - 1]! & ((1 << spare) - 1)) !== 0) return 'malformed';
  const echoed = Buffer.from(data);
  echoed.writeUInt8(0, 3);
  return { echo: { code: ECS_OPTION, data: echoed } as dnsPacket.PacketOpt & { data: Buffer }, subnet: { family, sourcePrefix: source, address: Uint8Array.from(address) } };
}
