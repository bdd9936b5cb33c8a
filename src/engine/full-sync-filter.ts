import type { RegistryAdapter } from '../model/adapter.js';
import type { ServiceStatus } from '../model/service-status.js';
import type { ServiceKey } from '../model/types.js';
import { setImmediate as nextTurn } from 'node:timers/promises';

/** Every this many full syncs of a `*` task whose source pushes its service list, the source is listed anyway. */
export const FULL_SYNC_LIST_EVERY = 10;

/**
 * A service sync whose status was found to match its fed source is not read again while the feed
 * gives the same digest, except in one full sync of this many (its round: see {@link verifyRound}),
 * so that a problem a later reconcile recorded (in any replica) is still found within this many
 * full syncs.
 */
export const FULL_SYNC_REREAD_EVERY = 10;

/** Statuses read at once (one batch read) while filtering. */
const CHUNK = 500;

/** Verifying checks (each reads the destination once) under way at once while filtering. */
const CHECKS_IN_FLIGHT = 8;

export interface FullSyncFilterInput {
  taskId: string;
  keys: readonly string[];
  serviceOf: (key: string) => ServiceKey | undefined;
  /** The fed digest a full sync last found recorded by the key's status, with nothing wrong (see `confirm`). */
  confirmed: (key: string) => string | undefined;
  /** Remembers the fed digest the key's status was found to record (undefined: forget it). */
  confirm: (key: string, digest: string | undefined) => void;
  /** Whether this round reads the key's status even though the feed still gives its confirmed digest. */
  rereads: (key: string) => boolean;
  source: Pick<RegistryAdapter, 'cachedDigest'>;
  /** The destination keeps copies with the connection of every replica (nothing there ages out or needs a beat). */
  destinationBound: boolean;
  /** Whether this round verifies a key (see {@link verifyRound}): its feeds vouching for it is not enough. */
  verifies: (key: string) => boolean;
  /** Whether a reconcile of a key would write nothing now (`Reconciler.inSync`: both sides read, nothing written). */
  inSync: (key: string) => Promise<boolean>;
  /** The statuses of `services`, in order (one batch read, e.g. one HMGET). */
  statuses: (taskId: string, services: readonly ServiceKey[]) => Promise<ReadonlyArray<ServiceStatus | undefined>>;
}

/**
 * The service syncs of a full sync that need a reconcile. A full sync repairs what an outage or a
 * lost event missed; where the source's list comes from a live push feed (`cachedDigest`) and the
 * destination's copies live with every replica's connection, the feed itself says whether the
 * source changed since the last reconcile: a service sync whose source digest equals the one its
 * last status recorded, and whose status has no problem and holds nothing, is left out, and its
 * status is not read again while the feed gives that digest (but in its round of
 * {@link FULL_SYNC_REREAD_EVERY}). What no
 * feed shows (a copy removed at the destination by hand) is found by the keys this round
 * `verifies`: each of those the feed vouches for is checked (`inSync`: the destination read, the
 * copies compared, nothing written) and is due only if the check finds a difference. Elsewhere
 * every key is due. Statuses are read {@link CHUNK} at a time, one batch read each; a batch that
 * cannot be read leaves its keys due.
 */
export async function dueForFullSync(input: FullSyncFilterInput): Promise<{ due: string[]; skipped: number; verified: number }> {
  const { keys, source } = input;
  if (!input.destinationBound || !source.cachedDigest) return { due: [...keys], skipped: 0, verified: 0 };
  const due: string[] = [];
  let skipped = 0;
  let verified = 0;
  for (let at = 0; at < keys.length; at += CHUNK) {
    const chunk = keys.slice(at, at + CHUNK);
    // Only keys whose source has a fed digest can be left out: those whose digest was confirmed
    // before are, without a read; the others' statuses are read, at once.
    const fed: Array<{ at: number; service: ServiceKey; digest: string }> = [];
    const unchanged = new Set<number>();
    chunk.forEach((key, i) => {
      const service = input.serviceOf(key);
      const digest = service ? source.cachedDigest?.(service) : undefined;
      if (!service || digest === undefined) return;
      if (digest === input.confirmed(key) && !input.rereads(key)) unchanged.add(i);
      else fed.push({ at: i, service, digest });
    });
    const statuses = fed.length === 0 ? [] : await input.statuses(input.taskId, fed.map((f) => f.service)).catch(() => undefined);
    fed.forEach(({ at: i, digest }, n) => {
      const status = statuses?.[n];
      const key = chunk[i] as string;
      if (status && status.sourceDigest === digest && (status.problems?.length ?? 0) === 0 && (status.held ?? null) === null) {
        unchanged.add(i);
        input.confirm(key, digest);
      } else if (statuses) input.confirm(key, undefined);
    });
    const checked = [...unchanged].filter((i) => input.verifies(chunk[i] as string));
    verified += checked.length;
    for (const i of await failedChecks(checked, (i) => input.inSync(chunk[i] as string))) {
      unchanged.delete(i);
      input.confirm(chunk[i] as string, undefined);
    }
    chunk.forEach((key, i) => {
      if (unchanged.has(i)) skipped += 1;
      else due.push(key);
    });
    if (at + CHUNK < keys.length) await nextTurn();
  }
  return { due, skipped, verified };
}

/**
 * The round (of `rounds`, numbered from 0) in which a full sync verifies `key`: a stable hash of the
 * key (FNV-1a), so that every key is verified once every `rounds` full syncs and each round takes
 * about the same share.
 */
export function verifyRound(key: string, rounds: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i += 1) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % Math.max(1, rounds);
}

/** The items whose check answers false (or fails), {@link CHECKS_IN_FLIGHT} checks at a time. */
async function failedChecks<T>(items: readonly T[], check: (item: T) => Promise<boolean>): Promise<T[]> {
  const failed: T[] = [];
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const item = items[next++] as T;
      if (!(await check(item).catch(() => false))) failed.push(item);
    }
  };
  await Promise.all(Array.from({ length: Math.min(CHECKS_IN_FLIGHT, items.length) }, lane));
  return failed;
}
