import type { Instance, ServiceKey } from './types.js';

/** Stops a watch. */
export type Unsubscribe = () => void;

/** What to write to a destination service: instances to create or replace, instances to remove. */
export interface ApplyPlan {
  upsert: Instance[];
  remove: Instance[];
  /**
   * Given to connection-bound adapters only ({@link RegistryAdapter.connectionBound}): every copy
   * `owner` (a service sync key) wants in the service once the plan is applied, the upserts and the
   * unchanged alike. Its ephemeral instances replace what this process publishes for `owner` (as
   * {@link RegistryAdapter.publish}); the plan's ephemeral removals are implied by it.
   */
  desired?: { owner: string; instances: Instance[] } | undefined;
}

/**
 * Which services came into and went out of a watched scope since the last call of a
 * {@link RegistryAdapter.watchServices} watcher, keyed as `listServices` of that scope answers them
 * (real namespace and group under a `*`). A service is in one list at most, the one it ended in (added
 * then removed: removed). A change names every service that came or went, or is not given at all.
 */
export interface ServicesChange {
  added: ServiceKey[];
  removed: ServiceKey[];
}

/** The answer of one heartbeat: `unknown` means the registry lost the instance and it must be registered again. */
export type BeatResult = 'ok' | 'unknown';

/**
 * One registry, seen by the engine. One adapter per cluster, shared by every task that uses it
 * (one connection, one push socket, one session per cluster). Only what the engine calls is here.
 */
