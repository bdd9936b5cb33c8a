import type { Logger } from 'pino';
import type { Instance, ServiceKey, Unsubscribe } from '../../src/model/index.js';
import type { ZooKeeperConnection } from './zookeeper-connection.js';
import type { ZooKeeperLayoutName } from './zookeeper-options.js';
import type { ZooKeeperWatches } from './zookeeper-watches.js';

/** One instance node as read. */
export interface NodeRecord {
  path: string;
  instance: Instance;
  /** The node's data where the layout reads it (Curator); undefined for Dubbo, whose node name is the data. */
  data: Buffer | undefined;
}

/** A service's nodes, and the nodes skipped as malformed (`{path}: {why}`). */
export interface ReadResult {
  nodes: NodeRecord[];
  issues: string[];
}

/** A node to write. */
export interface EncodedNode {
  path: string;
  data: Buffer;
}

/** What a layout works with. */
export interface LayoutContext {
  clusterId: string;
  root: string;
  conn: ZooKeeperConnection;
  watches: ZooKeeperWatches;
  log: Logger;
  /** Logs a malformed node once (not at every read). */
  warnOnce: (path: string, reason: string) => void;
}

/**
 * Where a layout keeps services and instances, and how it encodes them. Reads reject on any
 * failure (a failed read is never an empty service); malformed nodes are skipped and reported.
 */
export interface ZooKeeperLayout {
  readonly name: ZooKeeperLayoutName;
  /** Whether the watch of a service must also watch its nodes' data (Curator updates nodes in place). */
  readonly watchesData: boolean;
  /** The directory holding the service's instance nodes; throws `ZooKeeperServiceNameError` for a name the layout cannot map. */
  directoryOf(service: ServiceKey): string;
  /** Names of every service under the root. */
  listServiceNames(): Promise<string[]>;
  /** Calls `onChange` when the list of service names may have changed. */
  watchServiceNames(onChange: () => void): Unsubscribe;
  /**
   * The service names a task naming `name` covers, where one name stands for several (Dubbo: a bare
   * interface, one name per version and group found). Absent: `name` alone.
   */
  expandServiceName?(name: string): Promise<string[]>;
  /** Calls `onChange` when {@link expandServiceName} of `name` may answer differently. */
  watchExpansion?(name: string, onChange: () => void): Unsubscribe;
  /** The service's instance nodes. */
  read(service: ServiceKey): Promise<ReadResult>;
  /** The node that holds `instance` in `service`; throws `ZooKeeperInstanceError` when it cannot be written. */
  encode(service: ServiceKey, instance: Instance): EncodedNode;
  /** Does a node with `existing` data already say what `wanted` says (apart from volatile fields)? */
  sameContent(existing: Buffer, wanted: Buffer): boolean;
}

/**
 * Calls `notify` at most once per turn of the event loop however many times `trigger` is called,
 * so that a burst of watch events becomes one service-list refresh.
 */
export function coalesce(notify: () => void): { trigger: () => void; cancel: () => void } {
  let scheduled: NodeJS.Immediate | undefined;
  return {
    trigger: () => {
      scheduled ??= setImmediate(() => {
        scheduled = undefined;
        notify();
      });
    },
    cancel: () => {
      if (scheduled) clearImmediate(scheduled);
      scheduled = undefined;
    },
  };
}
