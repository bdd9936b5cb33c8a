import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parse as parseYaml } from 'yaml';
import type { ServiceKey } from '../model/types.js';
import { DEFAULT_DNS_TTL_SECONDS, type DnsTtlOverride } from './catalogue.js';
import { DnsConfigError } from './dns-config-error.js';
import { parseUpstream } from './forwarder.js';
import { validateZone } from './names.js';

/** The zone served when none is configured (`.internal` is reserved for private use). */
export const DEFAULT_DNS_ZONE = 'regsync.internal';
/** Where the DNS server listens when nothing says otherwise: loopback, never an open resolver. */
export const DEFAULT_DNS_LISTEN = { host: '127.0.0.1', port: 5353 } as const;

/** Same-site selection settings (see src/dns/README.md, "Same site"). */
export interface DnsSiteSettings {
  /** CMDB label names in order of preference (default `site`, `region`). */
  labels: string[];
  /** Resolvers (IPs or CIDRs) whose EDNS Client Subnet is believed (default none). */
  trustedResolvers: string[];
  /** The address whose labels loopback askers get (default none). */
  loopbackAs?: string | undefined;
  /** Below this share of healthy instances, answer all (0..1, default 0: off). */
  protectThreshold: number;
}

/** Everything the DNS server of a process is told: the `dns` section, overridden by flags. */
export interface DnsSettings {
  listen: { host: string; port: number };
  zone: string;
  /** Cluster ids to serve; undefined: every stored cluster. */
  clusters?: string[] | undefined;
  ttlSeconds: number;
  ttl: DnsTtlOverride[];
  negativeTtlSeconds: number;
  aliases: Record<string, ServiceKey>;
  /** Upstream resolvers (`host[:port]`) for names outside the zone; empty: not forwarded (REFUSED). */
  upstreams: string[];
  forwardTimeoutMs: number;
  site: DnsSiteSettings;
  rateLimit: { perSecond: number; burst: number };
  udpSizeLimit: number;
  /** How often each cluster is listed again, ms. */
  refreshMs: number;
}

/** What flags may set; each wins over the file. */
export interface DnsFlagSettings {
  listen?: string | undefined;
  zone?: string | undefined;
  /** Comma-separated ids. */
  clusters?: string | undefined;
  /** Comma-separated `host[:port]`. */
  upstream?: string | undefined;
}

const KEYS = [
  'listen',
  'zone',
  'clusters',
  'ttlSeconds',
  'ttl',
  'negativeTtlSeconds',
  'aliases',
  'upstreams',
  'forwardTimeoutMs',
  'site',
  'rateLimit',
  'udpSizeLimit',
  'refreshMs',
] as const;
const SITE_KEYS = ['labels', 'trustedResolvers', 'loopbackAs', 'protectThreshold'] as const;

/** The defaults of every setting. */
export function defaultDnsSettings(): DnsSettings {
  return {
    listen: { ...DEFAULT_DNS_LISTEN },
    zone: DEFAULT_DNS_ZONE,
    clusters: undefined,
    ttlSeconds: DEFAULT_DNS_TTL_SECONDS,
    ttl: [],
    negativeTtlSeconds: 5,
    aliases: {},
    upstreams: [],
    forwardTimeoutMs: 2_000,
    site: { labels: ['site', 'region'], trustedResolvers: [], loopbackAs: undefined, protectThreshold: 0 },
    rateLimit: { perSecond: 1_000, burst: 2_000 },
    udpSizeLimit: 1232,
    refreshMs: 10_000,
  };
}

