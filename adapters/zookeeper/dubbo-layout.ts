import { instanceId, type Instance, type ServiceKey, type Unsubscribe } from '../../src/model/index.js';
import { providerNodeName, readProvider } from './dubbo-provider.js';
import { DubboServiceNameError, formatDubboServiceName, parseDubboServiceName, selectsProvider, type DubboSelector } from './dubbo-service-name.js';
import { decodeNodeName, encodeNodeName } from './dubbo-url.js';
import { coalesce, type EncodedNode, type LayoutContext, type NodeRecord, type ReadResult, type ZooKeeperLayout } from './zookeeper-layout.js';
import { ZooKeeperInstanceError } from './zookeeper-instance-error.js';
import { ZooKeeperServiceNameError } from './zookeeper-service-name-error.js';

const PROVIDERS = 'providers';

/**
 * Dubbo's registry layout: provider URLs as node names under `/{root}/{interface}/providers/`.
 * Service names are `providers:{interface}:{version}:{group}` (one version and group) or a bare
 * interface name (all of them), which a task expands into the first form for every version and
 * group found; see {@link parseDubboServiceName}. Nodes are written EPHEMERAL with
 * empty data; the node name is the whole provider.
 */
export class DubboLayout implements ZooKeeperLayout {
  readonly name = 'dubbo' as const;
  readonly watchesData = false;

  constructor(private readonly ctx: LayoutContext) {}

  directoryOf(service: ServiceKey): string {
    return this.directoryOfInterface(this.selector(service).interface);
  }

  async listServiceNames(): Promise<string[]> {
    const interfaces = (await this.ctx.conn.getChildren(this.ctx.root)) ?? [];
    const names = await Promise.all(interfaces.map((child) => this.serviceNamesIn(child)));
    return [...new Set(names.flat())].sort();
  }

  watchServiceNames(onChange: () => void): Unsubscribe {
    const { root, watches } = this.ctx;
    /** Per interface directory: its watch and the service names its providers gave at the last read. */
    const perInterface = new Map<string, { unwatch: Unsubscribe; names: string }>();
    const changed = coalesce(onChange);
    let active = true;

    const refreshInterface = async (child: string, quietly = false): Promise<void> => {
      const entry = perInterface.get(child);
      if (!entry || !active) return;
      const names = (await this.serviceNamesIn(child)).join('\n');
      if (entry.names !== names && !quietly) changed.trigger();
      entry.names = names;
    };
    const refreshRoot = async (initial: boolean): Promise<void> => {
      const children = new Set((await this.ctx.conn.getChildren(root)) ?? []);
      if (!active) return;
      for (const [child, entry] of perInterface) {
        if (children.has(child)) continue;
        entry.unwatch();
        perInterface.delete(child);
        if (entry.names !== '') changed.trigger();
      }
      const added: string[] = [];
      for (const child of children) {
        if (perInterface.has(child)) continue;
        const entry = { unwatch: (() => {}) as Unsubscribe, names: '' };
        perInterface.set(child, entry);
        entry.unwatch = watches.watch(`${root}/${child}/${PROVIDERS}`, () => void refreshInterface(child).catch(quiet));
        added.push(child);
      }
      await Promise.all(added.map((child) => refreshInterface(child, initial)));
      // The engine listed the services before it watched them; whatever changed in between is only
      // caught by one more look, once the watches stand.
      if (initial) changed.trigger();
    };
    const quiet = (err: unknown) => this.ctx.log.debug({ err }, 'dubbo service list refresh failed; the next event or reconnection retries');
    const unwatchRoot = watches.watch(root, () => void refreshRoot(false).catch(quiet));
    void refreshRoot(true).catch(quiet);
    return () => {
      active = false;
      changed.cancel();
      unwatchRoot();
      for (const entry of perInterface.values()) entry.unwatch();
      perInterface.clear();
    };
  }

  /**
   * A bare interface covers `providers:{interface}:{version}:{group}` for every version and group
   * its providers have (none when it has no provider), as `*` names them; any other name covers
   * itself, read without a request (a name that does not fit is refused by the reads).
   */
  async expandServiceName(name: string): Promise<string[]> {
    const selector = bareInterface(name);
    return selector === undefined ? [name] : this.serviceNamesIn(encodeNodeName(selector));
  }

