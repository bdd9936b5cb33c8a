import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { compileGlobsOf } from '../model/glob.js';
import { MARK_ORIGIN, serviceKeyString, type Instance, type ServiceKey } from '../model/types.js';
import { DnsConfigError } from './dns-config-error.js';
import {
  MAX_NAME_LENGTH,
  aliasName,
  canonicalName,
  emptyNamesAbove,
  instanceName,
  portLabel,
  portName,
  shortNames,
  validateZone,
} from './names.js';
import type { DnsInstance, DnsService, ZoneLookup, ZoneNode } from './zone.js';

/** TTL of a service's records when no override matches, seconds (CoreDNS uses 5 for cluster services). */
export const DEFAULT_DNS_TTL_SECONDS = 5;
/** Instance metadata: extra names for the service, comma-separated labels (`echo` -> `echo.<zone>`). */
export const META_DNS_ALIAS = 'dns.alias';
/** Instance metadata: the name of the instance's port for `_<name>._<proto>.<service>` (wins over the keys below). */
export const META_DNS_PORT_NAME = 'dns.port-name';
/** Instance metadata: `udp` for a UDP port; anything else or absent: `tcp`. */
export const META_DNS_PROTO = 'dns.proto';
/** Port-name metadata read when {@link META_DNS_PORT_NAME} is absent, in this order: Kubernetes' port name, Dubbo's protocol. */
export const PORT_NAME_FALLBACK_KEYS = ['k8s.port-name', 'protocol'] as const;

/** A TTL override: services whose registry name matches one of `services` (globs) get `seconds`. */
export interface DnsTtlOverride {
  services: readonly string[];
  seconds: number;
}

/** How the catalogue names and times its services. */
export interface DnsCatalogueOptions {
  /** The zone, e.g. `regsync.internal`; checked by `validateZone`. */
  zone: string;
  /** Default TTL, seconds (default {@link DEFAULT_DNS_TTL_SECONDS}). */
  ttlSeconds?: number | undefined;
  /** Per-service TTLs, first match wins (globs over the registry service name, as `src/model/glob.ts` reads them). */
  ttl?: readonly DnsTtlOverride[] | undefined;
  /**
   * Names from configuration: `{ echo: { namespace: 'public', group: 'DEFAULT_GROUP', name:
   * 'providers:com.acme.Echo:1.0.0:' } }` serves that service as `echo.<zone>` too. An alias names
   * a service key, not a cluster: DNS names are per service key (see {@link DnsCatalogue}). These
   * win over aliases from metadata.
   */
  aliases?: Readonly<Record<string, ServiceKey>> | undefined;
  logger?: Logger | undefined;
}

/** What one cluster says about a service beyond its instances. */
export interface DnsPutOptions {
  /** Extra aliases (labels) from that cluster's view of the service, like {@link META_DNS_ALIAS}. */
  aliases?: readonly string[] | undefined;
}

/** A name two or more services want: `owner` holds it, `waiting` get it in this order when it goes. */
export interface DnsCollision {
  name: string;
  owner: ServiceKey;
  waiting: ServiceKey[];
}

/** Counters for status and metrics, and for tests that check that a change stays local. */
export interface DnsCatalogueStats {
  services: number;
  names: number;
  collisions: number;
  /** Index writes since start (a claim, a release or a node replaced): a put costs its own names, never the catalogue's. */
  indexWrites: number;
}

const APEX: ZoneNode = { kind: 'apex' };
const EMPTY: ZoneNode = { kind: 'empty' };
/** Claim ranks: configuration aliases go first, every other claim in arrival order. */
const RANK_CONFIG = 0;
const RANK_OTHER = 1;

/** One service's wish for one name: a node (`empty` counts, it does not compete). */
interface Want {
  node: ZoneNode;
  rank: number;
}

interface Claim extends Want {
  owner: string;
  service: ServiceKey;
}

/** A name of the index: who wants it (the first one holds it), and how many services need it as an empty non-terminal. */
interface Entry {
  claims: Claim[];
  empties: number;
}

