import { createHash } from 'node:crypto';

/** One registry endpoint, as an operator defines it. */
export interface ClusterSpec {
  /** Stable id; it is what marks (`regsync.origin`, `regsync.path`) refer to. */
  id: string;
  /**
   * The name of one of the kinds in `adapters/kinds.ts` (`KindName` there). A plain string here:
   * the model cannot import the adapters, so the API checks it against the list before storing.
   */
  kind: string;
  /** `host:port` list; any one of them serves. */
  endpoints: string[];
  /** Default namespace of tasks on this cluster (Nacos namespace id; `public` when absent). */
  namespace?: string | undefined;
  username?: string | undefined;
  password?: string | undefined;
  /** Labels (region, site, ...) stamped on instances read from this cluster. */
  labels: Record<string, string>;
  /** Settings of the kind (its descriptor's `options`) and the {@link SHARED_CLUSTER_OPTIONS}; nothing else is accepted. */
  options: Record<string, unknown>;
}

/** A task's running state as the operator set it. */
export type TaskState = 'running' | 'paused';

/** Per-task knobs; every field has a default. */
export interface TaskOptions {
  /** How often every service of the task is re-read and repaired (default 30 s). */
  fullSyncIntervalMs?: number | undefined;
  /**
   * Where a full sync leaves out the services its feeds vouch for (a source that pushes its lists,
   * a destination that keeps copies with regsync's connections): how long a service may go
   * without its destination being read to check the copies (default
   * {@link DEFAULT_VERIFY_INTERVAL_MS}). Each full sync checks its share of the services, so the
   * checks are spread evenly; elsewhere every full sync reconciles every service anyway.
   */
  verifyIntervalMs?: number | undefined;
  /**
   * Which CMDB labels to stamp on copies, by name (e.g. `[site, region, zone]`). Absent: every label
   * the CMDB has for the instance's IP; empty: none. Nothing is stamped when regsync runs without a CMDB.
   */
  labels?: string[] | undefined;
  /**
   * Whether CMDB values replace values the source instance already has under the same key (default
   * false: the source's own value wins, and the CMDB only fills in what is missing).
   */
  labelsOverride?: boolean | undefined;
  /** For `*` tasks: service names to sync (globs, e.g. `orders-*`); absent: every service. */
  include?: string[] | undefined;
  /** For `*` tasks: service names never synced (globs); absent: `consumers:*` (Dubbo's consumer entries). */
  exclude?: string[] | undefined;
  /** Where copies go and what they carry, when not the same service with the same metadata. */
  mapping?: ServiceMapping | undefined;
  /** Most service syncs one task may have (default {@link DEFAULT_MAX_SERVICES}); the rest are not synced and the task says so. */
  maxServices?: number | undefined;
  /** Most instances one service may have to be synced (default {@link DEFAULT_MAX_INSTANCES}); a larger one is left as it is and its status says so. */
  maxInstances?: number | undefined;
  /**
   * Mass-deletion guard: a reconcile that would remove more than this share (percent) of a
   * service's copies waits for a confirming read (default 50; 100 turns the guard off).
   */
  massDeletionPercent?: number | undefined;
  /** The guard applies to services with more than this many copies (default 4). */
  massDeletionMinCopies?: number | undefined;
  /**
   * How far back the mass-deletion guard looks, ms (default 60 s): removals are judged against the
   * most copies the service had within it, so that a burst of single removals counts as one drop.
   */
  massDeletionWindowMs?: number | undefined;
  /**
   * What confirms a held mass deletion: `read` (default), a read `confirm` later that still sees
   * the drop, or `operator`, only `POST /api/v1/tasks/:id/release`.
   */
  massDeletionConfirm?: 'read' | 'operator' | undefined;
}

/** How a task names the copies of a source service, and which metadata they carry. */
export interface ServiceMapping {
  /** Source namespace -> destination namespace. */
  namespaces?: Record<string, string> | undefined;
  /** Source group -> destination group. */
  groups?: Record<string, string> | undefined;
  /** Source service name -> destination name (exact; prefix and suffix do not apply to these). */
  rename?: Record<string, string> | undefined;
  prefix?: string | undefined;
  suffix?: string | undefined;
  /** Metadata keys copied (globs); absent: all. regsync's marks are always written. */
  metadataAllow?: string[] | undefined;
  /** Metadata keys never copied (globs); applied after `metadataAllow`. */
  metadataDeny?: string[] | undefined;
}

/** A mass deletion waiting for confirmation. */
export interface HeldDeletion {
  /** Copies the reconcile would remove, and how many the task has in the service. */
  removes: number;
  copies: number;
  /** When it was first held (ISO time). */
  since: string;
  /** What releases it: a read `confirmMs` after `since` that agrees, or only an operator. */
  confirm: 'read' | 'operator';
  /**
   * The most copies the service had within the guard's window, when more than `copies` (earlier
   * removals within the window count towards the drop); absent: `copies`.
   */
  peak?: number | undefined;
  /** The copies a release would remove (`ip:port#cluster`, at most {@link MAX_HELD_ADDRESSES}). */
  addresses?: string[] | undefined;
}

