import { createHash } from 'node:crypto';
import { KINDS, kindNamed, validateCluster } from '../../adapters/kinds.js';
import { ClusterConfigError, DEFAULT_GROUP, NACOS_SYNC_NAME_OPTION, type ClusterSpec, type TaskSpec } from '../model/index.js';
import { NacosSyncError, RESULT_SYSTEM_ERROR } from './nacos-sync-error.js';
import { ENDPOINT_PATTERN, NAME_PATTERN } from '../validation/patterns.js';

/**
 * nacos-sync's wire contract, as pure functions: ids, cluster types, connect keys, the result
 * envelope, the cluster and task models, paging. The facts come from nacos-sync's sources
 * (`SkyWalkerUtil`, `ClusterTypeEnum`, `TaskStatusEnum`, `BaseResult`, `ClusterModel`, `TaskModel`,
 * the `*Processor` classes); see `src/api/nacos-sync-routes.ts` for the routes that use them.
 */

/** `ResultCodeEnum.SUCCESS`: the `resultCode` of every successful answer. */
export const RESULT_SUCCESS = 'SUCCESS';

/** nacos-sync's `BaseResult`: every answer carries these three fields. */
export interface NacosSyncResult {
  success: boolean;
  /** `null` on success (unless a route has something to say), the reason on failure. */
  resultMessage: string | null;
  resultCode: string;
}

/** A successful answer: the base fields plus the route's own (`clusterModels`, `taskModel`, ...). */
export function okResult<T extends object>(fields: T, message: string | null = null): NacosSyncResult & T {
  return { success: true, resultMessage: message, resultCode: RESULT_SUCCESS, ...fields };
}

/** A failed answer, as `SkyWalkerTemplate` builds it from a `SkyWalkerException`. */
export function failedResult(message: string): NacosSyncResult {
  return { success: false, resultMessage: message, resultCode: RESULT_SYSTEM_ERROR };
}

/** Every cluster type nacos-sync knows (`ClusterTypeEnum`), in its order. */
export const NACOS_SYNC_CLUSTER_TYPES = ['CS', 'NACOS', 'EUREKA', 'CONSUL', 'ZK'] as const;

/**
 * The nacos-sync cluster types regsync serves, with the kind each becomes: every kind whose
 * descriptor names a `nacosSyncType`. nacos-sync's ZK clusters hold Dubbo providers, which is the
 * default layout of regsync's ZooKeeper adapter.
 */
export const SUPPORTED_CLUSTER_TYPES: Readonly<Record<string, string>> = Object.fromEntries(
  KINDS.flatMap((k) => (k.nacosSyncType === undefined ? [] : [[k.nacosSyncType, k.name]])),
);

/**
 * The nacos-sync type a regsync cluster shows: its kind's `nacosSyncType`, else the kind in upper
 * case (a Kubernetes cluster defined through the native API: nacos-sync has no such type; scripts
 * never create one).
 */
export function clusterTypeOf(kind: string): string {
  return kindNamed(kind)?.nacosSyncType ?? kind.toUpperCase();
}

/**
 * The key of `ClusterSpec.options` that keeps the nacos-sync `clusterName` of a cluster created
 * through `/v1/cluster/add`. Options, not labels: a cluster's labels are stamped on every copy read
 * from it.
 */
export { NACOS_SYNC_NAME_OPTION };

/** MD5 of the UTF-8 bytes, as lowercase hex: `SkyWalkerUtil.StringToMd5`. */
export function md5Hex(value: string): string {
  return createHash('md5').update(value, 'utf8').digest('hex');
}

/** What Java's `StringBuilder.append` writes for a string that may be null. */
function javaString(value: string | null | undefined): string {
  return value ?? 'null';
}

/**
 * nacos-sync's cluster id: `md5(clusterName + "_" + clusterType)` (`SkyWalkerUtil.generateClusterId`).
 * 32 lowercase hex digits, always a valid regsync id, so it is the regsync cluster id as well.
 */
export function nacosSyncClusterId(clusterName: string, clusterType: string): string {
  return md5Hex(`${clusterName}_${clusterType}`);
}

/**
 * nacos-sync's task id: `md5(serviceName + "_" + groupName + "_" + sourceClusterId + "_" +
 * destClusterId)` (`SkyWalkerUtil.generateTaskId`), with Java's `"null"` for an absent group, as
 * nacos-sync computes it. Always a valid regsync id, so it is the regsync task id as well.
 */