/** One service key: what each cluster said, and which names it has in the index. */
interface Held {
  key: ServiceKey;
  byCluster: Map<string, { instances: readonly Instance[]; aliases: readonly string[] }>;
  names: Map<string, Want>;
  service: DnsService | undefined;
}

/**
 * The zone's forward index: every DNS name regsync serves -> what it names, kept up to date one
 * service at a time.
 *
 * Decisions:
 * - One DNS service per service key (namespace, group, name), whatever cluster it was read from:
 *   synced copies of one service in two registries are one service to a client. Its instances are
 *   the union over the clusters that were `put`, de-duplicated by `ip:port`; an original wins over
 *   a copy (an instance with {@link MARK_ORIGIN}), otherwise the cluster put first. `cluster` on the
 *   {@link DnsService} is the first cluster put that holds it.
 * - Names: canonical, the short forms of default-group services, aliases (configuration, then the
 *   {@link META_DNS_ALIAS} metadata of its instances and {@link DnsPutOptions.aliases}), an
 *   instance name per address under the canonical name, and `_<port>._<proto>` names under the
 *   canonical name and the short forms. Their empty non-terminals (`svc.<zone>`,
 *   `<ns>.svc.<zone>`, `<group>.<ns>.svc.<zone>`, `_<proto>.<name>`) exist while a service is below.
 * - Collisions (two services, or an alias and a service, wanting one name) are never silent: the
 *   first claimant holds the name, the others wait in order and are listed by {@link collisions}
 *   (and logged once); when the holder goes, the next one gets the name. A service that does not
 *   hold a name has none of the names below it, so an SRV never points into another service.
 *   An empty non-terminal never competes: a service name at the same place simply has data.
 * - Ports: one per distinct (port name, proto, number) among the instances, named by
 *   {@link META_DNS_PORT_NAME}, else {@link PORT_NAME_FALLBACK_KEYS}; instances without any get
 *   no port name. The `port` node of `_<name>._<proto>` carries the first such port.
 * - Names longer than 253 characters cannot be sent; they are left out and logged once.
 * - Serve stale: {@link markStale} sets `staleSince` on every service that cluster holds (the
 *   earliest, when several of its clusters are stale); {@link markFresh} clears it. Both rebuild
 *   those services: rare events, linear in the services of the catalogue.
 *
 * Cost: a put or remove rebuilds that one service and writes only the index names it gains, loses
 * or changes (plus, on a hand-over, the names of the service that takes a name over); lookups are
 * one map read.
 */
export class DnsCatalogue implements ZoneLookup {
  readonly zone: string;
  private readonly defaultTtl: number;
  private readonly ttlRules: Array<{ match: (name: string) => boolean; seconds: number }>;
  private readonly configAliases = new Map<string, string[]>();
  private readonly log: Logger;
  private readonly index = new Map<string, Entry>();
  private readonly held = new Map<string, Held>();
  private readonly colliding = new Set<string>();
  private readonly warned = new Set<string>();
  private readonly stale = new Map<string, number>();
  private writes = 0;

  constructor(options: DnsCatalogueOptions) {
    this.zone = validateZone(options.zone);
    this.defaultTtl = checkTtl('ttlSeconds', options.ttlSeconds ?? DEFAULT_DNS_TTL_SECONDS);
    this.ttlRules = (options.ttl ?? []).map((rule, i) => ({
      match: compileGlobsOf(`ttl[${i}].services`, rule.services),
      seconds: checkTtl(`ttl[${i}].seconds`, rule.seconds),
    }));
    for (const [alias, key] of Object.entries(options.aliases ?? {})) {
      const name = aliasName(alias, this.zone, `aliases.${alias}`);
      const id = idOf(key);
      this.configAliases.set(id, [...(this.configAliases.get(id) ?? []), name]);
    }
    this.log = (options.logger ?? silentLogger()).child({ component: 'dns-catalogue' });
  }

