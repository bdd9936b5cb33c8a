import { createHash } from 'node:crypto';
import { DEFAULT_INSTANCE_CLUSTER, MARK_ORIGIN, MARK_PATH, MARK_TASK, instanceId, type Instance } from '../../src/model/index.js';

/**
 * How regsync's instances map onto Consul's service entries, and back. Pure: no I/O.
 *
 * Consul meta keys allow only letters, digits, `_` and `-` (at most 128 characters, 64 pairs,
 * values of at most 512 bytes, no `consul-` prefix). regsync's marks and fields get readable keys of
 * their own ({@link MARK_META}, {@link FIELD_META}); every other metadata key that Consul would refuse
 * (a dot, a colon, a slash...), or that would be mistaken for one of those, is written encoded:
 * `__` then the key with each character other than a letter or digit as `_XX` per UTF-8 byte
 * (`spring.boot.version` -> `__spring_2Eboot_2Eversion`). Reading decodes a key that starts with
 * `__` and holds at least one well-formed escape; any other key is read as it is.
 */

/** regsync's marks as Consul meta keys. */
export const MARK_META: Readonly<Record<string, string>> = {
  [MARK_ORIGIN]: 'regsync-origin',
  [MARK_PATH]: 'regsync-path',
  [MARK_TASK]: 'regsync-task',
};

/** Instance fields Consul has no place for, kept in meta on the copies regsync writes (only when not the default). */
export const FIELD_META = {
  weight: 'regsync-weight',
  ephemeral: 'regsync-ephemeral',
  enabled: 'regsync-enabled',
  cluster: 'regsync-cluster',
} as const;

/** The metadata key that carries a service entry's tags, comma-separated. */
export const TAGS_KEY = 'consul.tags';
/** The meta key consul-k8s and others mark their registrations with; regsync writes `regsync`. */
export const EXTERNAL_SOURCE = 'external-source';
export const EXTERNAL_SOURCE_REGSYNC = 'regsync';

const MAX_META_PAIRS = 64;
const MAX_META_KEY = 128;
const MAX_META_VALUE = 512;
const PLAIN_KEY = /^[A-Za-z0-9_-]+$/;
const RESERVED = new Set<string>([...Object.values(MARK_META), ...Object.values(FIELD_META), EXTERNAL_SOURCE]);
const META_TO_MARK = new Map(Object.entries(MARK_META).map(([mark, key]) => [key, mark]));
const FIELD_KEYS = new Set<string>(Object.values(FIELD_META));

