/**
 * Watches by `group@@name` (a push names group and service, not the namespace): almost every name
 * is watched in one namespace only, so a name holds its one watch itself, and a set only when
 * several namespaces watch it (a set per name would cost more than the watch it points to).
 */
export class GroupedIndex<T> {
  private readonly byName = new Map<string, T | Set<T>>();

  add(name: string, value: T): void {
    const at = this.byName.get(name);
    if (at === undefined) this.byName.set(name, value);
    else if (at instanceof Set) at.add(value);
    else if (at !== value) this.byName.set(name, new Set([at, value]));
  }

  delete(name: string, value: T): void {
    const at = this.byName.get(name);
    if (at === value) this.byName.delete(name);
    else if (at instanceof Set) {
      at.delete(value);
      if (at.size === 1) this.byName.set(name, at.values().next().value as T);
    }
  }

  /** The watches of `name`, as a new list (callers may change the index while they go through it). */
  get(name: string): T[] {
    const at = this.byName.get(name);
    return at === undefined ? [] : at instanceof Set ? [...at] : [at];
  }

  clear(): void {
    this.byName.clear();
  }
}
