import { gunzipSync } from 'node:zlib';
import {
  DEFAULT_GROUP,
  DEFAULT_INSTANCE_CLUSTER,
  DEFAULT_NAMESPACE,
  type Instance,
  type ServiceKey,
} from '../../src/model/index.js';
import { WireFormatError } from './wire-format-error.js';

/*
 * Pure conversions between the model and Nacos' wire shapes. No I/O here, so every rule can be unit
 * tested without a server.
 */

/** A service as Nacos addresses it: namespace id, group, plain name. */
export interface ServiceRef {
  namespaceId: string;
  group: string;
  name: string;
}

/** A service found by a list across groups: its real group and plain name. */
export interface GroupedService {
  group: string;
  name: string;
}

/** Joins group and name in Nacos 1.x/2.x service names (`group@@name`). */
export const GROUP_SEPARATOR = '@@';

/** The model's key in Nacos terms: an empty namespace is `public`, an empty group `DEFAULT_GROUP`. */
export function toServiceRef(key: ServiceKey): ServiceRef {
  return {
    namespaceId: key.namespace === '' ? DEFAULT_NAMESPACE : key.namespace,
    group: key.group === '' ? DEFAULT_GROUP : key.group,
    name: key.name,
  };
}

/** `group@@name`, the service name every Nacos 1.x/2.x API understands. */
export function groupedName(ref: Pick<ServiceRef, 'group' | 'name'>): string {
  return `${ref.group}${GROUP_SEPARATOR}${ref.name}`;
}

/** `namespace/group@@name`, for logs and error messages. */
export function describeService(ref: ServiceRef): string {
  return `${ref.namespaceId}/${groupedName(ref)}`;
}

/** Parses a JSON body, or throws {@link WireFormatError} quoting its start. */
export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new WireFormatError(`expected JSON, got: ${excerpt(text)}`);
  }
}

/** A JSON object (not null, not an array): what every Nacos answer body should be. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The first 200 characters of a body, on one line, for error messages. */
export function excerpt(text: string): string {
  const oneLine = text.replace(/\s+/g, ' ').trim();
  return oneLine.length > 200 ? `${oneLine.slice(0, 200)}...` : oneLine === '' ? '(empty body)' : oneLine;
}

/**
 * The namespace ids of a namespace list: the `data` of `GET /nacos/v1/console/namespaces` (Nacos
 * 1.x/2.x, where the public namespace's id is `""`) or of `GET /nacos/v3/admin/core/namespace/list`
 * (3.x, where it is `public`). Both become `public`, regsync's name for it. Throws
 * {@link WireFormatError} when the list or an entry's `namespace` is missing: a namespace that cannot
 * be read must fail the list, not vanish from it.
 */
export function namespaceIds(data: unknown): string[] {
  if (!Array.isArray(data)) throw new WireFormatError(`expected a list of namespaces, got: ${excerpt(JSON.stringify(data) ?? '')}`);
  const ids = new Set<string>();
  for (const entry of data) {
    if (!isRecord(entry) || typeof entry.namespace !== 'string') {
      throw new WireFormatError(`namespace entry without a namespace id: ${excerpt(JSON.stringify(entry) ?? '')}`);
    }
    ids.add(entry.namespace === '' ? DEFAULT_NAMESPACE : entry.namespace);
  }
  return [...ids];
}

/**
 * One entry of a service list across groups (a `ServiceView`: v1 catalog `serviceList`, v3 admin
 * `pageItems`): `{name, groupName, ...}`. A name that is still `group@@name` is split; an entry
 * without a group is in `DEFAULT_GROUP`, as Nacos reads ungrouped names. Throws
 * {@link WireFormatError} without a name.
 */
export function groupedServiceOf(entry: unknown): GroupedService {
  if (!isRecord(entry) || typeof entry.name !== 'string' || entry.name === '') {
    throw new WireFormatError(`service entry without a name: ${excerpt(JSON.stringify(entry) ?? '')}`);
  }
  const at = entry.name.indexOf(GROUP_SEPARATOR);
  const group = typeof entry.groupName === 'string' && entry.groupName !== '' ? entry.groupName : undefined;
  if (at < 0) return { group: group ?? DEFAULT_GROUP, name: entry.name };
  const prefix = entry.name.slice(0, at);
  if (group !== undefined && prefix !== group) return { group, name: entry.name };
  return { group: prefix, name: entry.name.slice(at + GROUP_SEPARATOR.length) };
}

