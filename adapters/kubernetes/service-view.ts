import { DEFAULT_INSTANCE_CLUSTER, instanceId, type Instance } from '../../src/model/index.js';
import { compare, decodeEntries } from './instance-annotation.js';
import {
  ANNOTATION_INSTANCES,
  ANNOTATION_METADATA,
  ANNOTATION_META_PREFIX,
  ANNOTATION_PORT,
  ANNOTATION_SERVICE_NAME,
  ANNOTATION_SYNC,
  ANNOTATION_WEIGHT,
  LABEL_MANAGED_BY,
  LABEL_SLICE_MANAGED_BY,
  MANAGER,
  META,
} from './kube-names.js';
import { endpointHealthy, objectKey, type KubeEndpointSlice, type KubeService } from './kube-objects.js';

/** The options that decide what a Service exports. */
export interface ExportRules {
  syncByDefault: boolean;
  portName: string | undefined;
  ephemeral: boolean;
}

/** Instances read from Kubernetes objects, with what was wrong on the way (shown in the task status). */
export interface ReadResult {
  instances: Instance[];
  issues: string[];
}

/** Did regsync create this Service (label `app.kubernetes.io/managed-by: regsync`)? */
export function isManagedService(svc: KubeService): boolean {
  return svc.metadata?.labels?.[LABEL_MANAGED_BY] === MANAGER;
}

/** Did regsync write this EndpointSlice (label `endpointslice.kubernetes.io/managed-by: regsync`)? */
export function isManagedSlice(slice: KubeEndpointSlice): boolean {
  return slice.metadata?.labels?.[LABEL_SLICE_MANAGED_BY] === MANAGER;
}

/**
 * The name a Service is exported under (annotation `regsync.io/service-name`, else its own name)
 * and whether it is exported: the `regsync.io/sync` annotation, else `syncByDefault`. ExternalName
 * Services (no endpoints) and `default/kubernetes` (the API server itself) are never exported.
 */
export function exportOf(svc: KubeService, rules: Pick<ExportRules, 'syncByDefault'>): { name: string; exported: boolean; issues: string[] } {
  const annotations = svc.metadata?.annotations ?? {};
  const own = svc.metadata?.name ?? '';
  const named = annotations[ANNOTATION_SERVICE_NAME];
  const name = named !== undefined && named.trim() !== '' ? named.trim() : own;
  const issues: string[] = [];
  if (svc.spec?.type === 'ExternalName' || (svc.metadata?.namespace === 'default' && own === 'kubernetes')) {
    return { name, exported: false, issues };
  }
  const sync = annotations[ANNOTATION_SYNC]?.trim().toLowerCase();
  if (sync === 'true') return { name, exported: true, issues };
  if (sync === 'false') return { name, exported: false, issues };
  if (sync !== undefined) issues.push(`service ${objectKey(svc)}: annotation ${ANNOTATION_SYNC} must be "true" or "false", not ${JSON.stringify(sync)}`);
  return { name, exported: rules.syncByDefault, issues };
}

/**
 * The instances of a Service regsync did not write: one per address of every endpoint of its
 * slices (IPv4 and IPv6; FQDN slices are not served by kube-proxy and left out), on the chosen
 * port: annotation `regsync.io/port` (a port name or number; nothing is exported when it names no
 * port), else `portName` when the Service has it, else the first port. The instance port is the
 * slice's (the pods' target port). Health follows the endpoint conditions ({@link endpointHealthy}).
 * Metadata: the Service's `regsync.io/metadata` JSON and `regsync.io/meta-<key>` annotations, then
 * `k8s.namespace`, `k8s.service`, `k8s.port-name`, `k8s.node`, `k8s.zone`, `k8s.hostname`, `k8s.pod`.
 * An address listed twice (slices overlap while they are being rebalanced) counts once, healthy if
 * any copy is.
 */
