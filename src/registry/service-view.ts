import { createHash } from 'node:crypto';
import { selectProviders, type LabelSource } from './label-selector.js';
import { groupedName, instanceKey, type StoredInstance, type StoredService } from './naming-store.js';

/** Timings a host entry reports to clients; they mirror the registry's expiry settings. */
export interface HostTimings {
  beatIntervalMs: number;
  unhealthyAfterMs: number;
  expireAfterMs: number;
}

/** An instance in the JSON shape Nacos uses for `hosts` entries and v3 instance lists. */
export interface HostView {
  instanceId: string;
  ip: string;
  port: number;
  weight: number;
  healthy: boolean;
  enabled: boolean;
  ephemeral: boolean;
  clusterName: string;
  serviceName: string;
  metadata: Record<string, string>;
  instanceHeartBeatInterval: number;
  instanceHeartBeatTimeOut: number;
  ipDeleteTimeout: number;
  instanceIdGenerator: string;
}

/** The ServiceInfo document of `GET /nacos/v1/ns/instance/list` and of UDP `dom` pushes. */
export interface ServiceInfoView {
  name: string;
  groupName: string;
  clusters: string;
  cacheMillis: number;
  hosts: HostView[];
  lastRefTime: number;
  checksum: string;
  allIPs: boolean;
  reachProtectionThreshold: boolean;
  valid: boolean;
}

export interface HostFilter {
  /** Comma list of cluster names; empty means all clusters. */
  clusters: string;
  healthyOnly: boolean;
  /** Client-facing lists leave disabled instances out, as Nacos does; admin lists keep them. */
  enabledOnly: boolean;
}

/**
 * Who is asking, for the service's selector: client-facing lists pass it, admin lists do not (they
 * always show every instance).
 */
export interface Consumer {
  /** The consumer's address as the request names it (`clientIP` on v1, `ip` on v2); blank = unknown. */
  ip: string | undefined;
  /** Where labels come from; without one, consumers have no labels and the selector selects all. */
  labels: LabelSource | undefined;
}

export function hostView(service: StoredService, instance: StoredInstance, timings: HostTimings): HostView {
  const grouped = groupedName(service.groupName, service.name);
  return {
    instanceId: instance.instanceId ?? `${instanceKey(instance.ip, instance.port, instance.clusterName)}#${grouped}`,
    ip: instance.ip,
    port: instance.port,
    weight: instance.weight,
    healthy: instance.healthy,
    enabled: instance.enabled,
    ephemeral: instance.ephemeral,
    clusterName: instance.clusterName,
    serviceName: grouped,
    metadata: { ...instance.metadata },
    instanceHeartBeatInterval: timings.beatIntervalMs,
    instanceHeartBeatTimeOut: timings.unhealthyAfterMs,
    ipDeleteTimeout: timings.expireAfterMs,
    instanceIdGenerator: 'simple',
  };
}

/**
 * Instances of a service that pass a filter, in a stable order (ip, port, cluster). With a consumer,
 * the service's selector narrows the cluster/enabled-filtered instances before `healthyOnly` applies,
 * the order Nacos uses.
 */
export function selectHosts(
  service: StoredService | undefined,
  filter: HostFilter,
  timings: HostTimings,
  consumer?: Consumer,
): HostView[] {
  if (!service) return [];
  const clusters = filter.clusters
    .split(',')
    .map((c) => c.trim())
    .filter((c) => c !== '');
  const candidates: StoredInstance[] = [];
  for (const i of service.instances.values()) {
    if (clusters.length > 0 && !clusters.includes(i.clusterName)) continue;
    if (filter.enabledOnly && !i.enabled) continue;
    candidates.push(i);
  }
  const visible = consumer ? selectProviders(service.selector, consumer.ip, candidates, consumer.labels) : candidates;
  const selected = filter.healthyOnly ? visible.filter((i) => i.healthy) : visible;
  // One precomputed key per instance (ip, then port, then cluster): a single string comparison per
  // step of the sort instead of a chain of localeCompare calls.
  const keyed = selected.map((i) => ({ i, key: `${i.ip}\u0000${String(i.port).padStart(5, '0')}\u0000${i.clusterName}` }));
  keyed.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return keyed.map(({ i }) => hostView(service, i, timings));
}

/**
 * Builds the ServiceInfo a v1 list or a push carries. `lastRefTime` is the service's last change, so
 * two reads of an unchanged service carry the same value and the same checksum.
 */
export function serviceInfoView(
  service: StoredService | undefined,
  ref: { groupName: string; name: string },
  filter: HostFilter,
  timings: HostTimings & { cacheMillis: number },
  consumer?: Consumer,
): ServiceInfoView {
  const hosts = selectHosts(service, filter, timings, consumer);
  return {
    name: groupedName(ref.groupName, ref.name),
    groupName: ref.groupName,
    clusters: filter.clusters,
    cacheMillis: timings.cacheMillis,
    hosts,
    lastRefTime: service?.lastRefTime ?? 0,
    checksum: checksumOf(hosts),
    allIPs: false,
    reachProtectionThreshold: false,
    valid: true,
  };
}

function checksumOf(hosts: HostView[]): string {
  // One string hashed once per service rather than three hash updates per instance.
  let text = '';
  for (const h of hosts) {
    const metadata = Object.entries(h.metadata).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    text += `${h.ip}:${h.port}:${h.clusterName}:${h.weight}:${h.healthy}:${h.enabled}:${h.ephemeral}:${JSON.stringify(metadata)}\n`;
  }
  return createHash('md5').update(text).digest('hex');
}
