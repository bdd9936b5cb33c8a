import { createHash } from 'node:crypto';
import { isIPv4, isIPv6 } from 'node:net';
import type { ServiceKey } from '../model/types.js';
import { DnsConfigError } from './dns-config-error.js';

/*
 * regsync's DNS names (src/dns/NAMES.md has the scheme with examples). Every registry part (service,
 * group, namespace) becomes exactly ONE label, so the number of labels tells the forms apart:
 *
 *   canonical   <svc>.<group>.<ns>.svc.<zone>
 *   short       <svc>.<ns>.svc.<zone>          (default group only)
 *               <svc>.svc.<zone>               (default group and public namespace only)
 *   instance    <dashed-ip>.<canonical>
 *   port        _<port-name>._<proto>.<canonical or short>
 *
 * Site form: `<name>.<site>.site.<zone>` pins a site (the responder reads the pair off the name,
 * src/dns/site.ts picks the instances); {@link RESERVED_ZONE_LABELS} keeps `site` from being an
 * alias so that the pair stays free.
 *
 * The mapping is one way: names are resolved through the catalogue's index (name -> service),
 * never parsed back into registry keys.
 */

/** Longest DNS label, octets (RFC 1035 §2.3.4). */
export const MAX_LABEL_LENGTH = 63;
/** Longest DNS name in presentation form without the trailing dot (255 octets on the wire). */
export const MAX_NAME_LENGTH = 253;
/** The label that holds every service name: `<...>.svc.<zone>`, as in Kubernetes. */
export const SVC_LABEL = 'svc';
/** The label the empty Nacos namespace (the `public` one, whose id is empty) gets. */
export const PUBLIC_NAMESPACE_LABEL = 'public';
/** The label of Nacos' `DEFAULT_GROUP` (`mapLabel('DEFAULT_GROUP')`): the group the short forms stand for. */
export const DEFAULT_GROUP_LABEL = 'default-group';
/** Labels right under the zone that belong to the scheme (`svc`, and `site` for the site form), never aliases. */
export const RESERVED_ZONE_LABELS: ReadonlySet<string> = new Set([SVC_LABEL, 'site']);

const HASH_HEX = 8;
const VALID_LABEL = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$/;

/** Is `label` a DNS label regsync serves as is: lowercase letters, digits and inner `-`, at most 63? */
export function isDnsLabel(label: string): boolean {
  return label.length <= MAX_LABEL_LENGTH && VALID_LABEL.test(label);
}

/** 8 hex digits of the SHA-256 of `raw` (UTF-8): the same suffix kubeServiceName uses, stable across processes and versions. */
export function nameHash(raw: string): string {
  return createHash('sha256').update(raw, 'utf8').digest('hex').slice(0, HASH_HEX);
}

/**
 * One registry name part as one DNS label.
 *
 * - A name that already is a valid lowercase label is kept exactly (Kubernetes Service names,
 *   punycode `xn--` labels and `a--b` stay what they are, so names read from Kubernetes agree).
 * - Otherwise: ASCII letters are lowercased; `_ : @ / .`, `-` and white space become `-`; runs of `-`
 *   collapse into one; leading and trailing `-` are trimmed.
 * - Any other character (non-ASCII, `+`, `#`, ...) also becomes `-`, and marks the name as lossy.
 * - A lossy name, a result longer than `max` or an empty one is cut to leave room and gets
 *   `-<8 hex of the SHA-256 of the raw name>` (just the 8 hex digits when nothing is left), so that
 *   `名前` and `なまえ`, or two 100-character names that share their first 54 characters, keep
 *   apart. Names that differ only in case or in the separators above (`Orders_V2`, `orders.v2`) map
 *   to the same label on purpose: the catalogue reports that as a collision.
 *
 * Linear in the length of `raw`, whatever it holds (names come from anyone who can register).
 */
export function mapLabel(raw: string, max: number = MAX_LABEL_LENGTH): string {
  return mapText(raw, max, raw);
}

