/**
 * Where work goes: service syncs onto shards, shards onto workers. Both are pure functions of their
 * inputs, so every worker computes the same answer from the same live worker list without talking
 * to the others.
 *
 * The hashes are part of the on-disk contract: a shard number is stored nowhere, it is recomputed, so
 * changing them would move every service sync of a running deployment. They are FNV-1a 32-bit over the
 * UTF-8 bytes, finished with the MurmurHash3 `fmix32` mix (FNV alone spreads short, similar keys such as
 * `worker-1` / `worker-2` poorly over the high bits). Nothing depends on the process, platform, Node
 * version or the order of the inputs: the result is stable across processes and regsync versions.
 */

import { FNV_OFFSET, FNV_PRIME, fmix32 } from '../util/hash.js';

const encoder = new TextEncoder();

/** FNV-1a 32-bit of the UTF-8 bytes of `text`, mixed with `fmix32`; an unsigned 32-bit integer. */
export function stableHash(text: string): number {
  let h = FNV_OFFSET;
  for (const byte of encoder.encode(text)) {
    h ^= byte;
    h = Math.imul(h, FNV_PRIME);
  }
  return fmix32(h);
}

/** The shard (0 ≤ shard < `shards`) of a service sync, by its key. */
export function shardOf(serviceSyncKey: string, shards: number): number {
  if (!Number.isInteger(shards) || shards < 1) throw new RangeError(`shards must be a positive integer, got ${shards}`);
  return stableHash(serviceSyncKey) % shards;
}

/**
 * The replica set of a shard by rendezvous (highest random weight) hashing: every worker gets the
 * weight `stableHash("<shard>/<worker id>")` and the `r` heaviest serve the shard, heaviest first; the
 * first is the preferred leader. Fewer than `r` workers: all of them. Duplicate ids count once; equal
 * weights are ordered by id, so the answer never depends on the order of `workerIds`.
 *
 * Since a worker's weight for a shard ignores every other worker, a worker joining or leaving changes
 * exactly the shards whose top-`r` set contains it, and the others keep their relative order.
 */
export function replicasFor(shard: number, workerIds: readonly string[], r: number): string[] {
  if (!Number.isInteger(r) || r < 1) throw new RangeError(`r must be a positive integer, got ${r}`);
  return [...new Set(workerIds)]
    .map((id) => ({ id, weight: stableHash(`${shard}/${id}`) }))
    .sort((a, b) => b.weight - a.weight || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .slice(0, r)
    .map((w) => w.id);
}
