import { AdapterPool } from '../../src/engine/adapter-pool.js';
import { HeartbeatScheduler } from '../../src/engine/heartbeat-scheduler.js';
import type { EngineObserver, TaskEventInput } from '../../src/engine/observer.js';
import { Reconciler, type EngineStore, type ReconcilerOptions } from '../../src/engine/reconciler.js';
import { silentLogger } from '../../src/log.js';
import { serviceSyncKey, type ClusterSpec, type ServiceKey, type TaskOptions, type TaskSpec } from '../../src/model/index.js';
import type { RegistryAdapter } from '../../src/model/adapter.js';

/** The service every harness task copies. */
export const SERVICE: ServiceKey = { namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' };

/** A running task `t` copying {@link SERVICE} from cluster `a` to cluster `b`. */
export function harnessTask(options: TaskOptions = {}): TaskSpec {
  return { id: 't', source: 'a', destination: 'b', service: SERVICE.name, group: SERVICE.group, namespace: SERVICE.namespace, options, state: 'running', createdAt: '2024-01-01T00:00:00.000Z' };
}

/** A cluster spec the harness's adapter pool builds a fake adapter for (see `FakeAdapter`). */
export function harnessCluster(id: string): ClusterSpec {
  return { id, kind: 'nacos', endpoints: ['127.0.0.1:1'], labels: {}, options: {} };
}

/** One "worker": a reconciler with its own adapter pool, beats and memory, over a store it may share. */
export interface HarnessWorker {
  reconciler: Reconciler;
  heartbeats: HeartbeatScheduler;
  events: TaskEventInput[];
  reconcile(): ReturnType<Reconciler['reconcile']>;
}

/**
 * Builds a reconciler over `store` whose clusters are the given fake registries (by cluster id),
 * running `task`. Several workers built over one store and one set of registries are replicas of
 * one shard: they share nothing in memory, only the store.
 */
export function harnessWorker(
  store: EngineStore,
  registries: ReadonlyMap<string, RegistryAdapter>,
  task: () => TaskSpec | undefined,
  extra: Partial<ReconcilerOptions> = {},
): HarnessWorker {
  const logger = silentLogger();
  const adapters = new AdapterPool(
    (id) => store.getCluster(id),
    {
      nacos: (spec) => {
        const fake = registries.get(spec.id);
        if (!fake) throw new Error(`no registry ${spec.id} in this test`);
        return fake;
      },
    },
    logger,
  );
  const heartbeats = new HeartbeatScheduler({ logger });
  const events: TaskEventInput[] = [];
  const observer: EngineObserver = { event: (e) => void events.push(e) };
  const reconciler = new Reconciler({ store, adapters, heartbeats, logger, activeTask: () => task(), confirmEmptyMs: 3_000, observer, ...extra });
  const key = () => serviceSyncKey({ taskId: task()?.id ?? 't', service: SERVICE });
  return { reconciler, heartbeats, events, reconcile: () => reconciler.reconcile(key()) };
}
