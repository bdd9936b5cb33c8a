import { isIPv4, isIPv6 } from 'node:net';
import * as dnsPacket from 'dns-packet';
import type { Answer, DecodedPacket, Question } from 'dns-packet';
import type { DnsInstance, DnsService, ZoneLookup, ZoneNode } from './zone.js';
import { instanceName } from './names.js';
import type { ClientSubnet, SiteClient, SiteSelector } from './site.js';

/*
 * The DNS wire side of regsync's DNS server: a decoded query in, an encoded answer out, from a
 * ZoneLookup. No sockets here (src/dns/dns-server.ts owns them), so every RFC rule is unit-testable.
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

interface Draft {
  rcode: number;
  aa: boolean;
  outOfZone?: boolean;
  stale?: boolean;
  questions: Question[];
  /** RRsets, each kept or dropped whole on truncation. */
  answers: Answer[][];
  authorities: Answer[][];
  additionals: Answer[][];
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

  /** The answer to a decoded query (a message with QR=0). */
  respond(query: DecodedPacket, asker: Asker): DnsReply {
    const questions = query.questions ?? [];
    const qtype = questions.length === 1 && questions[0] ? questions[0].type : 'NONE';
    const opts = (query.additionals ?? []).filter((a) => a.type === 'OPT') as dnsPacket.OptAnswer[];
    const header = { id: query.id ?? 0, flags: query.flags ?? 0 };
    const limit = asker.transport === 'tcp' ? TCP_SIZE_LIMIT : this.udpLimitFor(opts.length === 1 ? opts[0]?.udpPayloadSize : undefined);
    const draft: Draft = { rcode: RCODE.NOERROR, aa: false, questions: [], answers: [], authorities: [], additionals: [] };

    // RFC 6891 §6.1.1: more than one OPT is a format error; the reply then carries no OPT.
    if (opts.length > 1) return this.finish(header, { ...draft, rcode: RCODE.FORMERR }, undefined, limit, qtype);
    const opt = opts[0];
    const optOut = opt ? ({ type: 'OPT', name: '.', udpPayloadSize: this.udpSizeLimit, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [] } as dnsPacket.OptAnswer) : undefined;
    if (opt && opt.ednsVersion > 0) return this.finish(header, { ...draft, questions, rcode: RCODE.BADVERS }, optOut, limit, qtype);
    if (opcodeOf(header.flags) !== OPCODE_QUERY) return this.finish(header, { ...draft, questions, rcode: RCODE.NOTIMP }, optOut, limit, qtype);
    const question = questions[0];
    if (questions.length !== 1 || !question) return this.finish(header, { ...draft, rcode: RCODE.FORMERR }, optOut, limit, qtype);
    draft.questions = [question];
    let ecs: { echo: dnsPacket.PacketOpt & { data: Buffer }; subnet: ClientSubnet } | undefined;
    if (opt && optOut) {
      const parsed = readClientSubnet(opt);
      if (parsed === 'malformed') return this.finish(header, { ...draft, rcode: RCODE.FORMERR }, optOut, limit, qtype);
      ecs = parsed;
      if (ecs) optOut.options.push(ecs.echo);
    }
    if ((question.class ?? 'IN') !== 'IN') return this.finish(header, { ...draft, rcode: RCODE.REFUSED }, optOut, limit, qtype);
    const name = normaliseName(question.name);
    if (!this.inZone(name)) return this.finish(header, { ...draft, rcode: RCODE.REFUSED, outOfZone: true }, optOut, limit, qtype);
    draft.aa = true;
    let context: SiteContext | undefined;
    if (this.site) {
      const site = this.site;
      let client: SiteClient | undefined;
      context = { site, client: () => (client ??= site.client(asker.address, ecs?.subnet)) };
    }
    this.answerInZone(name, question, draft, context);
    // RFC 7871 §7.2.1: SCOPE says how much of the client's address the answer depends on.
    if (ecs && draft.scope !== undefined && draft.scope > 0) ecs.echo.data.writeUInt8(Math.min(draft.scope, ecs.subnet.sourcePrefix), 3);
    return this.finish(header, draft, optOut, limit, qtype);
  }

  /**
   * The reply to a message dns-packet could not decode: FORMERR with the header only (ID, opcode
   * and RD copied), when the header is readable and the message is a query; undefined (drop)
   * otherwise, so garbage and stray responses are never answered.
   */
  respondToUndecodable(message: Buffer): Buffer | undefined {
    if (message.length < 12) return undefined;
    const flags = message.readUInt16BE(2);
    if (flags & 0x8000) return undefined;
    const out = Buffer.alloc(12);
    out.writeUInt16BE(message.readUInt16BE(0), 0);
    out.writeUInt16BE(0x8000 | (flags & 0x7900) | RCODE.FORMERR, 2);
    return out;
  }

  private inZone(name: string): boolean {
    const zone = this.zoneName;
    return name === zone || name.endsWith(`.${zone}`);
  }

  private answerInZone(name: string, question: Question, draft: Draft, context: SiteContext | undefined): void {
    const qtype: string = question.type;
    const nsName = `ns.${this.zoneName}`;
    if (name === nsName) {
      if (qtype === 'A' || qtype === 'ANY') draft.answers.push([{ type: 'A', name: question.name, ttl: this.negativeTtl, data: this.nsAddress }]);
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
    this.answerNode(node, question, draft, this.chooser(context, draft, pinned));
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

  private answerNode(node: ZoneNode, question: Question, draft: Draft, choose: (instances: readonly DnsInstance[]) => DnsInstance[]): void {
    const owner = question.name;
    const qtype: string = question.type;
    const add = (rrset: Answer[], into: Answer[][] = draft.answers): void => {
      if (rrset.length > 0) into.push(rrset);
    };
    switch (node.kind) {
      case 'apex':
        if (qtype === 'SOA' || qtype === 'ANY') add([this.soa(owner)]);
        if (qtype === 'NS' || qtype === 'ANY') {
          add([{ type: 'NS', name: owner, ttl: this.negativeTtl, data: `ns.${this.zoneName}` }]);
          add([{ type: 'A', name: `ns.${this.zoneName}`, ttl: this.negativeTtl, data: this.nsAddress }], draft.additionals);
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

  private addSrv(owner: string, service: DnsService, targets: Array<{ instance: DnsInstance; port: number }>, draft: Draft): void {
    const ttl = clampTtl(service.ttlSeconds);
    const srv: Answer[] = [];
    const glueA: Answer[] = [];
    const glueAAAA: Answer[] = [];
    const seen = new Set<string>();
    for (const { instance, port } of targets) {
      const family = ipFamily(instance.ip);
      if (!family || !Number.isInteger(port) || port < 0 || port > 65535) continue;
      // The name the catalogue indexes the instance under (names.ts): a target that resolves.
      const target = instanceName(instance.ip, normaliseName(service.name));
      if (target === undefined || !isEncodableName(target) || seen.has(`${port} ${target}`)) continue;
      seen.add(`${port} ${target}`);
      srv.push({ type: 'SRV', name: owner, ttl, data: { priority: 0, weight: srvWeight(instance.weight), port, target } });
      const glue = { type: family, name: target, ttl, data: instance.ip } as Answer;
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
    draft.authorities.push([this.soa(this.zoneName)]);
  }

  private soa(owner: string): Answer {
    const zone = this.zoneName;
    return {
      type: 'SOA',
      name: owner,
      ttl: this.negativeTtl,
      data: { mname: `ns.${zone}`, rname: `hostmaster.${zone}`, serial: this.serial, refresh: 3600, retry: 600, expire: 86400, minimum: this.negativeTtl },
    };
  }

  /** Weighted-random order (Efraimidis-Spirakis): heavier instances come first more often. */
  private shuffle(instances: DnsInstance[]): DnsInstance[] {
    return instances
      .map((instance) => ({ instance, key: Math.pow(this.random() || Number.MIN_VALUE, 1 / instance.weight) }))
      .sort((a, b) => b.key - a.key)
      .map((e) => e.instance);
  }

  private finish(header: { id: number; flags: number }, draft: Draft, opt: dnsPacket.OptAnswer | undefined, limit: number, qtype: string): DnsReply {
    const reply = (packet: dnsPacket.Packet, truncated: boolean): DnsReply => ({
      message: dnsPacket.encode(packet),
      rcode: draft.rcode,
      qtype,
      truncated,
      outOfZone: draft.outOfZone === true,
      stale: draft.stale === true,
      answers: packet.answers?.length ?? 0,
    });
    if (opt) opt.extendedRcode = draft.rcode >> 4;
    const flags = (header.flags & 0x7800) | (header.flags & dnsPacket.RECURSION_DESIRED) | (draft.aa ? dnsPacket.AUTHORITATIVE_ANSWER : 0) | this.ra | (draft.rcode & 0xf);
    const build = (answers: Answer[][], authorities: Answer[][], additionals: Answer[][], tc: boolean): dnsPacket.Packet => ({
      type: 'response',
      id: header.id,
      flags: flags | (tc ? dnsPacket.TRUNCATED_RESPONSE : 0),
      questions: draft.questions,
      answers: answers.flat(),
      authorities: authorities.flat(),
      additionals: [...additionals.flat(), ...(opt ? [opt] : [])],
    });
    const full = build(draft.answers, draft.authorities, draft.additionals, false);
    if (dnsPacket.encodingLength(full) <= limit) return reply(full, false);
    // Too big: keep whole RRsets that fit. Missing additional data alone does not set TC (RFC 2181 §9).
    const fit = (sets: Answer[][], put: (kept: Answer[][]) => dnsPacket.Packet): { kept: Answer[][]; all: boolean } => {
      const kept: Answer[][] = [];
      for (const set of sets) {
        if (dnsPacket.encodingLength(put([...kept, set])) > limit) return { kept, all: false };
        kept.push(set);
      }
      return { kept, all: true };
    };
    const ans = fit(draft.answers, (k) => build(k, [], [], true));
    if (!ans.all) return reply(build(ans.kept, [], [], true), true);
    const auth = fit(draft.authorities, (k) => build(ans.kept, k, [], false));
    if (!auth.all) return reply(build(ans.kept, auth.kept, [], true), true);
    const addl = fit(draft.additionals, (k) => build(ans.kept, auth.kept, k, false));
    return reply(build(ans.kept, auth.kept, addl.kept, false), false);
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

function addressRecords(owner: string, service: DnsService, instances: readonly DnsInstance[], type: 'A' | 'AAAA'): Answer[] {
  const ttl = clampTtl(service.ttlSeconds);
  const seen = new Set<string>();
  const out: Answer[] = [];
  for (const i of instances) {
    if (ipFamily(i.ip) !== type || seen.has(i.ip)) continue;
    seen.add(i.ip);
    out.push({ type, name: owner, ttl, data: i.ip });
  }
  return out;
}

/** RFC 1464 `key=value` strings, one TXT record per entry, split into 255-octet character-strings. */
function txtRecords(owner: string, service: DnsService, instance: DnsInstance): Answer[] {
  const ttl = clampTtl(service.ttlSeconds);
  return Object.keys(instance.metadata)
    .sort()
    .map((key) => {
      const bytes = Buffer.from(`${key}=${instance.metadata[key] ?? ''}`);
      const chunks: Buffer[] = [];
      for (let at = 0; at < bytes.length; at += 255) chunks.push(bytes.subarray(at, at + 255));
      return { type: 'TXT', name: owner, ttl, data: chunks } as Answer;
    });
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
