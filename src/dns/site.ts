import { DnsConfigError } from './dns-config-error.js';
import { addressLabel, mapLabel } from './names.js';
import type { DnsInstance } from './zone.js';

/*
 * Same-site answers: who is asking (the CMDB labels of the asker's address, or of the EDNS Client
 * Subnet a trusted resolver sends, by prefix), and which instances such an asker gets (the same
 * site, then the same region, then all; never nothing). Synchronous and allocation-light: it runs
 * on every DNS query. Behaviour is described in src/dns/README.md ("Same site").
 */

type Labels = Readonly<Record<string, string>>;

/** The label names preferred by default: the same site first, then the same region. */
export const DEFAULT_SITE_LABELS: readonly string[] = Object.freeze(['site', 'region']);

/**
 * Where the labels of addresses come from: satisfied by `CmdbCache` (src/cmdb/cache.ts). Only what
 * the selector uses: the whole table (to build its index), one address's labels, and the notice of
 * which addresses changed (so that a few changes cost a few look-ups, not a rebuild).
 */
export interface SiteLabelSource {
  /** Every IP with labels and its labels, as last seen. */
  snapshot(): ReadonlyMap<string, Labels>;
  /** The labels of one IP as last seen (empty when it has none). */
  labelsOf(ip: string): Labels;
  on(event: 'change', listener: (ips: string[]) => void): unknown;
  off(event: 'change', listener: (ips: string[]) => void): unknown;
}

/** How a {@link SiteSelector} picks; every field but `cmdb` has a default. */
export interface SiteSelectorOptions {
  /** The CMDB labels of addresses (a `CmdbCache`). */
  cmdb: SiteLabelSource;
  /** Label names in order of preference (default `['site', 'region']`): the first is the one `<x>.site` pins. */
  labels?: readonly string[] | undefined;
  /**
   * Resolvers (IPs or CIDRs, IPv4 or IPv6) whose EDNS Client Subnet is believed (default none).
   * ECS from any other sender is echoed with SCOPE 0 and ignored: otherwise any client could claim
   * any site.
   */
  trustedResolvers?: readonly string[] | undefined;
  /**
   * The address whose labels an asker on 127.0.0.0/8 or ::1 gets (a per-host daemon's clients,
   * DNS-F style): usually the host's own address. Default none: loopback askers have the labels the
   * CMDB gives the loopback address itself (normally none).
   */
  loopbackAs?: string | undefined;
  /**
   * Nacos protectThreshold (0..1, default 0 = off): when fewer than this share of a service's
   * instances are healthy, unhealthy ones are answered too, rather than overload the survivors.
   */
  protectThreshold?: number | undefined;
}

/** An EDNS Client Subnet as the query carried it (RFC 7871 §6), already checked for form. */
export interface ClientSubnet {
  /** 1 = IPv4, 2 = IPv6. */
  family: number;
  sourcePrefix: number;
  /** The address bytes as sent: `ceil(sourcePrefix / 8)` of them, bits past the prefix zero. */
  address: Uint8Array;
}

/** Who is asking, as far as selection cares. */
export interface SiteClient {
  /** The asker's values of the configured label names (only those it has). */
  labels: Labels;
  /**
   * The ECS SCOPE PREFIX an answer tailored to these labels carries: the source prefix when they
   * came from a trusted ECS, 0 when they came from the packet's source address.
   */
  scope: number;
  /** False when the asker opted out (a trusted ECS with source prefix 0): answers are not tailored. */
  tailored: boolean;
}

/** What {@link SiteSelector.select} chose. */
export interface SiteChoice {
  /** The instances to answer (never empty while any instance can be answered), not yet shuffled. */
  instances: DnsInstance[];
  /** The choice read the asker's labels: another asker could get another list (ECS SCOPE). */
  byClient: boolean;
  /** The label name whose filter gave the list; undefined: no filter did, all candidates. */
  level: string | undefined;
  /** Fewer than `protectThreshold` were healthy: unhealthy instances are among the candidates. */
  protected: boolean;
}