/** The Consul meta key of a metadata key (see the module's description). */
export function encodeMetaKey(key: string): string {
  if (MARK_META[key] !== undefined) return MARK_META[key] as string;
  if (PLAIN_KEY.test(key) && !key.startsWith('__') && !key.startsWith('consul-') && !RESERVED.has(key)) return key;
  let out = '__';
  for (const byte of Buffer.from(key, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9]/.test(c) ? c : `_${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** The metadata key of a Consul meta key: the inverse of {@link encodeMetaKey}. */
export function decodeMetaKey(key: string): string {
  const mark = META_TO_MARK.get(key);
  if (mark !== undefined) return mark;
  if (!key.startsWith('__') || !/^__(?:[A-Za-z0-9]|_[0-9A-F]{2})+$/.test(key) || !key.slice(2).includes('_')) return key;
  const bytes: number[] = [];
  const body = key.slice(2);
  for (let i = 0; i < body.length; i += 1) {
    if (body[i] === '_') {
      bytes.push(parseInt(body.slice(i + 1, i + 3), 16));
      i += 2;
    } else bytes.push(body.charCodeAt(i));
  }
  const decoded = Buffer.from(bytes).toString('utf8');
  // Bytes that are no UTF-8 were not written by the encoder: read the key as it is.
  return Buffer.from(decoded, 'utf8').equals(Buffer.from(bytes)) ? decoded : key;
}

/** One entry of `GET /v1/health/service/:name`, as far as regsync reads it. */
export interface ConsulHealthEntry {
  Node?: { Node?: string; Address?: string } | null;
  Service?: {
    ID?: string;
    Service?: string;
    Tags?: string[] | null;
    Address?: string;
    Port?: number;
    Meta?: Record<string, string> | null;
    Weights?: { Passing?: number; Warning?: number } | null;
  } | null;
  Checks?: Array<{ CheckID?: string; Status?: string; ServiceID?: string }> | null;
}

/** An instance read from a health entry, with where it lives (the node and service id a removal needs). */
export interface ReadEntry {
  instance: Instance;
  node: string;
  serviceId: string;
}

const SEVERITY: Record<string, number> = { passing: 0, warning: 1, critical: 2 };

/** The instance a health entry stands for; a string says why the entry is skipped. */
export function instanceOfEntry(entry: ConsulHealthEntry, includeWarning: boolean): ReadEntry | string {
  const svc = entry.Service ?? undefined;
  const node = entry.Node?.Node ?? '';
  if (svc === undefined || typeof svc.ID !== 'string') return `an entry of node ${JSON.stringify(node)} has no service`;
  const where = `service ${JSON.stringify(svc.ID)} on node ${JSON.stringify(node)}`;
  const ip = svc.Address !== undefined && svc.Address !== '' ? svc.Address : (entry.Node?.Address ?? '');
  if (ip === '') return `${where} has no address, nor has its node`;
  const port = svc.Port ?? 0;
  if (!Number.isInteger(port) || port < 1 || port > 65535) return `${where} has no port (${JSON.stringify(svc.Port)})`;

  let worst = 0;
  let maintenance = false;
  for (const check of entry.Checks ?? []) {
    worst = Math.max(worst, SEVERITY[check.Status ?? ''] ?? 2);
    if ((check.CheckID ?? '').startsWith('_service_maintenance:') || check.CheckID === '_node_maintenance') maintenance = true;
  }
  const meta = svc.Meta ?? {};
  const metadata: Record<string, string> = {};
  for (const [key, value] of Object.entries(meta)) {
    if (FIELD_KEYS.has(key)) continue;
    if (key === EXTERNAL_SOURCE && value === EXTERNAL_SOURCE_REGSYNC) continue;
    metadata[decodeMetaKey(key)] = String(value);
  }
  const tags = (svc.Tags ?? []).map(String);
  // nacos-sync carries metadata, its marks included, as key=value tags; regsync's copies keep theirs
  // in meta, and their tags are only the ones asked for (so a copy reads back as written).
  const ownCopy = meta[EXTERNAL_SOURCE] === EXTERNAL_SOURCE_REGSYNC;
  for (const tag of ownCopy ? [] : tags) {
    const eq = tag.indexOf('=');
    if (eq > 0 && tag.indexOf('=', eq + 1) < 0 && !Object.hasOwn(metadata, tag.slice(0, eq))) metadata[tag.slice(0, eq)] = tag.slice(eq + 1);
  }
  if (tags.length > 0) metadata[TAGS_KEY] = tags.join(',');

  const weightText = meta[FIELD_META.weight];
  const weight = weightText !== undefined && Number.isFinite(Number(weightText)) && weightText.trim() !== '' ? Number(weightText) : (svc.Weights?.Passing ?? 1);
  const instance: Instance = {
    ip,
    port,
    weight,
    healthy: worst === 0 || (includeWarning && worst === 1),
    enabled: !maintenance && meta[FIELD_META.enabled] !== 'false',
    ephemeral: meta[FIELD_META.ephemeral] !== 'false',
    cluster: meta[FIELD_META.cluster] ?? DEFAULT_INSTANCE_CLUSTER,
    metadata,
  };
  return { instance, node, serviceId: svc.ID };
}

/** The stable Consul service id of a copy: its name and the first 12 hex digits of a SHA-1 of the name and instance id. */
export function copyServiceId(name: string, instance: Pick<Instance, 'ip' | 'port' | 'cluster'>): string {
  return `${name}-${createHash('sha1').update(`${name}-${instanceId(instance)}`).digest('hex').slice(0, 12)}`;
}

/** Where copies are registered. */
export interface CopyNode {
  node: string;
  nodeAddress: string;
  datacenter?: string | undefined;
  namespace?: string | undefined;
  partition?: string | undefined;
}

/**
 * The `PUT /v1/catalog/register` body of a copy: the service on regsync's node, its meta
 * (marks and fields encoded), its tags (from {@link TAGS_KEY}), weights, and one check whose status
 * says whether the copy is healthy. A string says why Consul would refuse it (meta too large).
 */
export function registrationOf(name: string, instance: Instance, at: CopyNode): Record<string, unknown> | string {
  const id = copyServiceId(name, instance);
  const meta: Record<string, string> = { [EXTERNAL_SOURCE]: EXTERNAL_SOURCE_REGSYNC };
  let tags: string[] = [];
  for (const [key, value] of Object.entries(instance.metadata)) {
    if (key === TAGS_KEY) {
      tags = value.split(',').filter((t) => t !== '');
      continue;
    }
    const encoded = encodeMetaKey(key);
    if (encoded.length > MAX_META_KEY) return `metadata key ${JSON.stringify(key.slice(0, 64))} is longer than Consul's ${MAX_META_KEY} characters once encoded`;
    // Consul counts the value's UTF-8 bytes (Go's len).
    if (Buffer.byteLength(value, 'utf8') > MAX_META_VALUE) return `metadata ${JSON.stringify(key.slice(0, 64))} has a value longer than Consul's ${MAX_META_VALUE} bytes`;
    meta[encoded] = value;
  }
  const integral = Number.isInteger(instance.weight) && instance.weight >= 1 && instance.weight <= 65535;
  if (!integral) meta[FIELD_META.weight] = String(instance.weight);
  if (!instance.ephemeral) meta[FIELD_META.ephemeral] = 'false';
  if (!instance.enabled) meta[FIELD_META.enabled] = 'false';
  if (instance.cluster !== DEFAULT_INSTANCE_CLUSTER) meta[FIELD_META.cluster] = instance.cluster;
  if (Object.keys(meta).length > MAX_META_PAIRS) return `${Object.keys(meta).length} metadata entries: Consul keeps at most ${MAX_META_PAIRS}`;
  const origin = instance.metadata[MARK_ORIGIN];
  const scope = { ...(at.namespace !== undefined ? { Namespace: at.namespace } : {}), ...(at.partition !== undefined ? { Partition: at.partition } : {}) };
  return {
    Node: at.node,
    Address: at.nodeAddress,
    ...(at.datacenter !== undefined ? { Datacenter: at.datacenter } : {}),
    SkipNodeUpdate: true,
    NodeMeta: { [EXTERNAL_SOURCE]: EXTERNAL_SOURCE_REGSYNC },
    ...scope,
    Service: {
      ID: id,
      Service: name,
      Address: instance.ip,
      Port: instance.port,
      Tags: tags,
      Meta: meta,
      Weights: { Passing: integral ? instance.weight : 1, Warning: 1 },
      ...scope,
    },
    Check: {
      CheckID: `regsync:${id}`,
      Name: 'regsync copy',
      Status: instance.healthy ? 'passing' : 'critical',
      ServiceID: id,
      Output: origin === undefined ? 'copied by regsync' : `copied by regsync from ${origin}`,
      ...scope,
    },
  };
}
