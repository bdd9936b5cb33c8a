/*
 * What the dashboard reads from the REST API, as it reads it. Written out here instead of imported
 * from src/api, which is Node code: the browser build must not pull it in.
 */

/** A registry kind as `GET /api/v1/kinds` lists it: the dashboard learns the kinds from the server. */
export interface Kind {
  name: string;
  label: string;
  defaultPort: number;
  endpointsRequired: boolean;
  /** False: the cluster form hides user name and password (a kubeconfig says how to sign in). */
  usesCredentials: boolean;
  nacosSyncType: string | null;
  options: KindOption[];
}

/** One option of a {@link Kind}, with the JSON shape its input must give. */
export interface KindOption {
  name: string;
  type: 'string' | 'integer' | 'boolean' | 'list' | 'object';
  description: string;
  /** A string taking only these values. */
  choices?: string[];
}

export interface Cluster {
  id: string;
  /** The `name` of one of the server's {@link Kind}s. */
  kind: string;
  endpoints: string[];
  namespace?: string;
  username?: string;
  hasPassword: boolean;
  labels: Record<string, string>;
  options: Record<string, unknown>;
}

export interface ClusterStatus {
  id: string;
  reachability: 'ok' | 'failing' | 'partial' | 'unknown';
  tasks: string[];
  reached: number;
  unreached: number;
  lastError: string | null;
  /** Why it was not reached: credentials refused, no usable connection yet, no answer, or another error. */
  failure: 'auth_failed' | 'not_connected' | 'unreachable' | 'error' | null;
}

export type TaskState = 'running' | 'paused' | 'error';

export interface TaskSummary {
  id: string;
  source: string;
  destination: string;
  service: string;
  group: string;
  namespace: string;
  options: Record<string, unknown>;
  state: TaskState;
  createdAt: string;
  error: string | null;
  serviceSyncs: number;
  sourceInstances: number;
  destinationInstances: number;
  maxLagMs: number | null;
  lastSyncAt: string | null;
  failing: number;
  held: number;
  lastError: string | null;
}

export interface HeldDeletion {
  removes: number;
  copies: number;
  since: string;
  confirm: 'read' | 'operator';
  /** The copies Release removes (`ip:port#cluster`, at most 100). */
  addresses?: string[];
}

export interface ServiceStatus {
  service: string;
  sourceInstances: number;
  destinationInstances: number;
  lastSyncAt: string | null;
  lagMs: number | null;
  lastError: string | null;
  destination?: string;
  held: HeldDeletion | null;
  /** Source instances not copied, by reason. */
  skipped?: Partial<Record<'marked' | 'foreign' | 'unhealthy' | 'disabled' | 'conflicting', number>>;
}

export interface ServicePage {
  total: number;
  items: ServiceStatus[];
}

/** One event of `GET /api/v1/tasks/:id/events` and of the `/api/v1/events` stream. */
export interface SyncEvent {
  id?: string;
  at: string;
  /** `reconciled`, `held`, `released`, `error`, `removed`, `task` or `cluster`. */
  kind: string;
  message: string;
  taskId?: string;
  service?: string;
  clusterId?: string;
}

/** One minute of `GET /api/v1/clusters/:id/history`: failed requests to the cluster, by error code. */
export interface ClusterErrorBucket {
  at: string;
  errors: number;
  byCode: Record<string, number>;
}

export interface Shard {
  shard: number;
  leader: string | null;
  token: number | null;
  leaseTtlLeftMs: number | null;
  leaseAgeMs: number | null;
  replicas: string[];
  queueDepth: number;
  serviceSyncs: number;
}

export interface Shards {
  shards: number;
  replicas: number;
  items: Shard[];
}

export interface Worker {
  id: string;
  host: string;
  pid: number;
  startedAt: string;
  roles: string[];
  leads: number[];
  serves: number[];
}

/** One worker's CMDB (`GET /api/v1/cmdb`); times are epoch milliseconds. */
export interface CmdbStatus {
  worker: string;
  provider: string;
  ok: boolean;
  /** The current or most recent problem (`ok` tells whether it is still current). */
  lastError?: { message: string; at: number; source: 'provider' | 'cache' };
  lastRefreshAt?: number;
  lastEventPollAt?: number;
  entities: number;
}

/** `GET /api/v1/auth/whoami`: `open` when the server has no tokens (or no authentication at all). */
export interface Identity {
  name?: string;
  scope: 'open' | 'read' | 'admin';
}

export interface List<T> {
  items: T[];
}