  /**
   * For a bare interface: watches its providers directory and calls `onChange` when the versions
   * and groups found there change, and once when the watch stands (the engine expanded the name
   * before it watched). Other names never change what they cover.
   */
  watchExpansion(name: string, onChange: () => void): Unsubscribe {
    const iface = bareInterface(name);
    if (iface === undefined) return () => {};
    const child = encodeNodeName(iface);
    const changed = coalesce(onChange);
    let names: string | undefined;
    let active = true;
    const refresh = async (): Promise<void> => {
      const now = (await this.serviceNamesIn(child)).join('\n');
      if (!active || now === names) return;
      names = now;
      changed.trigger();
    };
    const quiet = (err: unknown) => this.ctx.log.debug({ err, service: name }, 'dubbo interface refresh failed; the next event or reconnection retries');
    const unwatch = this.ctx.watches.watch(this.directoryOfInterface(iface), () => void refresh().catch(quiet));
    void refresh().catch(quiet);
    return () => {
      active = false;
      changed.cancel();
      unwatch();
    };
  }

  async read(service: ServiceKey): Promise<ReadResult> {
    const selector = this.selector(service);
    const dir = this.directoryOfInterface(selector.interface);
    const children = (await this.ctx.conn.getChildren(dir)) ?? [];
    const nodes: NodeRecord[] = [];
    const issues: string[] = [];
    for (const name of [...children].sort()) {
      const path = `${dir}/${name}`;
      try {
        const provider = readProvider(name, selector.interface);
        if (selectsProvider(selector, provider.version, provider.group)) nodes.push({ path, instance: provider.instance, data: undefined });
      } catch (err) {
        const reason = err instanceof Error ? err.message : String(err);
        this.ctx.warnOnce(path, reason);
        issues.push(`${path}: ${reason}`);
      }
    }
    return { nodes, issues };
  }

  encode(service: ServiceKey, instance: Instance): EncodedNode {
    const selector = this.selector(service);
    try {
      return { path: `${this.directoryOfInterface(selector.interface)}/${providerNodeName(selector, instance)}`, data: Buffer.alloc(0) };
    } catch (err) {
      throw new ZooKeeperInstanceError(instanceId(instance), service.name, 'dubbo', err instanceof Error ? err.message : String(err));
    }
  }

  sameContent(): boolean {
    // The node name is the whole provider; the data means nothing to Dubbo.
    return true;
  }

  private selector(service: ServiceKey): DubboSelector {
    try {
      return parseDubboServiceName(service.name);
    } catch (err) {
      if (err instanceof DubboServiceNameError) throw new ZooKeeperServiceNameError(this.ctx.clusterId, service.name, 'dubbo', err.message);
      throw err;
    }
  }

  private directoryOfInterface(iface: string): string {
    return `${this.ctx.root}/${encodeNodeName(iface)}/${PROVIDERS}`;
  }

  /** The `providers:{interface}:{version}:{group}` names found under one interface directory (by its node name). */
  private async serviceNamesIn(child: string): Promise<string[]> {
    let iface: string;
    try {
      iface = decodeNodeName(child);
    } catch {
      this.ctx.warnOnce(`${this.ctx.root}/${child}`, 'malformed %-escape in the interface directory name');
      return [];
    }
    const dir = `${this.ctx.root}/${child}/${PROVIDERS}`;
    const providers = (await this.ctx.conn.getChildren(dir)) ?? [];
    const names = new Set<string>();
    for (const name of providers) {
      try {
        const p = readProvider(name, iface);
        names.add(formatDubboServiceName(iface, p.version, p.group));
      } catch (err) {
        this.ctx.warnOnce(`${dir}/${name}`, err instanceof Error ? err.message : String(err));
      }
    }
    return [...names].sort();
  }
}

/** The interface a bare interface name (no `providers:`) names; undefined for any other name, valid or not. */
function bareInterface(name: string): string | undefined {
  try {
    const selector = parseDubboServiceName(name);
    return selector.version === undefined && selector.group === undefined ? selector.interface : undefined;
  } catch {
    return undefined;
  }
}