export function nacosSyncTaskId(
  serviceName: string,
  groupName: string | null | undefined,
  sourceClusterId: string,
  destClusterId: string,
): string {
  return md5Hex([serviceName, javaString(groupName), sourceClusterId, destClusterId].join('_'));
}

/** `/v1/cluster/add`'s body (`ClusterAddRequest`), as the schema lets it through. */
export interface ClusterAddRequest {
  clusterName?: string | null;
  clusterType?: string | null;
  connectKeyList?: string[] | null;
  userName?: string | null;
  password?: string | null;
  namespace?: string | null;
}

/** True for null, undefined, and strings of whitespace only (`StringUtils.isBlank`). */
export function isBlank(value: string | null | undefined): value is null | undefined | '' {
  return value === null || value === undefined || value.trim() === '';
}

/**
 * The regsync cluster a `/v1/cluster/add` body describes, checked as nacos-sync checks it (connect
 * keys, name and type present, a known type) and as the native API would (endpoints, namespace),
 * so that the native API accepts the stored cluster as it is. Throws {@link NacosSyncError}.
 */
export function clusterSpecOf(request: ClusterAddRequest): ClusterSpec {
  const keys = request.connectKeyList ?? [];
  if (keys.every((k) => k.trim() === '')) {
    throw new NacosSyncError('connectKeyList is empty: give the cluster\'s servers as ["host:port", ...]');
  }
  const { clusterName, clusterType } = request;
  if (isBlank(clusterName) || isBlank(clusterType)) throw new NacosSyncError('clusterName and clusterType must not be empty');
  const kind = kindOf(clusterType);
  const namespace = isBlank(request.namespace) ? undefined : checkedName('namespace', request.namespace);
  const connect = connectKeysOf(keys, kind);
  const spec: ClusterSpec = {
    id: nacosSyncClusterId(clusterName, clusterType),
    kind,
    endpoints: connect.endpoints,
    namespace,
    username: isBlank(request.userName) ? undefined : request.userName,
    password: isBlank(request.password) ? undefined : request.password,
    labels: {},
    options: { ...connect.options, [NACOS_SYNC_NAME_OPTION]: clusterName },
  };
  checkedByKind(spec);
  return spec;
}

/** The nacos-sync fields a cluster setting comes from, for messages. */
const REQUEST_FIELDS: Readonly<Record<string, string>> = {
  endpoints: 'connectKeyList',
  [`options.${NACOS_SYNC_NAME_OPTION}`]: 'clusterName',
};

/** Runs the kind's own checks (as the native API does), naming the request's field. */
function checkedByKind(spec: ClusterSpec): void {
  try {
    validateCluster(spec);
  } catch (err) {
    if (!(err instanceof ClusterConfigError)) throw err;
    throw new NacosSyncError(`${REQUEST_FIELDS[err.setting] ?? err.setting}: ${err.detail.slice(0, 300)}`);
  }
}

/** The kind of a nacos-sync cluster type; nacos-sync's others and unknown types are refused, naming the supported ones. */
export function kindOf(clusterType: string): string {
  const kind = SUPPORTED_CLUSTER_TYPES[clusterType];
  if (kind !== undefined) return kind;
  const supported = Object.keys(SUPPORTED_CLUSTER_TYPES).join(', ');
  if ((NACOS_SYNC_CLUSTER_TYPES as readonly string[]).includes(clusterType)) {
    throw new NacosSyncError(`regsync does not support clusterType ${clusterType}; supported types: ${supported}`);
  }
  throw new NacosSyncError(`clusterType ${clusterType} does not exist; supported types: ${supported} (upper case)`);
}

/**
 * nacos-sync connect keys as regsync endpoints: an entry may hold several servers separated by
 * commas (a ZooKeeper connect string), `http://` is dropped, a missing port becomes the kind's
 * default; duplicates go. Paths, query strings (`?key=1`) and `https://` have no regsync
 * equivalent here and are refused, naming the entry, except for kinds that read URLs
 * ({@link connectKeysOf}).
 */
export function endpointsOf(connectKeys: readonly string[], kind: string): string[] {
  return connectKeysOf(connectKeys, kind).endpoints;
}

/**
 * {@link endpointsOf}, and the options connect keys written as URLs say, for kinds that read them
 * (`KindDescriptor.connectKeyUrl`: a Eureka service URL's path is its context path). Every URL of
 * one cluster must say the same options.
 */
