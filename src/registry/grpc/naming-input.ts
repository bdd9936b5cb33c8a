import { DEFAULT_CLUSTER, GROUP_SEPARATOR, groupedName, type PublishedInput } from '../naming-store.js';
import { GrpcRequestError } from './grpc-request-error.js';

/*
 * The fields of Nacos gRPC naming requests, checked and normalised as a Nacos 2.3+ server does
 * (`ParamCheckRule`, `NamingUtils.checkInstanceIsLegal`, `ClientOperationService.getPublishInfo`).
 * Pure: no store, no clock. Every refusal is a GrpcRequestError carrying the Nacos error code.
 */

/** The service a naming request is about, as sent: the namespace is taken literally. */
export interface GrpcServiceRef {
  /**
   * The namespace exactly as sent. The gRPC path does not normalise it (Nacos does not either): `""`
   * is a namespace of its own, not `public`, which is what the HTTP APIs make of a blank namespace.
   */
  namespaceId: string;
  groupName: string;
  name: string;
}

const MAX_METADATA_CHARS = 1024;
const MAX_SERVICE_NAME = 512;
const MAX_GROUP_NAME = 128;
const MAX_NAMESPACE = 64;
const GROUP_PATTERN = /^[a-zA-Z0-9-_:.]*$/;
const NAMESPACE_PATTERN = /^[\w-]*$/;
const BATCH_CLUSTER_PATTERN = /^[0-9a-zA-Z-_]+$/;
const SINGLE_CLUSTER_PATTERN = /^[0-9a-zA-Z-]+$/;

function paramInvalid(message: string): GrpcRequestError {
  return new GrpcRequestError(400, `Param check invalid:${message}`);
}

/**
 * The namespace, group and plain name of a request. A blank group is a server error (500), as Nacos'
 * `NamingUtils.getGroupedName` throws; a missing namespace or service name is a parameter error (400).
 * `serviceRequired: false` is for the service list, which names no service.
 */
export function readServiceRef(body: Record<string, unknown>, serviceRequired = true): GrpcServiceRef {
  const namespaceId = body.namespace;
  if (typeof namespaceId !== 'string') throw paramInvalid('Param \'namespace\' is required.');
  if (namespaceId.length > MAX_NAMESPACE || !NAMESPACE_PATTERN.test(namespaceId)) {
    throw paramInvalid(`Param 'namespaceId/tenant' is illegal, illegal characters should not appear in the param.`);
  }
  const groupName = typeof body.groupName === 'string' ? body.groupName : '';
  if (groupName.length > MAX_GROUP_NAME || !GROUP_PATTERN.test(groupName)) {
    throw paramInvalid(`Param 'groupName' is illegal, illegal characters should not appear in the param.`);
  }
  const name = typeof body.serviceName === 'string' ? body.serviceName : '';
  if (name.length > MAX_SERVICE_NAME || name.startsWith('@') || name.includes(GROUP_SEPARATOR) || /\s/.test(name)) {
    throw paramInvalid(`Param 'serviceName' is illegal, illegal characters should not appear in the param.`);
  }
  if (serviceRequired) {
    if (name === '') throw paramInvalid(`Param 'serviceName' is required.`);
    if (groupName.trim() === '') throw new GrpcRequestError(500, 'Param \'groupName\' is illegal, group name is blank.');
  }
  return { namespaceId, groupName, name };
}

/**
 * One instance of a register, batch or persistent request, normalised as Nacos stores it: cluster
 * blank -> `DEFAULT`; weight 1, healthy and enabled unless sent otherwise; `ephemeral` from the kind
 * of request, not from the instance; an empty `instanceId` generated as
 * `ip#port#clusterName#serviceName`, with the instance's own `serviceName` when it sent one, else
 * `group@@name`, and the cluster as sent (a missing one prints `null`, as Nacos' generator does, since
 * it runs before the cluster default applies). `single` applies the stricter cluster pattern of a
 * single register.
 */
