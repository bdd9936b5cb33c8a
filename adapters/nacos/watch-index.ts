import type { ServiceRef } from './wire.js';

/**
 * The watches of an adapter by group, then plain name: a lookup of a service (a full sync asks for
 * every watched service's digest) and a push (which names group and service but not the namespace)
 * build no key string, and the index holds no key of its own: its keys are the watches' group and
 * name strings. Almost every name is watched in one namespace only, so a name holds its one watch
 * itself, and a list only when several namespaces watch it.
 */
export class WatchIndex<T extends { readonly ref: ServiceRef }> {
  private readonly groups = new Map<string, Map<string, T | T[]>>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** The watch of exactly this service (namespace, group and name). */
  get(ref: ServiceRef): T | undefined {
    const at = this.groups.get(ref.group)?.get(ref.name);
    if (at === undefined) return undefined;
    if (!Array.isArray(at)) return at.ref.namespaceId === ref.namespaceId ? at : undefined;
    return at.find((w) => w.ref.namespaceId === ref.namespaceId);
  }

  /** Adds a watch; one of the same service already there is replaced. */
  add(watch: T): void {
    const { group, name, namespaceId } = watch.ref;
    let names = this.groups.get(group);
    if (!names) {
      names = new Map();
      this.groups.set(group, names);
    }
    const at = names.get(name);
    if (at === undefined) {
      names.set(name, watch);
      this.count += 1;
    } else if (Array.isArray(at)) {
      const i = at.findIndex((w) => w.ref.namespaceId === namespaceId);
      if (i >= 0) at[i] = watch;
      else {
        at.push(watch);
        this.count += 1;
      }
    } else if (at.ref.namespaceId === namespaceId) names.set(name, watch);
    else {
      names.set(name, [at, watch]);
      this.count += 1;
    }
  }

  /** Removes this watch (not another one of the same service). */
  delete(watch: T): void {
    const { group, name } = watch.ref;
    const names = this.groups.get(group);
    const at = names?.get(name);
    if (names === undefined || at === undefined) return;
    if (Array.isArray(at)) {
      const i = at.indexOf(watch);
      if (i < 0) return;
      at.splice(i, 1);
      if (at.length === 1) names.set(name, at[0] as T);
    } else if (at === watch) {
      names.delete(name);
      if (names.size === 0) this.groups.delete(group);
    } else return;
    this.count -= 1;
  }

  /** The watches of `group` and `name` in every namespace, as a new list (callers may change the index while they go through it). */
  named(group: string, name: string): T[] {
    const at = this.groups.get(group)?.get(name);
    return at === undefined ? [] : Array.isArray(at) ? [...at] : [at];
  }

  *values(): IterableIterator<T> {
    for (const names of this.groups.values()) {
      for (const at of names.values()) {
        // A copy: a watch deleted meanwhile shifts the list.
        if (Array.isArray(at)) yield* [...at];
        else yield at;
      }
    }
  }

  clear(): void {
    this.groups.clear();
    this.count = 0;
  }
}