export function connectKeysOf(connectKeys: readonly string[], kind: string): { endpoints: string[]; options: Record<string, unknown> } {
  const endpoints: string[] = [];
  let options: Record<string, unknown> | undefined;
  const fromUrl = kindNamed(kind)?.connectKeyUrl;
  for (const entry of connectKeys) {
    for (const piece of entry.split(',')) {
      const key = piece.trim();
      if (key === '') continue;
      let endpoint: string;
      if (fromUrl !== undefined && /^https?:\/\//i.test(key)) {
        let url: URL;
        try {
          url = new URL(key);
        } catch {
          throw new NacosSyncError(`connectKeyList entry ${key.slice(0, 200)} is not a URL`);
        }
        if (url.search !== '' || url.hash !== '' || url.username !== '' || url.password !== '') {
          throw new NacosSyncError(`connectKeyList entry ${key.slice(0, 200)}: parameters and credentials are not supported in the URL`);
        }
        const read = fromUrl(url);
        if (options !== undefined && JSON.stringify(options) !== JSON.stringify(read.options)) {
          throw new NacosSyncError(`connectKeyList entry ${key.slice(0, 200)}: every URL of a cluster must have the same scheme and path`);
        }
        options = read.options;
        endpoint = endpointOf(read.endpoint, kind);
      } else endpoint = endpointOf(key, kind);
      if (!endpoints.includes(endpoint)) endpoints.push(endpoint);
    }
  }
  if (endpoints.length > 32) throw new NacosSyncError(`connectKeyList has ${endpoints.length} servers; at most 32 are allowed`);
  return { endpoints, options: options ?? {} };
}

const ENDPOINT = new RegExp(ENDPOINT_PATTERN);
/** A host name, an IPv4 address or a bracketed IPv6 address, without a port. */
const HOST_ONLY = /^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_][A-Za-z0-9_.-]{0,252})$/;