/** How many addresses of a held deletion its status lists. */
export const MAX_HELD_ADDRESSES = 100;

export const DEFAULT_MAX_SERVICES = 50_000;
export const DEFAULT_MAX_INSTANCES = 10_000;
export const DEFAULT_EXCLUDE = ['consumers:*'] as const;
export const DEFAULT_MASS_DELETION_PERCENT = 50;
export const DEFAULT_MASS_DELETION_MIN_COPIES = 4;
export const DEFAULT_MASS_DELETION_WINDOW_MS = 60_000;

export const DEFAULT_FULL_SYNC_MS = 30_000;
/** Default {@link TaskOptions.verifyIntervalMs}: 30 minutes. */
export const DEFAULT_VERIFY_INTERVAL_MS = 1_800_000;

/** What an operator asks for: copy `service` of `namespace`/`group` from `source` to `destination`. */
export interface TaskSpec {
  id: string;
  source: string;
  destination: string;
  /** A service name, or `*` for every service of the namespace and group. */
  service: string;
  group: string;
  namespace: string;
  options: TaskOptions;
  state: TaskState;
  createdAt: string;
}

/** Identifies a service inside one registry. */
export interface ServiceKey {
  namespace: string;
  group: string;
  name: string;
}

/** An instance in registry-neutral form; adapters convert to and from their wire shapes. */
export interface Instance {
  ip: string;
  port: number;
  weight: number;
  healthy: boolean;
  enabled: boolean;
  ephemeral: boolean;
  /** Nacos cluster name (`DEFAULT` when the registry has no such notion). */
  cluster: string;
  metadata: Record<string, string>;
}

/** Metadata keys regsync writes on every copy (URL parameters in Dubbo, annotations in Kubernetes). */
export const MARK_ORIGIN = 'regsync.origin';
export const MARK_PATH = 'regsync.path';
export const MARK_TASK = 'regsync.task';

/** Marks other sync tools write; read only, so that their copies are never sent back where they came from. */
export const FOREIGN_MARKS = {
  nacosSyncSourceCluster: 'sourceClusterId',
  nacosSyncTag: 'sync.instance.tag',
  polarisSync: '__sync__',
  /**
   * consul-k8s and other tools that register services into Consul on another system's behalf name
   * that system here (`kubernetes`); a registry whose adapter lists the name among its
   * `foreignNames` never gets such a copy back.
   */
  externalSource: 'external-source',
} as const;

export const DEFAULT_NAMESPACE = 'public';
export const DEFAULT_GROUP = 'DEFAULT_GROUP';
export const DEFAULT_INSTANCE_CLUSTER = 'DEFAULT';

/** The identity of an instance inside a service: address and cluster. */
export function instanceId(i: Pick<Instance, 'ip' | 'port' | 'cluster'>): string {
  return `${i.ip}:${i.port}#${i.cluster}`;
}

export function serviceKeyString(s: ServiceKey): string {
  return `${s.namespace}/${s.group}/${s.name}`;
}

/** Orders service keys by namespace, group, then name (code-unit order, the same everywhere). */
export function compareServiceKeys(a: ServiceKey, b: ServiceKey): number {
  const order = (x: string, y: string) => (x < y ? -1 : x > y ? 1 : 0);
  return order(a.namespace, b.namespace) || order(a.group, b.group) || order(a.name, b.name);
}

/** The unit of work: one service of one task. */
export interface ServiceSync {
  taskId: string;
  service: ServiceKey;
}

/** `taskId|namespace|group|name`, the id BullMQ de-duplicates reconciles by. */
export function serviceSyncKey(s: ServiceSync): string {
  return [s.taskId, s.service.namespace, s.service.group, s.service.name].map(encodeURIComponent).join('|');
}

export function parseServiceSyncKey(key: string): ServiceSync {
  const parts = key.split('|').map(decodeURIComponent);
  if (parts.length !== 4 || parts.some((p) => p === '')) throw new Error(`malformed service sync key: ${key}`);
  const [taskId, namespace, group, name] = parts as [string, string, string, string];
  return { taskId, service: { namespace, group, name } };
}

/**
 * An order-independent digest of instances with every field (address, weight, flags, cluster,
 * metadata): equal for equal sets, whatever order a registry lists them in.
 */
export function instancesDigest(instances: readonly Instance[]): string {
  const rows = instances.map(digestRow).sort();
  return createHash('sha1').update(rows.join('\n')).digest('base64url');
}

/**
 * One instance as `JSON.stringify([ip, port, cluster, weight, healthy, enabled, ephemeral, [[key,
 * value], ...]])` with the metadata sorted by key, written out directly (every reconcile and every
 * poll digests what it read).
 */
function digestRow(i: Instance): string {
  let metadata = '';
  for (const key of Object.keys(i.metadata).sort()) {
    metadata += `${metadata === '' ? '' : ','}[${JSON.stringify(key)},${JSON.stringify(i.metadata[key])}]`;
  }
  return `[${JSON.stringify(i.ip)},${JSON.stringify(i.port)},${JSON.stringify(i.cluster)},${JSON.stringify(i.weight)},${i.healthy},${i.enabled},${i.ephemeral},[${metadata}]]`;
}