/** {@link mapLabel} of `raw`, with the hash taken over `hashOf` (the full registry name). */
function mapText(raw: string, max: number, hashOf: string): string {
  if (raw.length <= max && VALID_LABEL.test(raw)) return raw;
  let out = '';
  let lossy = false;
  let dash = true; // at the start, a '-' would be trimmed anyway
  for (let i = 0; i < raw.length; i += 1) {
    const c = raw.charCodeAt(i);
    if ((c >= 0x61 && c <= 0x7a) || (c >= 0x30 && c <= 0x39)) {
      out += raw[i];
      dash = false;
    } else if (c >= 0x41 && c <= 0x5a) {
      out += String.fromCharCode(c + 0x20);
      dash = false;
    } else {
      if (!isSeparator(c)) lossy = true;
      if (!dash) out += '-';
      dash = true;
    }
    // Past this length the result is cut and hashed anyway: stop copying a huge name.
    if (out.length > max + 1) {
      lossy = true;
      break;
    }
  }
  if (out.endsWith('-')) out = out.slice(0, -1);
  if (!lossy && out !== '' && out.length <= max) return out;
  const hash = nameHash(hashOf);
  const kept = out.slice(0, max - HASH_HEX - 1).replace(/-+$/, '');
  return kept === '' ? hash : `${kept}-${hash}`;
}

/** `_ : @ / .`, `-` and white space: the separators registries use inside names, mapped to `-` without a hash. */
function isSeparator(c: number): boolean {
  return c === 0x5f || c === 0x3a || c === 0x40 || c === 0x2f || c === 0x2e || c === 0x2d || c === 0x20 || (c >= 0x09 && c <= 0x0d);
}

/**
 * The label of a service name. A Dubbo key `providers:<interface>[:<version>[:<group>]]` (the names
 * the ZooKeeper adapter's Dubbo layout and Dubbo >= 2.7.3 in Nacos use) becomes one label from its
 * non-empty parts, without the `providers` category: `providers:com.acme.Echo:1.0.0:g1` ->
 * `com-acme-echo-1-0-0-g1`, `providers:com.acme.Echo::` -> `com-acme-echo`. Anything else (a bare
 * interface, `consumers:...`, a Nacos name) goes through {@link mapLabel} as it is.
 */
export function serviceLabel(name: string): string {
  const dubbo = dubboParts(name);
  return dubbo === undefined ? mapLabel(name) : mapDubbo(name, dubbo);
}

function dubboParts(name: string): string[] | undefined {
  if (!name.startsWith('providers:')) return undefined;
  const parts = name.split(':', 5);
  if (parts.length > 4 || parts[1] === '') return undefined;
  return parts.slice(1).filter((p) => p !== '');
}

function mapDubbo(raw: string, parts: string[]): string {
  // Hashed (when it must be) over the whole key, so that the suffix names the registry service.
  return mapText(parts.join('-'), MAX_LABEL_LENGTH, raw);
}

/** The label of a group: `DEFAULT_GROUP` -> `default-group`; the empty group (the default one, as the model has it) too. */
export function groupLabel(group: string): string {
  return group === '' ? DEFAULT_GROUP_LABEL : mapLabel(group);
}

/** The label of a namespace: the empty Nacos namespace (the public one) -> `public`. */
export function namespaceLabel(namespace: string): string {
  return namespace === '' ? PUBLIC_NAMESPACE_LABEL : mapLabel(namespace);
}

/** `<svc>.<group>.<ns>.svc.<zone>`: the name every service has (while no other service holds it). */
export function canonicalName(service: ServiceKey, zone: string): string {
  return `${serviceLabel(service.name)}.${groupLabel(service.group)}.${namespaceLabel(service.namespace)}.${SVC_LABEL}.${zone}`;
}

/**
 * The short forms a service also answers under, most specific first: `<svc>.<ns>.svc.<zone>` for a
 * service of the default group, plus `<svc>.svc.<zone>` when it is also in the public namespace;
 * none for other groups (a short name must not depend on which group came first).
 */
export function shortNames(service: ServiceKey, zone: string): string[] {
  if (groupLabel(service.group) !== DEFAULT_GROUP_LABEL) return [];
  const svc = serviceLabel(service.name);
  const ns = namespaceLabel(service.namespace);
  const names = [`${svc}.${ns}.${SVC_LABEL}.${zone}`];
  if (ns === PUBLIC_NAMESPACE_LABEL) names.push(`${svc}.${SVC_LABEL}.${zone}`);
  return names;
}

/**
 * The empty non-terminals above a service's names, from the top: `svc.<zone>`, `<ns>.svc.<zone>`,
 * `<group>.<ns>.svc.<zone>`. They exist (NODATA, never NXDOMAIN) while any service is below them.
 */
export function emptyNamesAbove(service: ServiceKey, zone: string): string[] {
  const ns = `${namespaceLabel(service.namespace)}.${SVC_LABEL}.${zone}`;
  return [`${SVC_LABEL}.${zone}`, ns, `${groupLabel(service.group)}.${ns}`];
}

