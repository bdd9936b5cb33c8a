import type { Instance } from '../../../src/model/index.js';
import { groupedName, hostsToInstances, isRecord, type ServiceRef } from '../wire.js';
import { WireFormatError } from '../wire-format-error.js';

/*
 * The Nacos gRPC messages regsync sends and answers, as JSON bodies of a Payload (see payload.ts).
 * Names are the Java simple class names Nacos looks the body up by; field names are Jackson's. Pure
 * conversions, shared by the adapter (client) and the embedded registry (server).
 */

/** Client-to-server requests, sent as unary calls (`ConnectionSetupRequest` only on the bi-stream). */
export const REQUEST = {
  serverCheck: 'ServerCheckRequest',
  connectionSetup: 'ConnectionSetupRequest',
  healthCheck: 'HealthCheckRequest',
  instance: 'InstanceRequest',
  batchInstance: 'BatchInstanceRequest',
  persistentInstance: 'PersistentInstanceRequest',
  subscribeService: 'SubscribeServiceRequest',
  serviceQuery: 'ServiceQueryRequest',
  serviceList: 'ServiceListRequest',
  /** Nacos 3.x: watch or cancel a fuzzy-watch pattern (see fuzzy-pattern.ts). */
  fuzzyWatch: 'NamingFuzzyWatchRequest',
} as const;

/** Server-to-client requests, written on the bi-stream; each but `SetupAckRequest` wants an answer with its `requestId`. */
export const SERVER_REQUEST = {
  setupAck: 'SetupAckRequest',
  clientDetection: 'ClientDetectionRequest',
  connectReset: 'ConnectResetRequest',
  notifySubscriber: 'NotifySubscriberRequest',
  /** Nacos 3.x fuzzy watch: a batch of a pattern's INIT or DIFF sync, or the FINISH of its INIT. */
  fuzzyWatchSync: 'NamingFuzzyWatchSyncRequest',
  /** Nacos 3.x fuzzy watch: one service added to or deleted from the matched services. */
  fuzzyWatchChange: 'NamingFuzzyWatchChangeNotifyRequest',
} as const;

/** The ability a Nacos 3.x server advertises in `SetupAckRequest.abilityTable` when it serves fuzzy watch. */
export const FUZZY_WATCH_ABILITY = 'fuzzyWatch';

/** `NamingFuzzyWatchRequest.watchType`. */
export const WATCH_TYPE = { watch: 'WATCH', cancel: 'CANCEL_WATCH' } as const;

/** `syncType` of the fuzzy-watch server requests. */
export const FUZZY_SYNC_TYPE = {
  init: 'FUZZY_WATCH_INIT_NOTIFY',
  diff: 'FUZZY_WATCH_DIFF_SYNC_NOTIFY',
  finish: 'FINISH_FUZZY_WATCH_INIT_NOTIFY',
  changed: 'FUZZY_WATCH_RESOURCE_CHANGED',
} as const;

/** `changedType` of a fuzzy-watch context or change notify. */
export const FUZZY_CHANGE = { add: 'ADD_SERVICE', remove: 'DELETE_SERVICE' } as const;

/** Nacos' fuzzy-watch limits (`ErrorCode`), with the server property that raises each. */
export const FUZZY_LIMIT = {
  patterns: { code: 50310, message: 'fuzzy watch pattern over limit', property: 'nacos.naming.fuzzy.watch.max.pattern.count' },
  services: { code: 50311, message: 'fuzzy watch pattern matched count over limit', property: 'nacos.naming.fuzzy.watch.max.pattern.match.service.count' },
} as const;

/** The response class of each request class. */
export const RESPONSE_OF: Readonly<Record<string, string>> = {
  ServerCheckRequest: 'ServerCheckResponse',
  HealthCheckRequest: 'HealthCheckResponse',
  InstanceRequest: 'InstanceResponse',
  BatchInstanceRequest: 'BatchInstanceResponse',
  PersistentInstanceRequest: 'InstanceResponse',
  SubscribeServiceRequest: 'SubscribeServiceResponse',
  ServiceQueryRequest: 'QueryServiceResponse',
  ServiceListRequest: 'ServiceListResponse',
  ClientDetectionRequest: 'ClientDetectionResponse',
  ConnectResetRequest: 'ConnectResetResponse',
  NotifySubscriberRequest: 'NotifySubscriberResponse',
  NamingFuzzyWatchRequest: 'NamingFuzzyWatchResponse',
  NamingFuzzyWatchSyncRequest: 'NamingFuzzyWatchSyncResponse',
  NamingFuzzyWatchChangeNotifyRequest: 'NamingFuzzyWatchChangeNotifyResponse',
};

export const ERROR_RESPONSE = 'ErrorResponse';

/** `errorCode`s with a meaning on this path (NacosException). */
export const NACOS_CODE = {
  ok: 200,
  fail: 500,
  serverStarting: 300,
  unregistered: 301,
  noHandler: 302,
  invalidParam: 400,
  noRight: 403,
  badGateway: 502,
  overThreshold: 503,
  clientDisconnect: -401,
} as const;

