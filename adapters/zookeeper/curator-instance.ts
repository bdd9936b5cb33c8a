import { createHash } from 'node:crypto';
import type { Instance } from '../../src/model/index.js';
import { clusterFromMetadata, metadataToWrite, weightFromMetadata } from './instance-fields.js';

/** The payload class Spring Cloud ZooKeeper registers with; written so that Spring can read our copies. */
export const SPRING_PAYLOAD_CLASS = 'org.springframework.cloud.zookeeper.discovery.ZookeeperInstance';

/** Spring's status metadata key; anything but `UP` (OUT_OF_SERVICE) takes the instance out of routing. */
export const SPRING_STATUS_KEY = 'instance_status';

/** Curator's default `{scheme}://{address}:{port}`, as Spring Cloud ZooKeeper registers it. */
const DEFAULT_URI_SPEC = {
  parts: [
    { value: 'scheme', variable: true },
    { value: '://', variable: false },
    { value: 'address', variable: true },
    { value: ':', variable: false },
    { value: 'port', variable: true },
  ],
};

/** Why a node is not a Curator service instance; the message says what is wrong. */
export class CuratorFormatError extends Error {
  override readonly name = 'CuratorFormatError';
  readonly code = 'curator-instance-invalid';
}

/**
 * Reads one Curator `ServiceInstance` node (`/{root}/{service}/{id}`, JSON). `payload.metadata`
 * (Spring's) becomes the instance metadata; `port`, or `sslPort` when there is no plain port;
 * `serviceType` DYNAMIC (the default) is ephemeral, STATIC and PERMANENT are not; `enabled: false`
 * (newer Curator) or a Spring `instance_status` other than UP disables it; the weight comes from a
 * `weight` metadata entry (default 1). Throws {@link CuratorFormatError} for anything that is not
 * such an instance of `serviceName` stored under its own id.
 */
export function readCuratorInstance(data: Buffer, serviceName: string, nodeId: string): Instance {
  let json: unknown;
  try {
    json = JSON.parse(data.toString('utf8'));
  } catch {
    throw new CuratorFormatError('the node data is not JSON');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw new CuratorFormatError('the node data is not a JSON object');
  const o = json as Record<string, unknown>;
  if (o.name !== undefined && o.name !== serviceName) {
    throw new CuratorFormatError(`its name ${JSON.stringify(o.name)} is not the service ${JSON.stringify(serviceName)} whose directory holds it`);
  }
  if (o.id !== undefined && o.id !== nodeId) throw new CuratorFormatError(`its id ${JSON.stringify(o.id)} is not its node name ${JSON.stringify(nodeId)}`);
  if (typeof o.address !== 'string' || o.address.trim() === '') throw new CuratorFormatError('no address');
  const port = validPort(o.port) ?? validPort(o.sslPort);
  if (port === undefined) throw new CuratorFormatError('no port (nor sslPort) from 1 to 65535');
  const payload = o.payload;
  const rawMetadata = typeof payload === 'object' && payload !== null ? (payload as Record<string, unknown>).metadata : undefined;
  const read: Record<string, string> = {};
  if (typeof rawMetadata === 'object' && rawMetadata !== null && !Array.isArray(rawMetadata)) {
    for (const [k, v] of Object.entries(rawMetadata as Record<string, unknown>)) {
      if (v === null || v === undefined) continue;
      read[k] = typeof v === 'string' ? v : JSON.stringify(v);
    }
  }
  const { cluster, metadata } = clusterFromMetadata(read);
  const status = metadata[SPRING_STATUS_KEY];
  const serviceType = typeof o.serviceType === 'string' ? o.serviceType : 'DYNAMIC';
  return {
    ip: o.address,
    port,
    weight: weightFromMetadata(read.weight),
    healthy: true,
    enabled: o.enabled !== false && (status === undefined || status.toUpperCase() === 'UP'),
    ephemeral: serviceType !== 'STATIC' && serviceType !== 'PERMANENT',
    cluster,
    metadata,
  };
}

/**
 * The JSON of a Curator `ServiceInstance` for `instance`, with exactly Curator's fields (`name, id,
 * address, port, sslPort, payload, registrationTimeUTC, serviceType, uriSpec`; `enabled` only when
 * false, so older Curator readers are not confused) and Spring's payload, whose `metadata` carries
 * the instance metadata (marks included). DYNAMIC, or STATIC for a persistent instance, so that it
 * reads back as written (the node is ephemeral either way).
 */
export function buildCuratorInstance(serviceName: string, id: string, instance: Instance, registrationTimeUTC: number): Buffer {
  const metadata = metadataToWrite(instance);
  const json: Record<string, unknown> = {
    name: serviceName,
    id,
    address: instance.ip,
    port: instance.port,
    sslPort: null,
    payload: { '@class': SPRING_PAYLOAD_CLASS, id, name: serviceName, metadata },
    registrationTimeUTC,
    serviceType: instance.ephemeral ? 'DYNAMIC' : 'STATIC',
    uriSpec: DEFAULT_URI_SPEC,
  };
  if (!instance.enabled) json.enabled = false;
  return Buffer.from(JSON.stringify(json));
}

/**
 * The node name (Curator id) of regsync's copy of an instance: `regsync-` and a hash of
 * `ip:port#cluster`, the same for every write, so a copy is always found again and never doubled.
 */
export function curatorCopyId(instance: Pick<Instance, 'ip' | 'port' | 'cluster'>): string {
  return `regsync-${createHash('sha256').update(`${instance.ip}:${instance.port}#${instance.cluster}`).digest('hex').slice(0, 24)}`;
}

/** Do two Curator nodes say the same thing, apart from their registration time? */
export function sameCuratorContent(a: Buffer, b: Buffer): boolean {
  if (a.equals(b)) return true;
  const strip = (buf: Buffer): string | undefined => {
    try {
      const o = JSON.parse(buf.toString('utf8')) as Record<string, unknown>;
      if (typeof o !== 'object' || o === null) return undefined;
      delete o.registrationTimeUTC;
      return stableStringify(o);
    } catch {
      return undefined;
    }
  };
  const sa = strip(a);
  return sa !== undefined && sa === strip(b);
}

function validPort(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= 65_535 ? value : undefined;
}

function stableStringify(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(stableStringify).join(',')}]`;
  if (typeof value === 'object' && value !== null) {
    const o = value as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${stableStringify(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