  /** What `name` is (any case, with or without the trailing dot); undefined: it does not exist. */
  find(name: string): ZoneNode | undefined {
    let n = name.endsWith('.') ? name.slice(0, -1) : name;
    if (/[A-Z]/.test(n)) n = n.replace(/[A-Z]+/g, (s) => s.toLowerCase());
    if (n === this.zone) return APEX;
    const entry = this.index.get(n);
    if (entry === undefined) return undefined;
    return entry.claims[0]?.node ?? EMPTY;
  }

  /**
   * What `cluster` holds of `service` now, replacing what it said before (an empty list keeps the
   * service, with no instances: NODATA rather than NXDOMAIN, which resolvers would cache for the
   * whole subtree). `instances` are kept by reference: do not change them afterwards.
   */
  put(cluster: string, service: ServiceKey, instances: readonly Instance[], options: DnsPutOptions = {}): void {
    const id = idOf(service);
    let held = this.held.get(id);
    if (held === undefined) {
      held = { key: { namespace: service.namespace, group: service.group, name: service.name }, byCluster: new Map(), names: new Map(), service: undefined };
      this.held.set(id, held);
    }
    held.byCluster.set(cluster, { instances, aliases: options.aliases ?? [] });
    this.refresh(id);
  }

  /** `cluster` no longer has `service`; the service goes when no cluster has it. */
  remove(cluster: string, service: ServiceKey): void {
    const id = idOf(service);
    const held = this.held.get(id);
    if (held?.byCluster.delete(cluster)) this.refresh(id);
  }

  /** Every service of `cluster` is served from its last good read since `since` (ms since the epoch). */
  markStale(cluster: string, since: number): void {
    if (this.stale.get(cluster) === since) return;
    this.stale.set(cluster, since);
    this.refreshCluster(cluster);
  }

  /** `cluster` is read again: its services are fresh (unless another of their clusters is stale). */
  markFresh(cluster: string): void {
    if (this.stale.delete(cluster)) this.refreshCluster(cluster);
  }

  /** The service as DNS serves it, or undefined. */
  service(key: ServiceKey): DnsService | undefined {
    return this.held.get(idOf(key))?.service;
  }

  /** Names wanted by more than one service, with who holds each and who waits. */
  collisions(): DnsCollision[] {
    const out: DnsCollision[] = [];
    for (const name of this.colliding) {
      const claims = this.index.get(name)?.claims ?? [];
      const [first, ...rest] = claims;
      if (first !== undefined) out.push({ name, owner: first.service, waiting: rest.map((c) => c.service) });
    }
    return out;
  }

  stats(): DnsCatalogueStats {
    return { services: this.held.size, names: this.index.size, collisions: this.colliding.size, indexWrites: this.writes };
  }

  private refreshCluster(cluster: string): void {
    for (const [id, held] of this.held) if (held.byCluster.has(cluster)) this.refresh(id);
  }

  /** Rebuilds one service and brings the index in line with it; then the services that gained or lost a name. */
  private refresh(id: string): void {
    const handovers = new Set<string>();
    this.apply(id, handovers);
    // A service that gained or lost a name gains or loses the names below it: one more pass each,
    // which cannot hand over a name again (names below are unique to their parent).
    for (const other of handovers) if (other !== id) this.apply(other, new Set());
  }

  private apply(id: string, handovers: Set<string>): void {
    const held = this.held.get(id);
    if (held === undefined) return;
    const wants = held.byCluster.size === 0 ? new Map<string, Want>() : this.build(id, held);
    for (const [name, old] of held.names) {
      const want = wants.get(name);
      if (want === undefined || isEmpty(want) !== isEmpty(old)) this.release(name, id, old, handovers);
    }
    for (const [name, want] of wants) {
      const old = held.names.get(name);
      if (old === undefined || isEmpty(want) !== isEmpty(old)) this.claim(name, id, held.key, want, handovers);
      else if (!isEmpty(want) && old.node !== want.node) this.replace(name, id, want.node);
    }
    held.names = wants;
    if (held.byCluster.size === 0) this.held.delete(id);
  }