function endpointOf(key: string, kind: string): string {
  if (/^https:\/\//i.test(key)) throw new NacosSyncError(`connectKeyList entry ${key}: regsync reaches clusters over plain HTTP, https:// is not supported`);
  const bare = key.replace(/^http:\/\//i, '').replace(/\/$/, '');
  if (/[/?#]/.test(bare)) {
    throw new NacosSyncError(`connectKeyList entry ${key} must be host:port; paths and parameters are not supported`);
  }
  const defaultPort = kindNamed(kind)?.defaultPort;
  const endpoint = HOST_ONLY.test(bare) && defaultPort !== undefined ? `${bare}:${defaultPort}` : bare;
  if (!ENDPOINT.test(endpoint) || endpoint.length > 261) {
    throw new NacosSyncError(`connectKeyList entry ${key} must be host:port with a port from 1 to 65535`);
  }
  return endpoint;
}

const NAME = new RegExp(NAME_PATTERN);

/** A namespace or group as the native API accepts it: 1 to 128 characters, no whitespace. */
export function checkedName(field: string, value: string): string {
  if (value.length > 128 || !NAME.test(value)) {
    throw new NacosSyncError(`${field} must be 1 to 128 characters without whitespace`);
  }
  return value;
}

/** nacos-sync's `ClusterModel`: `connectKeyList` is a JSON string, as nacos-sync stores it; never a password. */
export interface NacosSyncClusterModel {
  clusterId: string;
  connectKeyList: string;
  clusterName: string;
  clusterType: string;
  namespace: string | null;
  userName: string | null;
}

/**
 * Shows a regsync cluster as nacos-sync's `ClusterModel`. A cluster defined through the native API
 * has no nacos-sync name: its id stands in.
 */
export function clusterModelOf(spec: ClusterSpec): NacosSyncClusterModel {
  const name = spec.options[NACOS_SYNC_NAME_OPTION];
  return {
    clusterId: spec.id,
    connectKeyList: JSON.stringify(spec.endpoints),
    clusterName: typeof name === 'string' && name !== '' ? name : spec.id,
    clusterType: clusterTypeOf(spec.kind),
    namespace: spec.namespace ?? null,
    userName: spec.username ?? null,
  };
}

/** nacos-sync's task states (`TaskStatusEnum`). */
export const TASK_STATUS_SYNC = 'SYNC';
export const TASK_STATUS_DELETE = 'DELETE';

/**
 * What `taskStatus` shows for a task that was paused through the native API: nacos-sync has no
 * such state, and `DELETE` would wrongly say that its copies are gone.
 */
export const TASK_STATUS_PAUSED = 'PAUSED';

/** nacos-sync's `TaskModel`. */
export interface NacosSyncTaskModel {
  taskId: string;
  sourceClusterId: string;
  destClusterId: string;
  serviceName: string;
  groupName: string;
  taskStatus: string;
}

/** Shows a regsync task as nacos-sync's `TaskModel`. */
export function taskModelOf(spec: TaskSpec): NacosSyncTaskModel {
  return {
    taskId: spec.id,
    sourceClusterId: spec.source,
    destClusterId: spec.destination,
    serviceName: spec.service,
    groupName: spec.group,
    taskStatus: spec.state === 'paused' ? TASK_STATUS_PAUSED : TASK_STATUS_SYNC,
  };
}

/** The group a task gets from nacos-sync's `groupName`: blank means `DEFAULT_GROUP`, as nacos-sync syncs it. */
export function groupOf(groupName: string | null | undefined): string {
  return isBlank(groupName) ? DEFAULT_GROUP : checkedName('groupName', groupName);
}

/** `/v1/task/add`'s body (`TaskAddRequest`), as the schema lets it through. */
export interface TaskAddRequest {
  sourceClusterId: string;
  destClusterId: string;
  serviceName: string;
  groupName?: string | null;
  version?: string | null;
  nameSpace?: string | null;
}

/** The regsync task a `/v1/task/add` body describes, before the clusters and rules are checked. */
export interface NacosSyncTaskBody {
  id: string;
  source: string;
  destination: string;
  service: string;
  group: string;
  /** Absent: the source cluster's namespace, as for any task. */
  namespace?: string;
}

/**
 * The task a `/v1/task/add` body (or a row of nacos-sync's `task` table) describes: nacos-sync's
 * id, the group `groupName` gives (blank: `DEFAULT_GROUP`), the namespace of `nameSpace` when one
 * is given. A Dubbo `version` filter is refused: regsync syncs every version of a service. Throws
 * {@link NacosSyncError}.
 */
export function taskBodyOf(request: TaskAddRequest): NacosSyncTaskBody {
  if (!isBlank(request.version)) {
    throw new NacosSyncError('version is not supported: regsync syncs every version of a service; leave version empty');
  }
  return {
    id: nacosSyncTaskId(request.serviceName, request.groupName, request.sourceClusterId, request.destClusterId),
    source: request.sourceClusterId,
    destination: request.destClusterId,
    service: request.serviceName,
    group: groupOf(request.groupName),
    ...(isBlank(request.nameSpace) ? {} : { namespace: checkedName('nameSpace', request.nameSpace) }),
  };
}

/** One page of a list, with nacos-sync's counters (Spring Data's `Page`). */
export interface Paged<T> {
  items: T[];
  totalPage: number;
  totalSize: number;
  currentSize: number;
}

/** Page `pageNum` (from 1) of `pageSize` items; a page past the end is empty. */
export function pageOf<T>(items: readonly T[], pageNum: number, pageSize: number): Paged<T> {
  const page = items.slice((pageNum - 1) * pageSize, pageNum * pageSize);
  return { items: page, totalPage: Math.ceil(items.length / pageSize), totalSize: items.length, currentSize: page.length };
}

/** Java's `Integer.MAX_VALUE`: nacos-sync's page numbers and sizes are `Integer`s. */
const MAX_INT = 2_147_483_647;

/**
 * A `pageNum`/`pageSize` query parameter: absent or empty gives `fallback` (nacos-sync fails
 * without them; a default serves scripts better), anything but a whole number from 1 is refused.
 */
export function pageParam(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw.trim() === '') return fallback;
  const value = /^\s*\d{1,10}\s*$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(value) || value < 1 || value > MAX_INT) {
    throw new NacosSyncError(`${name} must be a whole number from 1 to ${MAX_INT}`);
  }
  return value;
}

/** Whether `name` contains `filter`, ignoring case (nacos-sync's `LIKE %filter%` on MySQL). Blank filters match all. */
export function matchesFilter(name: string, filter: string | undefined): boolean {
  return filter === undefined || filter.trim() === '' || name.toLowerCase().includes(filter.trim().toLowerCase());
}

/**
 * The `taskIds` of `/v1/task/deleteInBatch`: repeated parameters, comma-separated values or both
 * (Spring binds either to a `List<String>`); blanks and duplicates dropped, order kept.
 */
export function idList(raw: string | readonly string[] | undefined): string[] {
  const values = raw === undefined ? [] : typeof raw === 'string' ? [raw] : raw;
  const ids: string[] = [];
  for (const value of values) {
    for (const piece of value.split(',')) {
      const id = piece.trim();
      if (id !== '' && !ids.includes(id)) ids.push(id);
    }
  }
  return ids;
}
