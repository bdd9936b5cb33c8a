import type { InstanceInput } from '../src/registry/naming-store.js';

/*
 * Made-up instances. Their addresses are 10.x.y.z and nothing ever connects to them: the embedded
 * registry has no active health checks, and regsync only copies the address.
 */

export const NAMESPACE = 'public';
export const GROUP = 'DEFAULT_GROUP';
export const CLUSTER = 'DEFAULT';
export const PORT = 8080;

/** A distinct private address per number below 2^24: 10.(n>>16).(n>>8 & 255).(n & 255). */
export function ipOf(n: number): string {
  if (!Number.isInteger(n) || n < 0 || n >= 1 << 24) throw new RangeError(`no 10.x.y.z address for ${n}`);
  return `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
}

/** `svc-00042`: sorted names keep the registry's service list in creation order. */
export function serviceName(index: number): string {
  return `svc-${String(index).padStart(5, '0')}`;
}

/** A persistent instance as the embedded store takes it (setup of the cold sync). */
export function persistentInstance(ip: string, service: string): InstanceInput {
  return {
    ip,
    port: PORT,
    weight: 1,
    healthy: true,
    enabled: true,
    ephemeral: false,
    clusterName: CLUSTER,
    metadata: { app: service, version: '1.0.0' },
  };
}

/**
 * The v1 register form (`POST /nacos/v1/ns/instance`) of a persistent instance, with every field
 * and metadata of the size regsync writes on its copies, so that the raw write rate and the cold
 * sync's copies cost the registry the same.
 */
export function registerForm(service: string, ip: string, metadata: Record<string, string>): string {
  return new URLSearchParams({
    namespaceId: NAMESPACE,
    groupName: GROUP,
    serviceName: `${GROUP}@@${service}`,
    ip,
    port: String(PORT),
    weight: '1',
    enabled: 'true',
    healthy: 'true',
    ephemeral: 'false',
    clusterName: CLUSTER,
    metadata: JSON.stringify(metadata),
  }).toString();
}

/** Metadata as a copy in the destination carries it (the source's plus regsync's three marks). */
export function copyLikeMetadata(service: string): Record<string, string> {
  return { app: service, version: '1.0.0', 'regsync.origin': 'a', 'regsync.path': 'a', 'regsync.task': 'cold' };
}

/** The embedded store's key of an instance in a service (`ip#port#cluster`). */
export function storeKey(ip: string): string {
  return `${ip}#${PORT}#${CLUSTER}`;
}
