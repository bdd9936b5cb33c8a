import type { RegistryAdapter } from '../model/adapter.js';
import type { ServiceStatus } from '../model/service-status.js';
import type { ServiceKey } from '../model/types.js';
import { setImmediate as nextTurn } from 'node:timers/promises';

/** Every this many full syncs of a task, each of its service syncs is reconciled whatever the feeds say. */
export const FULL_SYNC_VERIFY_EVERY = 10;

/** Statuses read at once (one batch read) while filtering. */
const CHUNK = 500;

export interface FullSyncFilterInput {
  taskId: string;
  keys: readonly string[];
  serviceOf: (key: string) => ServiceKey | undefined;
  source: Pick<RegistryAdapter, 'cachedDigest'>;
  /** The destination keeps copies with the connection of every replica (nothing there ages out or needs a beat). */
  destinationBound: boolean;
  /** This round reconciles every service sync (see {@link FULL_SYNC_VERIFY_EVERY}). */
  verify: boolean;
  /** The statuses of `services`, in order (one batch read, e.g. one HMGET). */
  statuses: (taskId: string, services: readonly ServiceKey[]) => Promise<ReadonlyArray<ServiceStatus | undefined>>;
}

/**
 * The service syncs of a full sync that need a reconcile. A full sync repairs what an outage or a
 * lost event missed; where the source's list comes from a live push feed (`cachedDigest`) and the
 * destination's copies live with every replica's connection, the feed itself says whether the
 * source changed since the last reconcile: a service sync whose source digest equals the one its
 * last status recorded, and whose status has no problem and holds nothing, is left out. Every
 * {@link FULL_SYNC_VERIFY_EVERY}-th full sync (`verify`) reconciles everything anyway, for what no
 * feed shows (a copy removed at the destination by hand). Elsewhere every key is due. Statuses
 * are read {@link CHUNK} at a time, one batch read each; a batch that cannot be read leaves its
 * keys due.
 */
export async function dueForFullSync(input: FullSyncFilterInput): Promise<{ due: string[]; skipped: number }> {
  const { keys, source } = input;
  if (input.verify || !input.destinationBound || !source.cachedDigest) return { due: [...keys], skipped: 0 };
  const due: string[] = [];
  let skipped = 0;
  for (let at = 0; at < keys.length; at += CHUNK) {
    const chunk = keys.slice(at, at + CHUNK);
    // Only keys whose source has a fed digest can be left out: their statuses are read, at once.
    const fed: Array<{ at: number; service: ServiceKey; digest: string }> = [];
    chunk.forEach((key, i) => {
      const service = input.serviceOf(key);
      const digest = service ? source.cachedDigest?.(service) : undefined;
      if (service && digest !== undefined) fed.push({ at: i, service, digest });
    });
    const statuses = fed.length === 0 ? [] : await input.statuses(input.taskId, fed.map((f) => f.service)).catch(() => undefined);
    const unchanged = new Set<number>();
    fed.forEach(({ at: i, digest }, n) => {
      const status = statuses?.[n];
      if (status && status.sourceDigest === digest && (status.problems?.length ?? 0) === 0 && (status.held ?? null) === null) unchanged.add(i);
    });
    chunk.forEach((key, i) => {
      if (unchanged.has(i)) skipped += 1;
      else due.push(key);
    });
    if (at + CHUNK < keys.length) await nextTurn();
  }
  return { due, skipped };
}