/** An index of one address family: sorted keys and, per label name, range tables. */
interface FamilyIndex<K extends number | string> {
  /** IPv4: the address as an unsigned 32-bit number; IPv6: 32 lowercase hex digits (string order is address order). Sorted, unique. */
  keys: ArrayLike<K>;
  labels: Labels[];
  /** Per label name: `first[i]` = the first index >= i whose entity has that label (n: none). */
  first: Int32Array[];
  /** Per label name, at an index that has it: the last index up to which every entity that has it agrees. */
  agreeTo: Int32Array[];
}

const NO_LABELS: Labels = Object.freeze({});
const OPTED_OUT: SiteClient = Object.freeze({ labels: NO_LABELS, scope: 0, tailored: false });
/** Bound on each memo (instance address -> key, site value -> DNS label); a full one is cleared. */
const MEMO_LIMIT = 65_536;
/** More changed addresses than this in one notice: read the whole CMDB again rather than each. */
const INCREMENTAL_LIMIT = 4_096;

/**
 * Tells who asks and picks instances for them, from CMDB labels.
 *
 * Decisions:
 * - The asker's labels come from a trusted resolver's ECS when its source prefix is > 0 (prefix 0:
 *   the client opted out, nothing is tailored), else from the packet's source address (loopback
 *   mapped to `loopbackAs`). A prefix lookup gives the labels every CMDB address inside the prefix
 *   agrees on: a label counts when all the addresses in the prefix that have it have the same value
 *   (two addresses of one /24 in different sites of one region give the region only). A full
 *   /32 or /128 is an exact lookup.
 * - The index follows the CMDB's change notices, so an answer never uses labels older than the last
 *   change: the addresses a notice names are read again one by one (the whole CMDB when it names
 *   more than {@link INCREMENTAL_LIMIT}); the sorted prefix tables are rebuilt from that soon after
 *   the notice, or by the next prefix lookup, whichever comes first, and only where resolvers are
 *   trusted (nobody else's prefixes are looked up). A prefix lookup is a binary search plus constant
 *   work per label name, whatever the prefix covers; an exact one is a map read.
 * - An instance's label is its own metadata value of that name when it has one, else the CMDB's
 *   value for its address.
 * - Candidates are the healthy, enabled instances with weight > 0 (with protection: the enabled
 *   ones with weight > 0, healthy or not). The first label name whose value the asker has and some
 *   candidate shares gives the answer; otherwise all candidates: never nothing because a filter
 *   emptied the list.
 */
export class SiteSelector {
  private readonly cmdb: SiteLabelSource;
  private readonly names: readonly string[];
  private readonly trusted: Cidr[];
  private readonly loopbackKey: AddressKey | undefined;
  private readonly threshold: number;
  private v4: FamilyIndex<number> | undefined;
  private v6: FamilyIndex<string> | undefined;
  private exact4 = new Map<number, Labels>();
  private exact6 = new Map<string, Labels>();
  /** Instance address -> its key (null: not an address): instances are asked about on every query. */
  private readonly memo = new Map<string, AddressKey | null>();
  /** Instance label value -> its DNS label, for pinned sites (`mapLabel` hashes names that are not labels). */
  private readonly mapped = new Map<string, string>();
  /** The exact tables must be read again from `snapshot()` (at start, and after large changes). */
  private stale = true;
  /** The prefix tables must be rebuilt from the exact ones. */
  private unsorted = true;
  private pending: NodeJS.Immediate | undefined;
  private readonly onChange = (ips: readonly string[]): void => {
    if (!this.stale && ips.length <= INCREMENTAL_LIMIT) this.update(ips);
    else this.stale = true;
    this.unsorted = true;
    // Prefix lookups only happen for trusted resolvers: without any, the prefix tables are never built.
    if (this.pending !== undefined || (!this.stale && this.trusted.length === 0)) return;
    this.pending = setImmediate(() => {
      this.pending = undefined;
      if (this.trusted.length > 0) this.ensurePrefixIndex();
      else this.ensureExact();
    });
    this.pending.unref();
  };