/** Reads a DNS settings file (YAML or JSON): the settings at the top level or under a `dns` key. */
export function readDnsSettingsFile(file: string): Partial<DnsSettings> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new DnsConfigError('config', `cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : (err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text, { maxAliasCount: 100 });
  } catch (err) {
    throw new DnsConfigError('config', `${file} is not valid YAML: ${(err as Error).message}`);
  }
  if (isMapping(doc) && isMapping(doc.dns) && Object.keys(doc).length === 1) doc = doc.dns;
  return parseDnsSection(doc ?? {});
}

/**
 * Checks a `dns` section (a parsed mapping): every key known, every value of the right type and
 * range. Throws {@link DnsConfigError} naming the first bad key.
 */
export function parseDnsSection(raw: unknown): Partial<DnsSettings> {
  if (!isMapping(raw)) throw new DnsConfigError('config', `must be a mapping of settings, got ${describe(raw)}`);
  const out: Partial<DnsSettings> = {};
  for (const key of Object.keys(raw)) {
    if (!(KEYS as readonly string[]).includes(key)) throw new DnsConfigError(key.slice(0, 64), `not a DNS setting (known: ${KEYS.join(', ')})`);
  }
  if (raw.listen !== undefined) out.listen = parseDnsListen(str(raw.listen, 'listen'), 'listen');
  if (raw.zone !== undefined) out.zone = validateZone(str(raw.zone, 'zone'));
  if (raw.clusters !== undefined) out.clusters = strings(raw.clusters, 'clusters');
  if (raw.ttlSeconds !== undefined) out.ttlSeconds = int(raw.ttlSeconds, 'ttlSeconds', 0, 2 ** 31 - 1);
  if (raw.negativeTtlSeconds !== undefined) out.negativeTtlSeconds = int(raw.negativeTtlSeconds, 'negativeTtlSeconds', 0, 2 ** 31 - 1);
  if (raw.ttl !== undefined) {
    if (!Array.isArray(raw.ttl)) throw new DnsConfigError('ttl', 'must be a list of {services, seconds}');
    out.ttl = raw.ttl.map((rule: unknown, i) => {
      if (!isMapping(rule)) throw new DnsConfigError(`ttl[${i}]`, 'must be a mapping {services, seconds}');
      for (const k of Object.keys(rule)) if (k !== 'services' && k !== 'seconds') throw new DnsConfigError(`ttl[${i}].${k.slice(0, 64)}`, 'not a TTL setting (known: services, seconds)');
      return { services: strings(rule.services, `ttl[${i}].services`), seconds: int(rule.seconds, `ttl[${i}].seconds`, 0, 2 ** 31 - 1) };
    });
  }
  if (raw.aliases !== undefined) {
    if (!isMapping(raw.aliases)) throw new DnsConfigError('aliases', 'must map alias labels to {namespace, group, name}');
    out.aliases = {};
    for (const [alias, target] of Object.entries(raw.aliases)) {
      const field = `aliases.${alias.slice(0, 64)}`;
      if (!isMapping(target)) throw new DnsConfigError(field, 'must be {namespace, group, name}');
      for (const k of Object.keys(target)) if (!['namespace', 'group', 'name'].includes(k)) throw new DnsConfigError(`${field}.${k.slice(0, 64)}`, 'not a service key field (known: namespace, group, name)');
      out.aliases[alias] = { namespace: target.namespace === undefined ? 'public' : str(target.namespace, `${field}.namespace`, true), group: target.group === undefined ? 'DEFAULT_GROUP' : str(target.group, `${field}.group`, true), name: str(target.name, `${field}.name`) };
    }
  }
  if (raw.upstreams !== undefined) out.upstreams = strings(raw.upstreams, 'upstreams').map((u) => checkUpstream(u, 'upstreams'));
  if (raw.forwardTimeoutMs !== undefined) out.forwardTimeoutMs = int(raw.forwardTimeoutMs, 'forwardTimeoutMs', 1, 60_000);
  if (raw.udpSizeLimit !== undefined) out.udpSizeLimit = int(raw.udpSizeLimit, 'udpSizeLimit', 512, 65_535);
  if (raw.refreshMs !== undefined) out.refreshMs = int(raw.refreshMs, 'refreshMs', 100, 86_400_000);
  if (raw.rateLimit !== undefined) {
    const r = raw.rateLimit;
    if (!isMapping(r)) throw new DnsConfigError('rateLimit', 'must be {perSecond, burst}');
    for (const k of Object.keys(r)) if (k !== 'perSecond' && k !== 'burst') throw new DnsConfigError(`rateLimit.${k.slice(0, 64)}`, 'not a rate limit setting (known: perSecond, burst)');
    const perSecond = int(r.perSecond, 'rateLimit.perSecond', 1, 10_000_000);
    out.rateLimit = { perSecond, burst: r.burst === undefined ? perSecond * 2 : int(r.burst, 'rateLimit.burst', 1, 10_000_000) };
  }
  if (raw.site !== undefined) out.site = parseSite(raw.site);
  return out;
}

/**
 * The settings a process runs with: defaults, then the file's, then the flags'. Throws
 * {@link DnsConfigError} for bad flags.
 */
export function resolveDnsSettings(file: Partial<DnsSettings>, flags: DnsFlagSettings): DnsSettings {
  const settings: DnsSettings = { ...defaultDnsSettings(), ...file };
  if (flags.listen !== undefined) settings.listen = parseDnsListen(flags.listen, '--listen');
  if (flags.zone !== undefined) settings.zone = validateZone(flags.zone);
  if (flags.clusters !== undefined) settings.clusters = commaList(flags.clusters, '--clusters');
  if (flags.upstream !== undefined) settings.upstreams = commaList(flags.upstream, '--upstream').map((u) => checkUpstream(u, '--upstream'));
  return settings;
}

/** `host:port` (IPv6 in brackets), port 0..65535 (0: a free one). */
export function parseDnsListen(value: string, field: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:\s]+)):(\d{1,5})$/.exec(value.trim());
  const port = Number(m?.[3]);
  if (!m || port > 65_535) throw new DnsConfigError(field, `expected host:port with a port from 0 to 65535, got "${value.slice(0, 100)}"`);
  const host = (m[1] ?? m[2]) as string;
  if (isIP(host) === 0) throw new DnsConfigError(field, `the host must be an IP address (each address is bound on its own), got "${host.slice(0, 100)}"`);
  return { host, port };
}

function parseSite(raw: unknown): DnsSiteSettings {
  if (!isMapping(raw)) throw new DnsConfigError('site', 'must be a mapping');
  for (const k of Object.keys(raw)) if (!(SITE_KEYS as readonly string[]).includes(k)) throw new DnsConfigError(`site.${k.slice(0, 64)}`, `not a site setting (known: ${SITE_KEYS.join(', ')})`);
  const defaults = defaultDnsSettings().site;
  const site: DnsSiteSettings = {
    labels: raw.labels === undefined ? defaults.labels : strings(raw.labels, 'site.labels'),
    trustedResolvers: raw.trustedResolvers === undefined ? [] : strings(raw.trustedResolvers, 'site.trustedResolvers').map((r) => checkCidr(r, 'site.trustedResolvers')),
    loopbackAs: raw.loopbackAs === undefined ? undefined : checkIp(str(raw.loopbackAs, 'site.loopbackAs'), 'site.loopbackAs'),
    protectThreshold: raw.protectThreshold === undefined ? 0 : fraction(raw.protectThreshold, 'site.protectThreshold'),
  };
  return site;
}

/** One upstream as {@link parseUpstream} reads it, the error naming `field`. */
function checkUpstream(value: string, field: string): string {
  try {
    parseUpstream(value);
  } catch (err) {
    if (err instanceof DnsConfigError) throw new DnsConfigError(field, err.message.replace(/^dns forward\.upstreams: /, ''));
    throw err;
  }
  return value.trim();
}

function checkIp(value: string, field: string): string {
  if (isIP(value) === 0) throw new DnsConfigError(field, `expected an IP address, got "${value.slice(0, 100)}"`);
  return value;
}

function checkCidr(value: string, field: string): string {
  const [ip, bits, extra] = value.trim().split('/');
  const max = isIP(ip ?? '') === 4 ? 32 : isIP(ip ?? '') === 6 ? 128 : 0;
  if (max === 0 || extra !== undefined || (bits !== undefined && (!/^\d{1,3}$/.test(bits) || Number(bits) > max))) {
    throw new DnsConfigError(field, `expected an IP address or CIDR (10.0.0.53, 10.0.0.0/24), got "${value.slice(0, 100)}"`);
  }
  return value.trim();
}

function commaList(value: string, field: string): string[] {
  const items = value.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (items.length === 0) throw new DnsConfigError(field, 'must name at least one item');
  return items;
}

function str(value: unknown, field: string, allowEmpty = false): string {
  if (typeof value !== 'string' || (!allowEmpty && value.trim() === '')) throw new DnsConfigError(field, `must be a ${allowEmpty ? '' : 'non-empty '}string, got ${describe(value)}`);
  return value;
}

function strings(value: unknown, field: string): string[] {
  if (!Array.isArray(value) || value.length === 0) throw new DnsConfigError(field, `must be a non-empty list of strings, got ${describe(value)}`);
  return value.map((v, i) => str(v, `${field}[${i}]`));
}

function int(value: unknown, field: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) throw new DnsConfigError(field, `must be a whole number from ${min} to ${max}, got ${describe(value)}`);
  return value;
}

function fraction(value: unknown, field: string): number {
  if (typeof value !== 'number' || !(value >= 0 && value <= 1)) throw new DnsConfigError(field, `must be a number from 0 to 1, got ${describe(value)}`);
  return value;
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return typeof value === 'string' ? `"${value.slice(0, 100)}"` : String(value);
}
