import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { DeploymentView } from '../coord/deployment-view.js';
import type { TaskControl } from '../engine/control.js';
import type { RegsyncStore } from '../store/index.js';

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
  /** Shards and workers for `/api/v1/shards` and `/api/v1/workers`; those routes are absent without it. */
  deployment?: DeploymentView;
}

/** What route modules get: the deps with the defaults applied. */
export interface RouteContext {
  store: RegsyncStore;
  control: TaskControl;
  redis: Redis;
  log: Logger;
}
