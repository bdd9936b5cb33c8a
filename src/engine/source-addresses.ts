/**
 * Which service syncs read which instance addresses from their source, as this process last saw
 * them (every reconcile it runs records its source's IPs). A CMDB change names IPs; this answers
 * which service syncs to reconcile so that only their copies are re-labelled.
 *
 * Process-local on purpose: every replica of a shard runs reconciles, so the processes together know
 * every service sync that ran since they started, and a service sync none of them knows is
 * re-labelled by its task's next full sync.
 */
export class SourceAddresses {
  private readonly byKey = new Map<string, readonly string[]>();
  private readonly byIp = new Map<string, Set<string>>();

  /** Records the addresses service sync `key` read from its source. */
  set(key: string, ips: readonly string[]): void {
    this.delete(key);
    const unique = [...new Set(ips)];
    this.byKey.set(key, unique);
    for (const ip of unique) {
      let keys = this.byIp.get(ip);
      if (!keys) {
        keys = new Set();
        this.byIp.set(ip, keys);
      }
      keys.add(key);
    }
  }

  delete(key: string): void {
    const ips = this.byKey.get(key);
    if (!ips) return;
    this.byKey.delete(key);
    for (const ip of ips) {
      const keys = this.byIp.get(ip);
      keys?.delete(key);
      if (keys?.size === 0) this.byIp.delete(ip);
    }
  }

  /** Forgets every service sync whose key starts with `prefix` (a removed task's). */
  forget(prefix: string): void {
    for (const key of [...this.byKey.keys()]) if (key.startsWith(prefix)) this.delete(key);
  }

  /** The service syncs whose source lists any of `ips`, sorted. */
  keysOf(ips: Iterable<string>): string[] {
    const keys = new Set<string>();
    for (const ip of ips) for (const key of this.byIp.get(ip) ?? []) keys.add(key);
    return [...keys].sort();
  }

  get size(): number {
    return this.byKey.size;
  }
}
