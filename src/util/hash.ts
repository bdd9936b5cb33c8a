/** FNV-1a's 32-bit offset basis and prime. */
export const FNV_OFFSET = 0x811c9dc5;
export const FNV_PRIME = 0x01000193;

/** MurmurHash3's 32-bit finalizer: every input bit affects every output bit (FNV alone spreads short, similar keys poorly over the high bits). */
export function fmix32(value: number): number {
  let h = value >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/**
 * FNV-1a 32-bit over the UTF-16 code units of `text`, mixed with {@link fmix32}: cheap (no encoding)
 * for hashes kept in one process's memory. Where a hash must be the same in every process and
 * version, hash bytes instead (the shard assignment's `stableHash`).
 */
export function quickHash(text: string): number {
  let h = FNV_OFFSET;
  for (let i = 0; i < text.length; i += 1) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, FNV_PRIME);
  }
  return fmix32(h);
}
