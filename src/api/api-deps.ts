import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { DeploymentView } from '../coord/deployment-view.js';
import type { TaskControl } from '../engine/control.js';
import type { ApiToken } from './auth-tokens.js';
import type { RateLimitSettings } from './rate-limit.js';
import type { EventRoutesOptions, TaskEventSource } from './event-routes.js';
import type { MetricsSource } from './metrics-routes.js';
import type { TaskHistorySource } from './history-routes.js';
import type { ClusterHistorySource } from './cluster-history-routes.js';
import type { RegsyncStore } from '../store/index.js';

/** Where `GET /api/v1/dns` reads from: undefined while no DNS server runs in this process. */
export interface DnsStatusSource {
  status(): Promise<unknown> | undefined;
}

/** What {@link buildApiApp} needs. */
export interface ApiDeps {
  /** Where clusters, tasks and status live. */
  store: RegsyncStore;
  /** The sync engine, told about every change once the store holds it. */
  control: TaskControl;
  /** The store's connection; `/readyz` pings it. */
  redis: Redis;
  /** Parent logger; the app logs under `component: api`. Silent when absent. */
  logger?: Logger;
  /** Largest accepted request body in bytes (default 64 KiB). */
  bodyLimitBytes?: number;
  /** API tokens (read or admin); none or empty: the API is open, as before tokens existed, and says so in the log. */
  tokens?: readonly ApiToken[] | undefined;
  /** Requests per client address and window (default 600 a minute); `false`: no limit. */
  rateLimit?: RateLimitSettings | false | undefined;
  /** Shards and workers for `/api/v1/shards` and `/api/v1/workers`; those routes are absent without it. */
  deployment?: DeploymentView;
  /** The process's Prometheus metrics for `GET /metrics`; the route is absent without it. */
  metrics?: MetricsSource | undefined;
  /** The task event log for `GET /api/v1/tasks/:id/events` and the `GET /api/v1/events` stream; absent without it. */
  events?: TaskEventSource | undefined;
  /** Task samples of the last hour for `GET /api/v1/tasks/:id/history`; the route is absent without it. */
  history?: TaskHistorySource | undefined;
  /** Failed requests per cluster and minute for `GET /api/v1/clusters/:id/history`; the route is absent without it. */
  clusterHistory?: ClusterHistorySource | undefined;
  /** Serve HTTPS with this certificate chain and key (PEM); absent: plain HTTP. */
  tls?: { cert: Buffer; key: Buffer } | undefined;
  /** The DNS server this process runs, for `GET /api/v1/dns`; absent or answering undefined: the route says none runs. */
  dns?: DnsStatusSource | undefined;
  /** Options of the event routes (the stream's keep-alive period). */
  eventRoutes?: EventRoutesOptions | undefined;
}

/** What route modules get: the deps with the defaults applied. */
export interface RouteContext {
  store: RegsyncStore;
  control: TaskControl;
  redis: Redis;
  log: Logger;
}