export interface RegistryAdapter {
  readonly clusterId: string;
  /**
   * Services of a namespace and group. Either may be `*`: every namespace (group) the registry has;
   * each key then carries its real namespace and group. Rejects rather than answer part of a list.
   */
  listServices(scope: { namespace: string; group: string }): Promise<ServiceKey[]>;
  /**
   * Calls `onChange` whenever services may have appeared or vanished in the scope (tasks for `*`).
   * An adapter that knows exactly which services came and went (they were pushed to it) passes
   * them as a {@link ServicesChange}, and the engine can start the new ones without listing the
   * scope; without one (a poll saw a different list, the adapter lost track) the engine lists the
   * scope again. Absent where the registry cannot tell; the engine then re-lists at every full sync.
   */
  watchServices?(scope: { namespace: string; group: string }, onChange: (change?: ServicesChange) => void): Unsubscribe;
  /**
   * The services a task naming `service` covers, where one name stands for several (a bare Dubbo
   * interface on ZooKeeper: one service per version and group its providers have, named as Dubbo
   * consumers look them up); may be empty, and grows and shrinks like a `*` task's list. Absent, or
   * answering `[service]`: the task syncs `service` itself. Rejects rather than answer part of a list.
   */
  expandService?(service: ServiceKey): Promise<ServiceKey[]>;
  /**
   * Calls `onChange` whenever {@link expandService} of `service` may answer differently. Absent: the
   * engine expands again at every full sync.
   */
  watchExpansion?(service: ServiceKey, onChange: () => void): Unsubscribe;
  /** Current instances of a service; rejects when the registry cannot be read (never "empty" on error). */
  listInstances(service: ServiceKey): Promise<Instance[]>;
  /**
   * Problems found by the last `listInstances` of this service that did not stop it (a malformed
   * node skipped, say), each naming where; shown in the task status.
   */
  readIssues?(service: ServiceKey): string[];
  /**
   * Where copies live only as long as their writer's session (ZooKeeper ephemeral nodes): takes
   * copies the engine found unchanged, and another process may have written, into this adapter's
   * session, so they outlive that process. Called by the shard's leader only.
   */
  retain?(service: ServiceKey, instances: Instance[]): Promise<void>;
  /**
   * Calls `onChange` (no data: the engine re-reads) whenever the service may have changed, in real
   * time where the registry can push, by polling otherwise. An adapter whose watch cannot tell
   * whether its first read differs from what was read before (nothing was read in this process)
   * may pass that read as {@link WatchEvent.firstRead}, for the engine to compare.
   */
  watch(service: ServiceKey, onChange: (event?: WatchEvent) => void, options?: WatchOptions): Unsubscribe;
  /**
   * Writes a plan; rejects after trying every write when any failed. A `WriteRefusedError`
   * means retrying the same plan cannot succeed (the engine then waits for the next full sync
   * instead of retrying at once).
   */
  apply(service: ServiceKey, plan: ApplyPlan): Promise<void>;
  /**
   * Whether copies written here live only as long as this process's connection, and a connection
   * holds one publish set per service that a write replaces whole (Nacos 2.x/3.x gRPC). Then nothing
   * beats, `apply` gets {@link ApplyPlan.desired}, and every replica of a shard publishes the same
   * sets through {@link publish}, so that a killed process's copies stay (the registry shows identical
   * instances from several connections once). May resolve the registry's dialect on first call.
   */
  connectionBound?(): Promise<boolean>;
  /**
   * Connection-bound registries: makes this process publish `instances` (ephemeral copies) as
   * `owner`'s share of the service, replacing what it published for `owner` before; none withdraws
   * them. Owners' shares of one service are merged into the one set the connection holds. Resolves
   * once the registry accepted the set (at once when nothing changed); while the connection is down
   * it keeps the set and publishes it again on reconnect.
   */
  publish?(service: ServiceKey, owner: string, instances: readonly Instance[]): Promise<void>;
  /**
   * Renews one ephemeral instance, where the registry needs it (Nacos). Absent for registries whose
   * ephemeral nodes live with the session (ZooKeeper) or that have none (Kubernetes).
   */
  heartbeat?(service: ServiceKey, instance: Instance): Promise<BeatResult>;
  /**
   * The digest (`instancesDigest`) of the service's instances as a live push feed in this process
   * holds them (a subscription whose pushes carry the whole list, on a connection that is up), or
   * undefined where the adapter keeps no such feed for it. With it, a full sync can leave out
   * services whose source did not change since their last reconcile.
   */
  cachedDigest?(service: ServiceKey): string | undefined;
  /**
   * Whether the scope's service list, as `listServices` answers it now, is kept whole by pushes
   * from the registry (Nacos 3.x fuzzy watch), so that `watchServices` calls tell every change.
   * With it, a full sync need not list the scope again except on its verifying turns.
   */
  servicesPushed?(scope: { namespace: string; group: string }): boolean;
  /** What this process's connection to the registry does, where the kind keeps one (Nacos gRPC); for metrics. */
  transportStats?(): TransportStats | undefined;
  /**
   * Names other sync tools give registries of this kind in their marks (consul-k8s marks the
   * Kubernetes services it registers in Consul `external-source: kubernetes`): copies marked with
   * any of them came from such a registry and are never written here.
   */
  readonly foreignNames?: readonly string[];
  /**
   * Whether every copy needs `heartbeat`, not only the ephemeral ones: a registry where every
   * registration is a lease (Eureka).
   */
  readonly leasesEveryInstance?: boolean;
  /** How often `heartbeat` must be called per instance. */
  readonly heartbeatIntervalMs?: number;
  close(): Promise<void>;
}

/** A registry connection's counters (see {@link RegistryAdapter.transportStats}). */
export interface TransportStats {
  /** Connections open now. */
  connections: number;
  /** Connections made again after one was lost, since the adapter was built. */
  reconnects: number;
  /** Pushes received (changes the registry sent unasked). */
  pushesReceived: number;
  /** Services whose copies this connection publishes. */
  publishSets: number;
}

/** What the engine tells a watch about the reads that follow it. */
export interface WatchOptions {
  /**
   * A read of the service follows in this process (the engine queued a reconcile that only this
   * process can run): a watch that polls may take that read as its start and poll later. Without
   * it, the reads may all happen elsewhere, and the watch's own first read comes soon.
   */
  readFollows?: boolean;
}

/** What a watch may tell along with a change. */
export interface WatchEvent {
  /**
   * The watch's first read, when nothing was read in this process before it to compare with: the
   * service may not have changed at all (the engine compares with what its last reconcile read).
   */
  firstRead?: readonly Instance[];
}
