import type { BeatResult, Instance } from '../../src/model/index.js';
import type { NacosApiVersion } from './nacos-options.js';
import type { GroupedService, ServiceRef } from './wire.js';

/** Where the server should push changes of a listed service (v1 `udpPort` + `clientIP`). */
export interface PushSubscription {
  udpPort: number;
  clientIP: string;
}

/** A heartbeat's outcome and what the server said about the next ones. */
export interface BeatAnswer {
  result: BeatResult;
  /** The server's `clientBeatInterval`, when it told one. */
  intervalMs?: number | undefined;
  /** Whether the server accepts beats without the instance body (v1 `lightBeatEnabled`). */
  lightBeatEnabled?: boolean | undefined;
}

/**
 * One HTTP dialect of the Nacos naming API. The adapter holds one, chosen once per cluster; the
 * dialects differ in paths, parameters and answer shapes, not in meaning. Every method rejects with
 * a `NacosRequestError` when the server fails or answers something it cannot read.
 */
export interface NacosApi {
  readonly version: NacosApiVersion;
  /** Whether listing with a {@link PushSubscription} makes the server push changes. */
  readonly supportsPush: boolean;
  /** Names of every service of exactly this group (all pages). */
  listServiceNames(namespaceId: string, group: string, pageSize: number): Promise<string[]>;
  /** Every service of every group of a namespace (all pages), each with its group. */
  listAllServices(namespaceId: string, pageSize: number): Promise<GroupedService[]>;
  /** Ids of every namespace of the cluster; the public one is `public` whatever the server calls it. */
  listNamespaces(): Promise<string[]>;
  /** Every instance of a service (v1 leaves disabled ones out, as Nacos' client list does). */
  listInstances(ref: ServiceRef, subscription?: PushSubscription): Promise<Instance[]>;
  /** Creates or replaces an instance with every field. */
  register(ref: ServiceRef, instance: Instance): Promise<void>;
  /** Removes an instance; an instance already gone counts as removed. */
  deregister(ref: ServiceRef, instance: Instance): Promise<void>;
  /** Renews an ephemeral instance; `light` omits the instance body (v1). */
  beat(ref: ServiceRef, instance: Instance, light: boolean): Promise<BeatAnswer>;
}