  /** Throws {@link DnsConfigError} for a setting it cannot use (a bad CIDR, a threshold outside 0..1). */
  constructor(options: SiteSelectorOptions) {
    this.cmdb = options.cmdb;
    this.names = checkLabels(options.labels ?? DEFAULT_SITE_LABELS);
    this.trusted = (options.trustedResolvers ?? []).map((text, i) => parseCidr(text, `site.trustedResolvers[${i}]`));
    if (options.loopbackAs !== undefined) {
      const key = addressKey(options.loopbackAs);
      if (key === undefined) throw new DnsConfigError('site.loopbackAs', `${JSON.stringify(options.loopbackAs)} is not an IP address`);
      this.loopbackKey = key;
    }
    const threshold = options.protectThreshold ?? 0;
    if (typeof threshold !== 'number' || !(threshold >= 0 && threshold <= 1)) throw new DnsConfigError('site.protectThreshold', `must be a number from 0 to 1, got ${String(threshold)}`);
    this.threshold = threshold;
    this.cmdb.on('change', this.onChange);
    // The first index is built in a turn of its own too (or by the first query, whichever comes first).
    this.onChange([]);
  }

  /** Stops following the CMDB (the index stays as it is). Idempotent. */
  close(): void {
    this.cmdb.off('change', this.onChange);
    if (this.pending !== undefined) clearImmediate(this.pending);
    this.pending = undefined;
  }

  /**
   * Who sent a query from `address` (as the socket reports it; `::ffff:a.b.c.d` counts as IPv4),
   * carrying `ecs` or not.
   */
  client(address: string, ecs?: ClientSubnet): SiteClient {
    const source = addressKey(address);
    if (ecs !== undefined && source !== undefined && this.trusted.some((c) => c.contains(source))) {
      if (ecs.sourcePrefix === 0) return OPTED_OUT;
      const labels = this.prefixLabels(ecs);
      if (labels !== undefined) return { labels, scope: ecs.sourcePrefix, tailored: true };
    }
    if (source === undefined) return { labels: NO_LABELS, scope: 0, tailored: true };
    const own = this.loopbackKey !== undefined && isLoopback(source) ? this.loopbackKey : source;
    return { labels: this.exactLabels(own), scope: 0, tailored: true };
  }

  /** The labels the CMDB addresses inside `subnet` agree on; undefined for a family other than IPv4/IPv6. */
  prefixLabels(subnet: ClientSubnet): Labels | undefined {
    const width = subnet.family === 1 ? 4 : subnet.family === 2 ? 16 : 0;
    if (width === 0 || subnet.sourcePrefix > width * 8 || subnet.address.length > width) return undefined;
    const lo = new Uint8Array(width);
    lo.set(subnet.address);
    const hi = Uint8Array.from(lo);
    for (let bit = subnet.sourcePrefix; bit < width * 8; bit += 1) {
      const at = bit >> 3;
      const mask = 0x80 >> (bit & 7);
      lo[at] = (lo[at] ?? 0) & ~mask;
      hi[at] = (hi[at] ?? 0) | mask;
    }
    const full = subnet.sourcePrefix === width * 8;
    if (full) this.ensureExact();
    else this.ensurePrefixIndex();
    if (width === 4) {
      if (full) return this.exact4.get(v4Number(lo)) ?? NO_LABELS;
      return this.v4 === undefined ? NO_LABELS : this.agreed(this.v4, lowerBound(this.v4.keys, v4Number(lo)), upperBound(this.v4.keys, v4Number(hi)) - 1);
    }
    if (full) return this.exact6.get(hex(lo)) ?? NO_LABELS;
    return this.v6 === undefined ? NO_LABELS : this.agreed(this.v6, lowerBound(this.v6.keys, hex(lo)), upperBound(this.v6.keys, hex(hi)) - 1);
  }

