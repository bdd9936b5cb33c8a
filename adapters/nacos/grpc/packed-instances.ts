import type { Instance } from '../../../src/model/index.js';

/**
 * A list of instances kept for long in one string: JSON `[strings, rows]`, where `strings` holds
 * each distinct cluster name, metadata key and metadata value once, and each row is `[ip, port,
 * weight, flags, cluster, [key, value, ...]]` with indexes into `strings` (metadata in its own key
 * order; flags: healthy 1, enabled 2, ephemeral 4). The copies of one service differ mostly in
 * their address (their metadata is the source's plus the same marks), so a row is little more
 * than an address. A string of one byte per character costs a fraction of the objects it stands
 * for (an instance, its metadata object with a shape of its own, their property stores), and what
 * is kept per service for hours (a subscription's last pushed list, a publish set's shares) is
 * read only when something changes. Unpacking gives fresh objects, which callers may change.
 */
export type PackedInstances = string;

type Row = [string, number, number, number, number, number[]];

/** `instances` as one string; {@link unpackInstances} gives them back field for field. */
export function packInstances(instances: readonly Instance[]): PackedInstances {
  const strings: string[] = [];
  const indexes = new Map<string, number>();
  const indexOf = (text: string): number => {
    let at = indexes.get(text);
    if (at === undefined) {
      at = strings.length;
      strings.push(text);
      indexes.set(text, at);
    }
    return at;
  };
  const rows: Row[] = instances.map((i) => {
    const metadata: number[] = [];
    for (const key of Object.keys(i.metadata)) metadata.push(indexOf(key), indexOf(i.metadata[key] as string));
    const flags = (i.healthy ? 1 : 0) | (i.enabled ? 2 : 0) | (i.ephemeral ? 4 : 0);
    return [i.ip, i.port, i.weight, flags, indexOf(i.cluster), metadata];
  });
  // Flat: the JSON serializer builds long output from parts (a tree of strings, each with a header).
  return flat(JSON.stringify([strings, rows]));
}

/** The instances of a {@link packInstances} string, as new objects. */
export function unpackInstances(packed: PackedInstances): Instance[] {
  const [strings, rows] = JSON.parse(packed) as [string[], Row[]];
  return rows.map(([ip, port, weight, flags, cluster, pairs]) => {
    const metadata: Record<string, string> = {};
    for (let k = 0; k < pairs.length; k += 2) {
      const key = strings[pairs[k] as number] as string;
      const value = strings[pairs[k + 1] as number] as string;
      // An own `__proto__` key stays a key (assignment would set the prototype).
      if (key === '__proto__') Object.defineProperty(metadata, key, { value, enumerable: true, writable: true, configurable: true });
      else metadata[key] = value;
    }
    return { ip, port, weight, healthy: (flags & 1) !== 0, enabled: (flags & 2) !== 0, ephemeral: (flags & 4) !== 0, cluster: strings[cluster] as string, metadata };
  });
}

/** `text` as one sequential string (reading a character flattens a concatenation in place). */
function flat(text: string): string {
  if (text.length > 0) text.charCodeAt(0);
  return text;
}
