import { instanceId, type Instance, type ServiceKey, type Unsubscribe } from '../../src/model/index.js';
import { buildCuratorInstance, curatorCopyId, readCuratorInstance, sameCuratorContent } from './curator-instance.js';
import { coalesce, type EncodedNode, type LayoutContext, type NodeRecord, type ReadResult, type ZooKeeperLayout } from './zookeeper-layout.js';
import { ZooKeeperInstanceError } from './zookeeper-instance-error.js';
import { ZooKeeperServiceNameError } from './zookeeper-service-name-error.js';

/**
 * Curator service discovery (Spring Cloud ZooKeeper): one JSON node per instance at
 * `/{root}/{service}/{id}`. The service name is the directory name. regsync's copies get a stable
 * id (see {@link curatorCopyId}) and are written EPHEMERAL, serviceType DYNAMIC.
 */
export class CuratorLayout implements ZooKeeperLayout {
  readonly name = 'curator' as const;
  readonly watchesData = true;

  constructor(
    private readonly ctx: LayoutContext,
    private readonly now: () => number = Date.now,
  ) {}

  directoryOf(service: ServiceKey): string {
    const name = service.name;
    if (name === '' || name === '.' || name === '..' || name.includes('/')) {
      throw new ZooKeeperServiceNameError(this.ctx.clusterId, name, 'curator', 'a Curator service name is one path segment (not empty, no /)');
    }
    return `${this.ctx.root}/${name}`;
  }

  async listServiceNames(): Promise<string[]> {
    return [...((await this.ctx.conn.getChildren(this.ctx.root)) ?? [])].sort();
  }

  watchServiceNames(onChange: () => void): Unsubscribe {
    let known: string | undefined;
    let active = true;
    const changed = coalesce(onChange);
    const refresh = async () => {
      const names = (await this.listServiceNames()).join('\n');
      if (!active) return;
      // The first look only tells the engine once (it listed before it watched; something may have
      // changed in between); later ones when the names differ.
      if (known !== names) changed.trigger();
      known = names;
    };
    const quiet = (err: unknown) => this.ctx.log.debug({ err }, 'curator service list refresh failed; the next event or reconnection retries');
    const unwatch = this.ctx.watches.watch(this.ctx.root, () => void refresh().catch(quiet));
    void refresh().catch(quiet);
    return () => {
      active = false;
      changed.cancel();
      unwatch();
    };
  }

  async read(service: ServiceKey): Promise<ReadResult> {
    const dir = this.directoryOf(service);
    const children = [...((await this.ctx.conn.getChildren(dir)) ?? [])].sort();
    const read = await Promise.all(children.map(async (id) => ({ id, node: await this.ctx.conn.getData(`${dir}/${id}`) })));
    const nodes: NodeRecord[] = [];
    const issues: string[] = [];
    for (const { id, node } of read) {
      if (!node) continue; // deleted between the two reads
      const path = `${dir}/${id}`;
      try {
        nodes.push({ path, instance: readCuratorInstance(node.data, service.name, id), data: node.data });
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        this.ctx.warnOnce(path, reason);
        issues.push(`${path}: ${reason}`);
      }
    }
    return { nodes, issues };
  }

  encode(service: ServiceKey, instance: Instance): EncodedNode {
    const dir = this.directoryOf(service);
    if (instance.ip.trim() === '' || !Number.isInteger(instance.port) || instance.port < 1 || instance.port > 65_535) {
      throw new ZooKeeperInstanceError(instanceId(instance), service.name, 'curator', 'an address and a port from 1 to 65535 are needed');
    }
    const id = curatorCopyId(instance);
    return { path: `${dir}/${id}`, data: buildCuratorInstance(service.name, id, instance, this.now()) };
  }

  sameContent(existing: Buffer, wanted: Buffer): boolean {
    return sameCuratorContent(existing, wanted);
  }
}