  /**
   * The instances an asker gets out of `instances` (the service's, already narrowed to one address
   * family or port where the question asks for that): see the class comment. With `pinnedSite`
   * (a DNS label, from a `<site>.site` name), the first label name is matched against it instead
   * of the asker's value (instance values compared as DNS labels: `mapLabel`), and the asker's
   * other labels still give the fallback order.
   */
  select(instances: readonly DnsInstance[], client: SiteClient, pinnedSite?: string): SiteChoice {
    const eligible: DnsInstance[] = [];
    const live: DnsInstance[] = [];
    for (const i of instances) {
      if (!i.enabled || !(i.weight > 0) || !Number.isFinite(i.weight) || this.keyOfInstance(i.ip) === null) continue;
      eligible.push(i);
      if (i.healthy) live.push(i);
    }
    const isProtected = this.threshold > 0 && eligible.length > 0 && live.length / eligible.length < this.threshold;
    const candidates = isProtected ? eligible : live;
    let byClient = false;
    if (candidates.length > 1) {
      for (let level = 0; level < this.names.length; level += 1) {
        const name = this.names[level]!;
        const pinned = level === 0 && pinnedSite !== undefined;
        const wanted = pinned ? pinnedSite : client.tailored ? client.labels[name] : undefined;
        if (!pinned && client.tailored) byClient = true;
        if (wanted === undefined) continue;
        const matches = candidates.filter((i) => {
          const value = this.instanceLabel(i, name);
          return value !== undefined && (pinned ? value === wanted || this.dnsLabel(value) === wanted : value === wanted);
        });
        if (matches.length > 0) return { instances: matches, byClient, level: name, protected: isProtected };
      }
    }
    return { instances: candidates, byClient, level: undefined, protected: isProtected };
  }

  private instanceLabel(instance: DnsInstance, name: string): string | undefined {
    const own = instance.metadata[name];
    if (own !== undefined && own !== '') return own;
    const key = this.keyOfInstance(instance.ip);
    return key === null ? undefined : this.exactLabels(key)[name];
  }

  private dnsLabel(value: string): string {
    let label = this.mapped.get(value);
    if (label === undefined) {
      if (this.mapped.size >= MEMO_LIMIT) this.mapped.clear();
      label = mapLabel(value);
      this.mapped.set(value, label);
    }
    return label;
  }

  private keyOfInstance(ip: string): AddressKey | null {
    let key = this.memo.get(ip);
    if (key === undefined) {
      if (this.memo.size >= MEMO_LIMIT) this.memo.clear();
      key = addressKey(ip) ?? null;
      this.memo.set(ip, key);
    }
    return key;
  }

  private exactLabels(key: AddressKey): Labels {
    this.ensureExact();
    return (key.family === 4 ? this.exact4.get(key.n) : this.exact6.get(key.hex)) ?? NO_LABELS;
  }

  /** The labels every entity in [lo, hi] that has them agrees on. */
  private agreed(index: FamilyIndex<number> | FamilyIndex<string>, lo: number, hi: number): Labels {
    if (hi < lo) return NO_LABELS;
    const out: Record<string, string> = {};
    this.names.forEach((name, l) => {
      const j = index.first[l]![lo]!;
      if (j <= hi && index.agreeTo[l]![j]! >= hi) out[name] = index.labels[j]![name]!;
    });
    return out;
  }