  /** The names `held` wants now, and the DNS service they name. */
  private build(id: string, held: Held): Map<string, Want> {
    const service = this.dnsService(held);
    held.service = service;
    const wants = new Map<string, Want>();
    const want = (name: string | undefined, node: ZoneNode, rank = RANK_OTHER) => {
      if (name === undefined || wants.get(name)?.node.kind === 'service') return;
      if (name.length > MAX_NAME_LENGTH) {
        this.warnOnce(`long\0${name}`, { service: serviceKeyString(held.key), name }, 'DNS name longer than 253 characters: not served');
        return;
      }
      if (node.kind === 'empty' && wants.has(name)) return;
      wants.set(name, { node, rank });
    };
    for (const name of emptyNamesAbove(held.key, this.zone)) want(name, EMPTY);
    const serviceNode: ZoneNode = { kind: 'service', service };
    for (const name of this.configAliases.get(id) ?? []) want(name, serviceNode, RANK_CONFIG);
    for (const name of this.metadataAliases(held)) want(name, serviceNode);
    const owners = [service.name, ...shortNames(held.key, this.zone)];
    for (const owner of owners) want(owner, serviceNode);
    // Only below names this service holds (or is about to hold): see the class comment.
    const holds = (name: string) => {
      const first = this.index.get(name)?.claims[0];
      return first === undefined || first.owner === id;
    };
    const portNodes = new Map<string, ZoneNode>();
    for (const port of service.ports) {
      const key = `${portLabel(port.name)}/${port.proto}`;
      if (!portNodes.has(key)) portNodes.set(key, { kind: 'port', service, port });
    }
    for (const owner of owners) {
      if (!wants.has(owner) || !holds(owner)) continue;
      if (owner === service.name) {
        for (const instance of service.instances) {
          const name = instanceName(instance.ip, owner);
          if (name !== undefined && !wants.has(name)) want(name, { kind: 'instance', service, instance });
        }
      }
      for (const node of portNodes.values()) {
        if (node.kind !== 'port') continue;
        want(`_${node.port.proto}.${owner}`, EMPTY);
        want(portName(node.port, owner), node);
      }
    }
    return wants;
  }

  private dnsService(held: Held): DnsService {
    const byAddress = new Map<string, Instance>();
    let cluster: string | undefined;
    let staleSince: number | undefined;
    for (const [c, view] of held.byCluster) {
      const since = this.stale.get(c);
      if (since !== undefined) staleSince = staleSince === undefined ? since : Math.min(staleSince, since);
      for (const instance of view.instances) {
        cluster ??= c;
        const address = `${instance.ip}:${instance.port}`;
        const seen = byAddress.get(address);
        if (seen === undefined || (seen.metadata[MARK_ORIGIN] !== undefined && instance.metadata[MARK_ORIGIN] === undefined)) byAddress.set(address, instance);
      }
    }
    const instances: DnsInstance[] = [];
    const ports: Array<{ name: string; proto: 'tcp' | 'udp'; port: number }> = [];
    const seenPorts = new Set<string>();
    for (const i of byAddress.values()) {
      instances.push({ ip: i.ip, port: i.port, weight: i.weight, healthy: i.healthy, enabled: i.enabled, metadata: i.metadata });
      const name = portNameOf(i.metadata);
      if (name === undefined) continue;
      const proto = i.metadata[META_DNS_PROTO] === 'udp' ? 'udp' : 'tcp';
      const key = `${name}/${proto}/${i.port}`;
      if (seenPorts.has(key)) continue;
      seenPorts.add(key);
      ports.push({ name, proto, port: i.port });
    }
    const name = held.key.name;
    const ttlSeconds = this.ttlRules.find((r) => r.match(name))?.seconds ?? this.defaultTtl;
    return {
      name: canonicalName(held.key, this.zone),
      service: held.key,
      cluster: cluster ?? held.byCluster.keys().next().value ?? '',
      instances,
      ttlSeconds,
      ports,
      staleSince,
    };
  }