export function nativeInstances(svc: KubeService, slices: readonly KubeEndpointSlice[], rules: ExportRules): ReadResult {
  const where = `service ${objectKey(svc)}`;
  const issues: string[] = [];
  const annotations = svc.metadata?.annotations ?? {};
  const ports = svc.spec?.ports ?? [];
  if (ports.length === 0) return { instances: [], issues: [`${where} has no ports`] };
  const annotated = annotations[ANNOTATION_PORT]?.trim();
  const byNameOrNumber = (wanted: string) => ports.find((p) => p.name === wanted) ?? ports.find((p) => String(p.port) === wanted);
  let chosen = ports[0];
  if (annotated !== undefined && annotated !== '') {
    chosen = byNameOrNumber(annotated);
    if (!chosen) return { instances: [], issues: [`${where}: annotation ${ANNOTATION_PORT} names no port of the service (${JSON.stringify(annotated)})`] };
  } else if (rules.portName !== undefined) {
    chosen = byNameOrNumber(rules.portName) ?? ports[0];
  }
  const portName = chosen?.name ?? '';

  let weight = 1;
  const weightText = annotations[ANNOTATION_WEIGHT];
  if (weightText !== undefined) {
    const n = Number(weightText);
    if (weightText.trim() !== '' && Number.isFinite(n) && n >= 0) weight = n;
    else issues.push(`${where}: annotation ${ANNOTATION_WEIGHT} is not a number >= 0 (${JSON.stringify(weightText)})`);
  }

  const base: Record<string, string> = {};
  const json = annotations[ANNOTATION_METADATA];
  if (json !== undefined) {
    try {
      const parsed: unknown = JSON.parse(json);
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
      for (const [k, v] of Object.entries(parsed as Record<string, unknown>)) base[k] = typeof v === 'string' ? v : JSON.stringify(v);
    } catch {
      issues.push(`${where}: annotation ${ANNOTATION_METADATA} is not a JSON object`);
    }
  }
  for (const [k, v] of Object.entries(annotations)) {
    if (k.startsWith(ANNOTATION_META_PREFIX) && k.length > ANNOTATION_META_PREFIX.length) base[k.slice(ANNOTATION_META_PREFIX.length)] = v;
  }
  base[META.namespace] = svc.metadata?.namespace ?? '';
  base[META.service] = svc.metadata?.name ?? '';
  if (portName !== '') base[META.portName] = portName;

  const found = new Map<string, Instance>();
  for (const slice of slices) {
    if (slice.addressType !== 'IPv4' && slice.addressType !== 'IPv6') continue;
    const port = (slice.ports ?? []).find((p) => (p.name ?? '') === portName)?.port;
    if (typeof port !== 'number') continue;
    for (const endpoint of slice.endpoints ?? []) {
      const healthy = endpointHealthy(endpoint.conditions);
      const metadata = { ...base };
      if (endpoint.nodeName) metadata[META.node] = endpoint.nodeName;
      if (endpoint.zone) metadata[META.zone] = endpoint.zone;
      if (endpoint.hostname) metadata[META.hostname] = endpoint.hostname;
      if (endpoint.targetRef?.kind === 'Pod' && endpoint.targetRef.name) metadata[META.pod] = endpoint.targetRef.name;
      for (const ip of endpoint.addresses ?? []) {
        const instance: Instance = {
          ip,
          port,
          weight,
          healthy,
          enabled: true,
          ephemeral: rules.ephemeral,
          cluster: DEFAULT_INSTANCE_CLUSTER,
          metadata: { ...metadata },
        };
        const id = instanceId(instance);
        const seen = found.get(id);
        if (!seen || (!seen.healthy && healthy)) found.set(id, instance);
      }
    }
  }
  return { instances: sortInstances([...found.values()]), issues };
}

/**
 * The instances of slices regsync wrote, exactly as they were written: fields and marks from the
 * `regsync.io/instances` annotation, health from the endpoint conditions. An endpoint without an
 * entry (someone edited the slice) reads with default fields and no marks, so the engine treats it
 * as not its own; an entry without an endpoint is left out. Both are reported.
 */
export function managedInstances(slices: readonly KubeEndpointSlice[]): ReadResult {
  const issues: string[] = [];
  const found = new Map<string, Instance>();
  for (const slice of slices) {
    const where = `endpointslice ${objectKey(slice)}`;
    const ports = slice.ports ?? [];
    const port = ports.length === 1 ? ports[0]?.port : undefined;
    if (typeof port !== 'number') {
      issues.push(`${where}: expected exactly one port`);
      continue;
    }
    const health = new Map<string, boolean>();
    for (const endpoint of slice.endpoints ?? []) {
      for (const ip of endpoint.addresses ?? []) health.set(ip, endpointHealthy(endpoint.conditions));
    }
    const decoded = decodeEntries(slice.metadata?.annotations?.[ANNOTATION_INSTANCES], where);
    issues.push(...decoded.issues);
    const described = new Set<string>();
    for (const e of decoded.entries) {
      const healthy = health.get(e.ip);
      if (healthy === undefined || e.port !== port) {
        issues.push(`${where}: annotated instance ${e.ip}:${e.port} has no endpoint`);
        continue;
      }
      described.add(e.ip);
      const instance: Instance = { ip: e.ip, port, weight: e.weight, healthy, enabled: e.enabled, ephemeral: e.ephemeral, cluster: e.cluster, metadata: e.metadata };
      found.set(instanceId(instance), instance);
    }
    for (const [ip, healthy] of health) {
      if (described.has(ip)) continue;
      issues.push(`${where}: endpoint ${ip}:${port} is not described in annotation ${ANNOTATION_INSTANCES}`);
      const instance: Instance = { ip, port, weight: 1, healthy, enabled: true, ephemeral: true, cluster: DEFAULT_INSTANCE_CLUSTER, metadata: {} };
      if (!found.has(instanceId(instance))) found.set(instanceId(instance), instance);
    }
  }
  return { instances: sortInstances([...found.values()]), issues };
}

export function sortInstances(instances: Instance[]): Instance[] {
  return instances.sort((a, b) => compare(instanceId(a), instanceId(b)));
}