  /** The exact tables, read again from the whole CMDB when they are stale. */
  private ensureExact(): void {
    if (!this.stale) return;
    this.stale = false;
    this.unsorted = true;
    const exact4 = new Map<number, Labels>();
    const exact6 = new Map<string, Labels>();
    const shared = new Map<string, Labels>();
    for (const [ip, all] of this.cmdb.snapshot()) {
      const key = addressKey(ip);
      if (key === undefined) continue;
      const labels = pick(all, this.names, shared);
      if (labels === NO_LABELS) continue;
      if (key.family === 4) {
        if (!exact4.has(key.n)) exact4.set(key.n, labels);
      } else if (!exact6.has(key.hex)) exact6.set(key.hex, labels);
    }
    this.exact4 = exact4;
    this.exact6 = exact6;
  }

  /** A few addresses changed: their rows only (an address spelled twice in the CMDB takes the last spelling changed). */
  private update(ips: readonly string[]): void {
    const shared = new Map<string, Labels>();
    for (const ip of ips) {
      const key = addressKey(ip);
      if (key === undefined) continue;
      const labels = pick(this.cmdb.labelsOf(ip), this.names, shared);
      const table: Map<number | string, Labels> = key.family === 4 ? this.exact4 : this.exact6;
      const id = key.family === 4 ? key.n : key.hex;
      if (labels === NO_LABELS) table.delete(id);
      else table.set(id, labels);
    }
  }

  /** The prefix tables, rebuilt from the exact ones after a change. */
  private ensurePrefixIndex(): void {
    this.ensureExact();
    if (!this.unsorted) return;
    this.unsorted = false;
    const { exact4, exact6 } = this;
    // Typed-array sort is numeric; fixed-width hex sorts as strings.
    const keys4 = Uint32Array.from(exact4.keys()).sort();
    this.v4 = buildFamily(keys4, Array.from(keys4, (k) => exact4.get(k)!), this.names);
    const keys6 = [...exact6.keys()].sort();
    this.v6 = buildFamily(keys6, keys6.map((k) => exact6.get(k)!), this.names);
  }
}

function buildFamily<K extends number | string>(keys: ArrayLike<K>, labels: Labels[], names: readonly string[]): FamilyIndex<K> {
  const n = labels.length;
  const first: Int32Array[] = [];
  const agreeTo: Int32Array[] = [];
  for (const name of names) {
    const f = new Int32Array(n + 1);
    const a = new Int32Array(n);
    f[n] = n;
    for (let i = n - 1; i >= 0; i -= 1) {
      const value = labels[i]![name];
      if (value === undefined) {
        f[i] = f[i + 1]!;
        continue;
      }
      f[i] = i;
      const next = f[i + 1]!;
      a[i] = next === n ? n - 1 : labels[next]![name] === value ? a[next]! : next - 1;
    }
    first.push(f);
    agreeTo.push(a);
  }
  return { keys, labels, first, agreeTo };
}

/** The configured labels of `all` (NO_LABELS for none); equal results share one frozen object (`shared`), as most hosts share a few sites. */
function pick(all: Labels, names: readonly string[], shared: Map<string, Labels>): Labels {
  let id = '';
  let any = false;
  for (const name of names) {
    const value = all[name];
    const has = typeof value === 'string' && value !== '';
    any ||= has;
    id += has ? `${value.length}:${value}` : '-';
  }
  if (!any) return NO_LABELS;
  let out = shared.get(id);
  if (out === undefined) {
    const fresh: Record<string, string> = {};
    for (const name of names) {
      const value = all[name];
      if (typeof value === 'string' && value !== '') fresh[name] = value;
    }
    out = Object.freeze(fresh);
    shared.set(id, out);
  }
  return out;
}

function checkLabels(labels: readonly string[]): readonly string[] {
  if (!Array.isArray(labels) || labels.length === 0) throw new DnsConfigError('site.labels', 'name at least one label, e.g. ["site", "region"]');
  for (const [i, l] of labels.entries()) {
    if (typeof l !== 'string' || l === '') throw new DnsConfigError(`site.labels[${i}]`, 'must be a non-empty label name');
  }
  return Object.freeze([...new Set(labels)]);
}

