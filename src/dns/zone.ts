import type { ServiceKey } from '../model/types.js';

/*
 * What regsync's DNS server answers from: the zone's names, resolved through a forward index (DNS
 * name -> what it names), never by parsing a name back into a registry key. The catalogue builds
 * the index from the synced services (src/dns/catalogue.ts); the responder (src/dns/responder.ts)
 * turns queries into answers from it. Names here are lowercase, absolute, without the trailing dot.
 */

/** One instance as DNS shows it. */
export interface DnsInstance {
  ip: string;
  port: number;
  /** Nacos weight (a float; 0 = takes no traffic). */
  weight: number;
  healthy: boolean;
  enabled: boolean;
  /** Metadata and CMDB labels (site, region, zone, ...), for TXT and same-site choice. */
  metadata: Readonly<Record<string, string>>;
}

/** One service under its DNS name. */
export interface DnsService {
  /** Canonical name, e.g. `orders.default-group.public.svc.regsync.internal`. */
  name: string;
  /** The registry service it is, and where it was read. */
  service: ServiceKey;
  cluster: string;
  instances: readonly DnsInstance[];
  /** TTL of its records, seconds. */
  ttlSeconds: number;
  /** Port names for the `_<port>._<proto>.<name>` SRV form (Dubbo `protocol`, EndpointSlice port names). */
  ports: ReadonlyArray<{ name: string; proto: 'tcp' | 'udp'; port: number }>;
  /**
   * Served from the last good read while its registry cannot be read (serve stale), since when
   * (ms since the epoch); undefined when fresh.
   */
  staleSince?: number | undefined;
}

/** What a name in the zone is. */
export type ZoneNode =
  /** The zone apex: SOA and NS. */
  | { kind: 'apex' }
  /** A service's canonical name, short form or alias: A/AAAA, SRV, TXT (none). */
  | { kind: 'service'; service: DnsService }
  /** `_<port>._<proto>.<service>`: SRV of that port only. */
  | { kind: 'port'; service: DnsService; port: { name: string; proto: 'tcp' | 'udp'; port: number } }
  /** `<dashed-ip>.<service>`: the SRV target of one instance: its A/AAAA, and TXT with its metadata. */
  | { kind: 'instance'; service: DnsService; instance: DnsInstance }
  /** A name with names below it but nothing of its own (`svc.<zone>`): NODATA, never NXDOMAIN. */
  | { kind: 'empty' };

/** The zone as the responder sees it. */
export interface ZoneLookup {
  /** The zone, e.g. `regsync.internal`. */
  readonly zone: string;
  /**
   * What `name` (lowercase, absolute, no trailing dot) is; undefined: it does not exist (NXDOMAIN).
   * The responder asks with a client's name spelt by `lookupKey` (src/dns/raw-name.ts): an octet
   * that is `.`, `\` or not printable ASCII comes as `\DDD`, which no name the catalogue indexes holds.
   */
  find(name: string): ZoneNode | undefined;
}