  /** Aliases from instance metadata and put options; a malformed one is logged once and left out. */
  private metadataAliases(held: Held): string[] {
    const labels = new Set<string>();
    for (const view of held.byCluster.values()) {
      for (const a of view.aliases) labels.add(a.trim());
      for (const i of view.instances) {
        const value = i.metadata[META_DNS_ALIAS];
        if (value !== undefined) for (const a of value.split(',')) labels.add(a.trim());
      }
    }
    const names: string[] = [];
    for (const label of labels) {
      if (label === '') continue;
      try {
        names.push(aliasName(label, this.zone, META_DNS_ALIAS));
      } catch (err) {
        if (!(err instanceof DnsConfigError)) throw err;
        this.warnOnce(`alias\0${serviceKeyString(held.key)}\0${label}`, { service: serviceKeyString(held.key), alias: label }, `DNS alias not served: ${err.message}`);
      }
    }
    return names;
  }

  private claim(name: string, owner: string, service: ServiceKey, want: Want, handovers: Set<string>): void {
    this.writes += 1;
    let entry = this.index.get(name);
    if (entry === undefined) {
      entry = { claims: [], empties: 0 };
      this.index.set(name, entry);
    }
    if (isEmpty(want)) {
      entry.empties += 1;
      return;
    }
    const before = entry.claims[0];
    let at = entry.claims.length;
    while (at > 0 && (entry.claims[at - 1]?.rank ?? 0) > want.rank) at -= 1;
    entry.claims.splice(at, 0, { owner, service, node: want.node, rank: want.rank });
    if (at === 0 && before !== undefined) handovers.add(before.owner);
    if (entry.claims.length > 1) this.collide(name, entry);
  }

  private release(name: string, owner: string, old: Want, handovers: Set<string>): void {
    this.writes += 1;
    const entry = this.index.get(name);
    if (entry === undefined) return;
    if (isEmpty(old)) entry.empties -= 1;
    else {
      const at = entry.claims.findIndex((c) => c.owner === owner);
      if (at !== -1) entry.claims.splice(at, 1);
      this.warned.delete(`collision\0${name}\0${owner}`);
      const next = entry.claims[0];
      if (at === 0 && next !== undefined) {
        handovers.add(next.owner);
        this.log.info({ name, service: serviceKeyString(next.service) }, 'DNS name handed over to the next service that wants it');
      }
      if (entry.claims.length < 2) this.colliding.delete(name);
    }
    if (entry.claims.length === 0 && entry.empties === 0) this.index.delete(name);
  }

  private replace(name: string, owner: string, node: ZoneNode): void {
    this.writes += 1;
    const claim = this.index.get(name)?.claims.find((c) => c.owner === owner);
    if (claim !== undefined) claim.node = node;
  }

  private collide(name: string, entry: Entry): void {
    this.colliding.add(name);
    const [holder, ...rest] = entry.claims;
    if (holder === undefined) return;
    for (const c of rest) {
      this.warnOnce(
        `collision\0${name}\0${c.owner}`,
        { name, holder: serviceKeyString(holder.service), service: serviceKeyString(c.service) },
        'DNS name wanted by two services: the holder keeps it, the other waits',
      );
    }
  }

  private warnOnce(key: string, fields: Record<string, string>, message: string): void {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.log.warn(fields, message);
  }
}

function isEmpty(want: Want): boolean {
  return want.node.kind === 'empty';
}

function idOf(key: ServiceKey): string {
  return JSON.stringify([key.namespace, key.group, key.name]);
}

function portNameOf(metadata: Readonly<Record<string, string>>): string | undefined {
  for (const key of [META_DNS_PORT_NAME, ...PORT_NAME_FALLBACK_KEYS]) {
    const value = metadata[key]?.trim();
    if (value !== undefined && value !== '') return value;
  }
  return undefined;
}

function checkTtl(field: string, seconds: number): number {
  if (!Number.isInteger(seconds) || seconds < 0 || seconds > 2 ** 31 - 1) throw new DnsConfigError(field, `TTL must be a whole number of seconds from 0 to 2^31-1, got ${seconds}`);
  return seconds;
}