/**
 * A `hosts` entry (v1 list, push) or v3 list item as a model instance. Missing flags take Nacos'
 * defaults; metadata values become strings, as Nacos stores them. Throws {@link WireFormatError} when
 * the address is missing: an instance without one must fail the read, not vanish from it.
 */
export function hostToInstance(host: unknown): Instance {
  if (!isRecord(host)) throw new WireFormatError(`instance is not an object: ${excerpt(JSON.stringify(host) ?? '')}`);
  const port = Number(host.port);
  if (typeof host.ip !== 'string' || host.ip === '' || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new WireFormatError(`instance without a valid ip and port: ${excerpt(JSON.stringify(host))}`);
  }
  const weight = host.weight === undefined || host.weight === null ? 1 : Number(host.weight);
  return {
    ip: host.ip,
    port,
    weight: Number.isFinite(weight) ? weight : 1,
    healthy: flag(host.healthy),
    enabled: flag(host.enabled ?? host.enable),
    ephemeral: flag(host.ephemeral),
    cluster: typeof host.clusterName === 'string' && host.clusterName !== '' ? host.clusterName : DEFAULT_INSTANCE_CLUSTER,
    metadata: stringRecord(host.metadata),
  };
}

/** Reads a list of hosts; throws {@link WireFormatError} when it is not a list. */
export function hostsToInstances(hosts: unknown): Instance[] {
  if (!Array.isArray(hosts)) throw new WireFormatError(`expected a list of instances, got: ${excerpt(JSON.stringify(hosts) ?? '')}`);
  return hosts.map(hostToInstance);
}

/** Nacos flags arrive as booleans, and from some servers as strings; absent means true. */
function flag(value: unknown): boolean {
  if (value === undefined || value === null) return true;
  if (typeof value === 'string') return value.toLowerCase() !== 'false';
  return Boolean(value);
}

function stringRecord(value: unknown): Record<string, string> {
  if (!isRecord(value)) return {};
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined || v === null) continue;
    out[k] = typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v);
  }
  return out;
}

/**
 * Register parameters with every field of the instance, as both v1 and v3 take them. `serviceName`
 * is grouped for v1 (Nacos 1.x insists on `group@@name`) and plain for v3.
 */
export function registerParams(ref: ServiceRef, instance: Instance, dialect: 'v1' | 'v3'): Record<string, string> {
  return {
    ...serviceParams(ref, dialect),
    ip: instance.ip,
    port: String(instance.port),
    weight: String(instance.weight),
    enabled: String(instance.enabled),
    healthy: String(instance.healthy),
    ephemeral: String(instance.ephemeral),
    clusterName: instance.cluster,
    metadata: JSON.stringify(instance.metadata),
  };
}

/** Encoded `namespaceId`, `groupName` and `serviceName` of a ref, per dialect (refs live as long as one apply). */
const serviceForms = new WeakMap<ServiceRef, { v1?: string; v3?: string }>();

/**
 * {@link registerParams} as form text (`application/x-www-form-urlencoded`), built in one go: a
 * cold sync sends tens of thousands of registers, and a parameter object per register, encoded
 * key by key, is most of what the client spends on each. The service's part is encoded once per ref.
 */
export function registerForm(ref: ServiceRef, instance: Instance, dialect: 'v1' | 'v3'): string {
  let forms = serviceForms.get(ref);
  if (!forms) {
    forms = {};
    serviceForms.set(ref, forms);
  }
  const service = (forms[dialect] ??=
    `namespaceId=${encodeURIComponent(ref.namespaceId)}&groupName=${encodeURIComponent(ref.group)}&serviceName=${encodeURIComponent(dialect === 'v1' ? groupedName(ref) : ref.name)}`);
  return (
    `${service}&ip=${encodeURIComponent(instance.ip)}&port=${instance.port}&weight=${encodeURIComponent(String(instance.weight))}` +
    `&enabled=${instance.enabled}&healthy=${instance.healthy}&ephemeral=${instance.ephemeral}` +
    `&clusterName=${encodeURIComponent(instance.cluster)}&metadata=${encodeURIComponent(JSON.stringify(instance.metadata))}`
  );
}

