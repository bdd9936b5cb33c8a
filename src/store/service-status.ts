import type { HeldDeletion, ServiceKey } from '../model/index.js';

/**
 * What the engine last saw of one service of a task: instance counts on both sides, when the last
 * reconcile finished, how far behind the destination was, and the last failure.
 *
 * Deliberately left out: history. Only the latest state is kept; trends belong to metrics.
 */
export interface ServiceStatus {
  service: ServiceKey;
  /** Instances the source held at the last reconcile. */
  sourceInstances: number;
  /** Instances of this task the destination held after the last reconcile. */
  destinationInstances: number;
  /** ISO-8601 time of the last successful reconcile; null before the first one. */
  lastSyncAt: string | null;
  /** Time from the source change to the destination write of the last reconcile; null when unknown. */
  lagMs: number | null;
  /** Message of the last failed reconcile; null once a reconcile succeeds again. */
  lastError: string | null;
  /**
   * Digest of the source instances the last reconcile read (`instancesDigest`); a new shard leader
   * compares its own first read with it to find the services that changed while nobody watched.
   * Absent in records written before it existed.
   */
  sourceDigest?: string | undefined;
  /** A mass deletion held back until confirmed; null or absent: none. */
  held?: HeldDeletion | null | undefined;
}