/** The fields every response body has. */
export interface ResponseBody {
  resultCode: number;
  errorCode: number;
  message?: string;
  requestId?: string;
  success?: boolean;
  [field: string]: unknown;
}

/** A successful response body with `fields`. */
export function okBody(fields: Record<string, unknown> = {}, requestId?: string): ResponseBody {
  return { resultCode: NACOS_CODE.ok, errorCode: 0, ...fields, ...(requestId === undefined ? {} : { requestId }), success: true };
}

/** A failed response body: `resultCode` 500 (or the given one, as `ErrorResponse.build` does) and `errorCode`. */
export function failBody(errorCode: number, message: string, resultCode: number = NACOS_CODE.fail): ResponseBody {
  return { resultCode, errorCode, message, success: false };
}

/** Success is `resultCode == 200`; the response class does not tell. */
export function isOk(body: Record<string, unknown>): boolean {
  return body.resultCode === NACOS_CODE.ok;
}

/** The body of an internal request (server check, health check): only `headers` and `module`. */
export function internalRequest(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return { headers: {}, ...fields, module: 'internal' };
}

/** The body of a naming request on `ref`: namespace (never blank), plain name, group. */
export function namingRequest(ref: ServiceRef, fields: Record<string, unknown>): Record<string, unknown> {
  return { headers: {}, namespace: ref.namespaceId, serviceName: ref.name, groupName: ref.group, ...fields, module: 'naming' };
}

/** An instance as regsync publishes it over gRPC. */
export interface WireInstance {
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
}

/**
 * The instance as every regsync replica writes it, byte for byte: an explicit `instanceId`
 * (`ip#port#cluster#group@@name`, what Nacos 2.3+ would generate), the grouped service name and
 * metadata in sorted key order. Nacos shows instances that print the same once, however many
 * connections publish them, so replicas publishing one set never show an address twice.
 */
export function wireInstance(ref: ServiceRef, instance: Instance): WireInstance {
  const grouped = groupedName(ref);
  const metadata: Record<string, string> = {};
  for (const key of Object.keys(instance.metadata).sort()) metadata[key] = instance.metadata[key] as string;
  return {
    instanceId: `${instance.ip}#${instance.port}#${instance.cluster}#${grouped}`,
    ip: instance.ip,
    port: instance.port,
    weight: instance.weight,
    healthy: instance.healthy,
    enabled: instance.enabled,
    ephemeral: instance.ephemeral,
    clusterName: instance.cluster,
    serviceName: grouped,
    metadata,
  };
}

/** A `ServiceInfo` (subscribe, query, push) as read: who it is about and its instances. */
export interface ServiceInfoRead {
  /** Plain name; Nacos 2.x/3.x send it apart from the group. */
  name: string;
  groupName: string | undefined;
  clusters: string;
  instances: Instance[];
  lastRefTime: number;
  /** `allIPs` (2.x) or `allIps` (3.x). */
  allIps: boolean;
}

/** Reads a `serviceInfo`; throws {@link WireFormatError} when it is not one (a read must fail, not come back empty). */
export function readServiceInfo(info: unknown): ServiceInfoRead {
  if (!isRecord(info) || typeof info.name !== 'string') throw new WireFormatError('serviceInfo without a name');
  const name = info.name;
  const at = name.indexOf('@@');
  const groupName = typeof info.groupName === 'string' && info.groupName !== '' ? info.groupName : at >= 0 ? name.slice(0, at) : undefined;
  return {
    name: at >= 0 && (groupName === undefined || name.startsWith(`${groupName}@@`)) ? name.slice(at + 2) : name,
    groupName,
    clusters: typeof info.clusters === 'string' ? info.clusters : '',
    instances: info.hosts === undefined || info.hosts === null ? [] : hostsToInstances(info.hosts),
    lastRefTime: typeof info.lastRefTime === 'number' ? info.lastRefTime : 0,
    allIps: info.allIps === true || info.allIPs === true,
  };
}

/** Nacos' parameter check (2.3+) on a batch instance: cluster name, metadata size, address. */
const CLUSTER_NAME = /^[0-9a-zA-Z_-]+$/;
const METADATA_MAX_CHARS = 1024;

/**
 * Why Nacos would refuse this instance in a batch, or undefined. A refused instance fails the
 * whole batch, so the adapter leaves such instances out of the set and reports each of them,
 * rather than let one instance keep a whole service from being published.
 */
export function batchProblem(instance: Instance): string | undefined {
  if (instance.ip.trim() === '' || !Number.isInteger(instance.port) || instance.port < 0 || instance.port > 65_535) return 'invalid ip or port';
  if (!CLUSTER_NAME.test(instance.cluster)) return `cluster name ${JSON.stringify(instance.cluster)} does not match ${CLUSTER_NAME.source}`;
  let chars = 0;
  for (const [key, value] of Object.entries(instance.metadata)) chars += key.length + value.length;
  if (chars > METADATA_MAX_CHARS) return `metadata of ${chars} characters (Nacos accepts ${METADATA_MAX_CHARS})`;
  return undefined;
}