/**
 * The label of an instance address: IPv4 `10.0.0.1` -> `10-0-0-1`; IPv6 as its eight hex groups,
 * lowercase without leading zeros, joined with `-` (`2001:db8::1` -> `2001-db8-0-0-0-0-0-1`), so
 * that every spelling of one address gives one label. Undefined for anything that is not an IP
 * address (a host name, an IPv6 address with a zone index): such instances get no instance name.
 */
export function addressLabel(ip: string): string | undefined {
  if (isIPv4(ip)) return ip.split('.').map((p) => String(Number(p))).join('-');
  if (!isIPv6(ip) || ip.includes('%')) return undefined;
  const groups = ipv6Groups(ip.toLowerCase());
  if (groups?.length !== 8) return undefined;
  return groups.map((g) => g.toString(16)).join('-');
}

function ipv6Groups(ip: string): number[] | undefined {
  let text = ip;
  const lastColon = text.lastIndexOf(':');
  const last = text.slice(lastColon + 1);
  if (last.includes('.')) {
    // An embedded IPv4 address (`::ffff:1.2.3.4`) is the last two groups.
    const [a = 0, b = 0, c = 0, d = 0] = last.split('.').map(Number);
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const parse = (s: string) => (s === '' ? [] : s.split(':').map((g) => parseInt(g, 16)));
  const double = text.indexOf('::');
  if (double === -1) return parse(text);
  const head = parse(text.slice(0, double));
  const rest = parse(text.slice(double + 2));
  const fill = 8 - head.length - rest.length;
  return fill < 0 ? undefined : [...head, ...new Array<number>(fill).fill(0), ...rest];
}

/** `<dashed-ip>.<owner>`, the SRV target of one instance; undefined when `ip` is no IP address. */
export function instanceName(ip: string, owner: string): string | undefined {
  const label = addressLabel(ip);
  return label === undefined ? undefined : `${label}.${owner}`;
}

/** The label of a port name without its `_` (at most 62 characters, so that `_<label>` fits one label). */
export function portLabel(portName: string): string {
  return mapLabel(portName, MAX_LABEL_LENGTH - 1);
}

/** `_<port-name>._<proto>.<owner>` (RFC 2782, as Kubernetes names ports). */
export function portName(port: { name: string; proto: 'tcp' | 'udp' }, owner: string): string {
  return `_${portLabel(port.name)}._${port.proto}.${owner}`;
}

/**
 * The zone as the catalogue keeps it: lowercase, without a trailing dot. Throws
 * {@link DnsConfigError} for a name that is not a DNS name of letters, digits and inner `-`
 * (labels of 1 to 63 characters, at most 253 in all), and for `local` and anything under it
 * (multicast DNS, RFC 6762, which includes Kubernetes' `cluster.local`): answers there would fight
 * with mDNS and with the cluster's own DNS. `.internal` is the suffix reserved for private use.
 */
export function validateZone(zone: string): string {
  const z = (zone.endsWith('.') ? zone.slice(0, -1) : zone).toLowerCase();
  if (z === '') throw new DnsConfigError('zone', 'empty; use a name such as regsync.internal');
  if (z.length > MAX_NAME_LENGTH) throw new DnsConfigError('zone', `longer than ${MAX_NAME_LENGTH} characters`);
  for (const label of z.split('.')) {
    if (!isDnsLabel(label)) {
      throw new DnsConfigError('zone', `${JSON.stringify(zone)} is not a DNS name: label ${JSON.stringify(label)} must be 1-63 letters, digits or inner '-'`);
    }
  }
  if (z === 'local' || z.endsWith('.local')) {
    throw new DnsConfigError('zone', `${JSON.stringify(zone)} is under .local, which belongs to multicast DNS (RFC 6762) and Kubernetes (cluster.local); use a name such as regsync.internal`);
  }
  return z;
}

/**
 * An alias as the catalogue serves it, `<label>.<zone>`. Throws {@link DnsConfigError} unless
 * `alias` is one valid DNS label (after lowercasing) that the scheme does not reserve (`svc`,
 * `site`): an alias is a name someone chose to be pretty, so it is refused rather than mangled.
 */
export function aliasName(alias: string, zone: string, field = 'alias'): string {
  const label = alias.toLowerCase();
  if (!isDnsLabel(label)) throw new DnsConfigError(field, `${JSON.stringify(alias)} is not one DNS label (1-63 letters, digits or inner '-')`);
  if (RESERVED_ZONE_LABELS.has(label)) throw new DnsConfigError(field, `${JSON.stringify(alias)} is reserved by the naming scheme`);
  return `${label}.${zone}`;
}
