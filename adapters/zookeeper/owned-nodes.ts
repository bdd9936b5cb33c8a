import type { Instance, ServiceKey } from '../../src/model/index.js';

/** A node this adapter wrote (or adopted) through `apply`, with exactly the data it holds. */
export interface OwnedNode {
  path: string;
  data: Buffer;
  service: ServiceKey;
  /** The instance as the engine asked for it (what `listInstances` answers for this node). */
  instance: Instance;
}

/**
 * What the adapter wrote, by node path. ZooKeeper deletes every ephemeral node of an expired
 * session; this is what gets re-created in the new one. It also lets `listInstances` answer, for a
 * node that still holds exactly what was written, the instance as it was asked for, so that fields
 * a layout cannot store exactly (a weight Dubbo rounds, a persistent instance written as an
 * ephemeral node) do not look changed at every reconcile.
 */
export class OwnedNodes {
  private readonly byDir = new Map<string, Map<string, OwnedNode>>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  get(path: string): OwnedNode | undefined {
    return this.byDir.get(parentOf(path))?.get(path);
  }

  remember(node: OwnedNode): void {
    const dir = parentOf(node.path);
    let nodes = this.byDir.get(dir);
    if (!nodes) {
      nodes = new Map();
      this.byDir.set(dir, nodes);
    }
    if (!nodes.has(node.path)) this.count += 1;
    nodes.set(node.path, node);
  }

  forget(path: string): void {
    const dir = parentOf(path);
    const nodes = this.byDir.get(dir);
    if (!nodes?.delete(path)) return;
    this.count -= 1;
    if (nodes.size === 0) this.byDir.delete(dir);
  }

  /** Owned nodes of one directory. */
  inDirectory(dir: string): OwnedNode[] {
    return [...(this.byDir.get(dir)?.values() ?? [])];
  }

  /** Directories holding owned nodes. */
  directories(): string[] {
    return [...this.byDir.keys()];
  }
}

export function parentOf(path: string): string {
  return path.slice(0, path.lastIndexOf('/'));
}