export function readInstance(raw: unknown, ref: GrpcServiceRef, opts: { ephemeral: boolean; single: boolean }): PublishedInput {
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw paramInvalid('instance is required.');
  const i = raw as Record<string, unknown>;
  const ip = typeof i.ip === 'string' ? i.ip.trim() : '';
  if (ip === '' || ip.length > 128 || /\s/.test(ip)) throw paramInvalid(`Param 'ip' is illegal: ${String(i.ip)}`);
  const port = toNumber(i.port);
  if (port === undefined || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw paramInvalid(`Param 'port' is illegal, the value should be between 0 and 65535.`);
  }
  const weight = i.weight === undefined || i.weight === null ? 1 : toNumber(i.weight);
  if (weight === undefined || !Number.isFinite(weight) || weight < 0 || weight > 10000) {
    throw paramInvalid('instance format invalid: The weights range from 0.0 to 10000.0');
  }
  const sentCluster = typeof i.clusterName === 'string' ? i.clusterName : undefined;
  const clusterName = sentCluster === undefined || sentCluster.trim() === '' ? DEFAULT_CLUSTER : sentCluster;
  const clusterPattern = opts.single ? SINGLE_CLUSTER_PATTERN : BATCH_CLUSTER_PATTERN;
  if (!clusterPattern.test(clusterName)) {
    throw new GrpcRequestError(400, `Instance 'clusterName' should be characters with only ${opts.single ? '0-9a-zA-Z-' : '0-9a-zA-Z-_'}. (current: ${clusterName})`);
  }
  const metadata = readMetadata(i.metadata);
  checkHeartBeatMetadata(metadata);
  const ownServiceName = typeof i.serviceName === 'string' && i.serviceName.trim() !== '' ? i.serviceName : groupedName(ref.groupName, ref.name);
  const sentId = typeof i.instanceId === 'string' && i.instanceId !== '' ? i.instanceId : undefined;
  return {
    instanceId: sentId ?? `${ip}#${port}#${sentCluster ?? 'null'}#${ownServiceName}`,
    ip,
    port,
    weight,
    healthy: readBool(i.healthy, 'healthy', true),
    enabled: readBool(i.enabled, 'enabled', true),
    ephemeral: opts.ephemeral,
    clusterName,
    metadata,
  };
}

/** The instances of a batch: an array (empty allowed: it clears the connection's set). */
export function readInstances(raw: unknown, ref: GrpcServiceRef): PublishedInput[] {
  if (raw === undefined || raw === null) return [];
  if (!Array.isArray(raw)) throw paramInvalid('instances must be a list.');
  return raw.map((i) => readInstance(i, ref, { ephemeral: true, single: false }));
}

function readMetadata(raw: unknown): Record<string, string> {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw paramInvalid('instance metadata must be a map.');
  const out: Record<string, string> = {};
  let chars = 0;
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
    if (v === null || v === undefined) continue;
    const value = typeof v === 'string' ? v : typeof v === 'object' ? JSON.stringify(v) : String(v);
    chars += k.length + value.length;
    if (chars > MAX_METADATA_CHARS) {
      throw paramInvalid(`Param 'Metadata' is illegal, the param length should not exceed ${MAX_METADATA_CHARS}.`);
    }
    out[k] = value;
  }
  return out;
}

/** Nacos refuses heart-beat settings whose timeout or delete timeout is shorter than the interval. */
function checkHeartBeatMetadata(metadata: Record<string, string>): void {
  const interval = numberOr(metadata['preserved.heart.beat.interval'], 5000);
  const timeout = numberOr(metadata['preserved.heart.beat.timeout'], 15000);
  const deleteTimeout = numberOr(metadata['preserved.ip.delete.timeout'], 30000);
  if (interval > timeout || interval > deleteTimeout) {
    throw new GrpcRequestError(400, 'Instance \'heart beat interval\' must less than \'heart beat timeout\' and \'ip delete timeout\'.');
  }
}

function numberOr(text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const n = Number(text);
  return Number.isFinite(n) ? n : fallback;
}

function toNumber(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'string' && v.trim() !== '') return Number(v);
  return undefined;
}

function readBool(v: unknown, name: string, fallback: boolean): boolean {
  if (v === undefined || v === null) return fallback;
  if (typeof v === 'boolean') return v;
  if (v === 'true') return true;
  if (v === 'false') return false;
  throw paramInvalid(`Param '${name}' must be true or false.`);
}