/** Deregister parameters: address, cluster and the ephemeral flag (Nacos 2.x looks the instance up by it). */
export function deregisterParams(ref: ServiceRef, instance: Instance, dialect: 'v1' | 'v3'): Record<string, string> {
  return {
    ...serviceParams(ref, dialect),
    ip: instance.ip,
    port: String(instance.port),
    clusterName: instance.cluster,
    ephemeral: String(instance.ephemeral),
  };
}

/** The parameters that name a service in every call. */
export function serviceParams(ref: ServiceRef, dialect: 'v1' | 'v3'): Record<string, string> {
  return {
    namespaceId: ref.namespaceId,
    groupName: ref.group,
    serviceName: dialect === 'v1' ? groupedName(ref) : ref.name,
  };
}

/** The v1 `beat` parameter: the instance as the Java client's BeatInfo carries it. */
export function beatBody(ref: ServiceRef, instance: Instance): string {
  return JSON.stringify({
    serviceName: groupedName(ref),
    ip: instance.ip,
    port: instance.port,
    cluster: instance.cluster,
    weight: instance.weight,
    metadata: instance.metadata,
    scheduled: false,
  });
}

/** A UDP packet from the server, decoded. */
export interface PushPacket {
  type: string;
  data: string;
  lastRefTime: unknown;
}

/** Decodes a push packet (gzipped when it starts with the gzip magic); undefined when unreadable. */
export function decodePushPacket(message: Buffer): PushPacket | undefined {
  try {
    const raw = message.length >= 2 && message[0] === 0x1f && message[1] === 0x8b ? gunzipSync(message) : message;
    const packet = JSON.parse(raw.toString('utf8')) as unknown;
    if (!isRecord(packet) || typeof packet.type !== 'string') return undefined;
    return { type: packet.type, data: typeof packet.data === 'string' ? packet.data : '', lastRefTime: packet.lastRefTime };
  } catch {
    return undefined;
  }
}

/** The acknowledgement a push packet expects, as the official SDKs send it. */
export function pushAck(packet: PushPacket): Buffer {
  const type = packet.type === 'dom' || packet.type === 'service' ? 'push-ack' : packet.type === 'dump' ? 'dump-ack' : 'unknown-ack';
  return Buffer.from(JSON.stringify({ type, lastRefTime: packet.lastRefTime, data: type === 'dump-ack' ? '{}' : '' }));
}

/** `"name":"..."` at the start of a ServiceInfo document, without escapes (the common case). */
const LEADING_NAME = /^\s*\{\s*"name"\s*:\s*"([^"\\]+)"/;

/**
 * Only the name of the service a `dom` packet is about (`group@@name`), without converting its
 * instances: a push only says "look again". Reads the name off the start of the document when it
 * comes first and is already grouped (what Nacos 1.x and the embedded registry send); otherwise
 * parses the document and reads `name` and `groupName`. Throws {@link WireFormatError} when unreadable.
 */
export function pushedServiceName(data: string): string {
  const quick = LEADING_NAME.exec(data.length > 512 ? data.slice(0, 512) : data)?.[1];
  if (quick !== undefined && quick.includes(GROUP_SEPARATOR)) return quick;
  const info = parseJson(data);
  if (!isRecord(info) || typeof info.name !== 'string' || info.name === '') {
    throw new WireFormatError(`pushed service without a name: ${excerpt(data)}`);
  }
  return info.name.includes(GROUP_SEPARATOR)
    ? info.name
    : `${typeof info.groupName === 'string' && info.groupName !== '' ? info.groupName : DEFAULT_GROUP}${GROUP_SEPARATOR}${info.name}`;
}

/**
 * The service a `dom` packet is about, and its instances. Nacos 1.x names it `group@@name`; 2.x may
 * send the plain name with `groupName` beside it. Throws {@link WireFormatError} when unreadable.
 */
export function pushedService(data: string): { groupedName: string; instances: Instance[] } {
  const info = parseJson(data);
  if (!isRecord(info) || typeof info.name !== 'string' || info.name === '') {
    throw new WireFormatError(`pushed service without a name: ${excerpt(data)}`);
  }
  const name = info.name.includes(GROUP_SEPARATOR)
    ? info.name
    : `${typeof info.groupName === 'string' && info.groupName !== '' ? info.groupName : DEFAULT_GROUP}${GROUP_SEPARATOR}${info.name}`;
  return { groupedName: name, instances: hostsToInstances(info.hosts ?? []) };
}