/** An address as the index keys it: IPv4 as an unsigned 32-bit number, IPv6 as 32 hex digits. */
type AddressKey = { family: 4; n: number } | { family: 6; hex: string; bytes: Uint8Array };

/** The key of an IPv4 or IPv6 address in any spelling; IPv4-mapped IPv6 counts as IPv4; undefined otherwise. */
function addressKey(ip: string): AddressKey | undefined {
  const n = parseIPv4(ip);
  if (n !== undefined) return { family: 4, n };
  const label = ip.includes(':') ? addressLabel(ip) : undefined;
  if (label === undefined) return undefined;
  const bytes = new Uint8Array(16);
  label.split('-').forEach((g, i) => {
    const v = parseInt(g, 16);
    bytes[i * 2] = v >> 8;
    bytes[i * 2 + 1] = v & 0xff;
  });
  if (bytes.subarray(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) return { family: 4, n: v4Number(bytes.subarray(12)) };
  return { family: 6, hex: hex(bytes), bytes };
}

/** Dotted-quad IPv4 (as `net.isIPv4` takes it: no leading zeros) as an unsigned number; undefined otherwise. */
function parseIPv4(ip: string): number | undefined {
  if (ip.length < 7 || ip.length > 15) return undefined;
  let n = 0;
  let part = 0;
  let digits = 0;
  let parts = 0;
  for (let i = 0; i <= ip.length; i += 1) {
    const c = i === ip.length ? 0x2e : ip.charCodeAt(i);
    if (c === 0x2e) {
      if (digits === 0 || part > 255) return undefined;
      n = n * 256 + part;
      parts += 1;
      part = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39) {
      if (digits > 0 && part === 0) return undefined;
      part = part * 10 + (c - 0x30);
      digits += 1;
    } else return undefined;
  }
  return parts === 4 ? n : undefined;
}

function v4Number(bytes: Uint8Array): number {
  return (bytes[0] ?? 0) * 0x1000000 + (bytes[1] ?? 0) * 0x10000 + (bytes[2] ?? 0) * 0x100 + (bytes[3] ?? 0);
}

function hex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += (b < 16 ? '0' : '') + b.toString(16);
  return out;
}

function isLoopback(key: AddressKey): boolean {
  if (key.family === 4) return key.n >= 0x7f000000 && key.n <= 0x7fffffff;
  return key.bytes.every((b, i) => b === (i === 15 ? 1 : 0));
}

interface Cidr {
  contains(key: AddressKey): boolean;
}

function parseCidr(text: string, field: string): Cidr {
  const [addr = '', bits, ...rest] = String(text).trim().split('/');
  const key = addressKey(addr);
  const width = key?.family === 4 ? 32 : 128;
  const prefix = bits === undefined ? width : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
  if (key === undefined || rest.length > 0 || !(prefix >= 0 && prefix <= width)) {
    throw new DnsConfigError(field, `${JSON.stringify(text)} is not an IP address or CIDR (e.g. 10.0.0.53 or 10.0.0.0/24)`);
  }
  if (key.family === 4) {
    const size = 2 ** (32 - prefix);
    const base = key.n - (key.n % size);
    return { contains: (other) => other.family === 4 && other.n >= base && other.n < base + size };
  }
  const bytes = key.bytes;
  return {
    contains(other: AddressKey): boolean {
      if (other.family !== 6) return false;
      for (let bit = 0; bit < prefix; bit += 8) {
        const mask = prefix - bit >= 8 ? 0xff : (0xff00 >> (prefix - bit)) & 0xff;
        if ((((other.bytes[bit >> 3] ?? 0) ^ (bytes[bit >> 3] ?? 0)) & mask) !== 0) return false;
      }
      return true;
    },
  };
}

function lowerBound<K extends number | string>(keys: ArrayLike<K>, key: K): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (keys[mid]! < key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

function upperBound<K extends number | string>(keys: ArrayLike<K>, key: K): number {
  let lo = 0;
  let hi = keys.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (keys[mid]! <= key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
