import type { Logger } from 'pino';
import {
  DEFAULT_GROUP,
  DEFAULT_NAMESPACE,
  MARK_TASK,
  instanceId,
  serviceKeyString,
  type ApplyPlan,
  type ClusterSpec,
  type Instance,
  type RegistryAdapter,
  type ServiceKey,
  type Unsubscribe,
} from '../../src/model/index.js';
import { CuratorLayout } from './curator-layout.js';
import { DubboLayout } from './dubbo-layout.js';
import { KeyedLock } from '../../src/util/keyed-lock.js';
import { OwnedNodes, parentOf, type OwnedNode } from './owned-nodes.js';
import { ZooKeeperApplyError, type ZooKeeperWriteFailure } from './zookeeper-apply-error.js';
import { ZooKeeperConfigError } from './zookeeper-config-error.js';
import { ZooKeeperConnection, defaultClientFactory, type ConnectedInfo, type ZooKeeperClientFactory } from './zookeeper-connection.js';
import type { EncodedNode, NodeRecord, ZooKeeperLayout } from './zookeeper-layout.js';
import { parseZooKeeperEndpoint, parseZooKeeperOptions, type ZooKeeperAdapterOptions } from './zookeeper-options.js';
import { ZooKeeperRequestError } from './zookeeper-request-error.js';
import { ZooKeeperWatches } from './zookeeper-watches.js';

/** What the adapter needs from its surroundings. */
export interface ZooKeeperAdapterDeps {
  logger: Logger;
  /** Builds the ZooKeeper client; default node-zookeeper-client's `createClient`. Tests inject one to reach the session. */
  clientFactory?: ZooKeeperClientFactory;
}

/** A snapshot of an adapter's state, for metrics and diagnostics. */
export interface ZooKeeperAdapterStats {
  layout: 'dubbo' | 'curator';
  connected: boolean;
  /** Current session id (hex), once connected. */
  sessionId: string | undefined;
  /** Sessions established so far (more than one means sessions expired and were replaced). */
  sessions: number;
  expiries: number;
  /** Directories watched. */
  watchedPaths: number;
  /** Ephemeral nodes this adapter wrote and keeps (re-created after a session expiry). */
  ownedNodes: number;
  /** Nodes re-created after session expiries. */
  recreatedNodes: number;
}

/** Result of making sure one node holds what we want, in our session. */
interface Ensured {
  outcome: 'created' | 'kept' | 'updated' | 'lost';
  /** The data the node holds now. */
  data: Buffer;
}

const MAX_WARNED_PATHS = 10_000;

/** The scope wildcard of `*` tasks: every namespace, or every group. */
const ANY = '*';

/**
 * The ZooKeeper side of regsync: reads, watches and writes services of one ZooKeeper cluster laid
 * out by Dubbo (`options.layout: dubbo`, provider URLs) or Curator service discovery (`curator`,
 * Spring Cloud ZooKeeper's JSON nodes).
 *
 * One instance per cluster, shared by every task: one session, one watch per directory. Copies are
 * EPHEMERAL nodes of that session, so they live as long as regsync does and need no heartbeat
 * (`heartbeat` is deliberately absent). Every node written through `apply` is remembered; after a
 * session expiry, which deletes them all server-side, they are re-created in the new session and
 * every watch is armed again. A lost connection is resumed on the same session; watches are re-armed
 * and every watcher told, since changes may have been missed.
 *
 * Reads reject on any failure (a failed read is never an empty service). Malformed nodes (a garbage
 * URL, invalid JSON, a node in the wrong directory) are skipped with a warning naming the path and
 * reported through `readIssues`; they never stop the rest.
 *
 * Deliberately left out: ACLs on the nodes written (they are open, as Dubbo and Curator write them),
 * Dubbo consumers/routers/configurators, Curator's service-level data, SASL, IPv6 endpoints.
 */
export class ZooKeeperAdapter implements RegistryAdapter {
  readonly clusterId: string;
  readonly options: ZooKeeperAdapterOptions;
  private readonly log: Logger;
  private readonly conn: ZooKeeperConnection;
  private readonly watches: ZooKeeperWatches;
  private readonly layout: ZooKeeperLayout;
  private readonly owned = new OwnedNodes();
  private readonly locks = new KeyedLock();
  private readonly issues = new Map<string, string[]>();
  private readonly warned = new Set<string>();
  private recreatePending = false;
  private recreateAgain = false;
  private recreating: Promise<void> | undefined;
  private recreatedNodes = 0;
  private closing: Promise<void> | undefined;

  constructor(spec: ClusterSpec, deps: ZooKeeperAdapterDeps) {
    this.clusterId = spec.id;
    if (spec.kind !== 'zookeeper') throw new ZooKeeperConfigError(spec.id, 'kind', `expected zookeeper, got ${String(spec.kind)}`);
    if (!Array.isArray(spec.endpoints) || spec.endpoints.length === 0) {
      throw new ZooKeeperConfigError(spec.id, 'endpoints', 'at least one host:port is needed');
    }
    const hasUser = spec.username !== undefined && spec.username !== '';
    const hasPassword = spec.password !== undefined && spec.password !== '';
    if (hasUser !== hasPassword) throw new ZooKeeperConfigError(spec.id, 'username/password', 'give both or neither');
    if (hasUser && (spec.username as string).includes(':')) throw new ZooKeeperConfigError(spec.id, 'username/password', 'a digest user name cannot contain :');
    this.options = parseZooKeeperOptions(spec);
    const endpoints = spec.endpoints.map((e) => parseZooKeeperEndpoint(spec.id, e));
    const bindings = deps.logger.bindings();
    this.log = deps.logger.child({ component: 'zookeeper-adapter', ...(bindings.cluster === undefined ? { cluster: spec.id } : {}) });
    this.conn = new ZooKeeperConnection({
      clusterId: spec.id,
      connectionString: endpoints.map((e) => e.label).join(','),
      sessionTimeoutMs: this.options.sessionTimeoutMs,
      connectTimeoutMs: this.options.connectTimeoutMs,
      operationTimeoutMs: this.options.operationTimeoutMs,
      spinDelayMs: this.options.spinDelayMs,
      digest: hasUser ? `${spec.username}:${spec.password}` : undefined,
      clientFactory: deps.clientFactory ?? defaultClientFactory,
      log: this.log,
      onConnected: (info) => this.connected(info),
    });
    this.watches = new ZooKeeperWatches(this.conn, this.log);
    const ctx = {
      clusterId: spec.id,
      root: this.options.root,
      conn: this.conn,
      watches: this.watches,
      log: this.log,
      warnOnce: (path: string, reason: string) => this.warnOnce(path, reason),
    };
    this.layout = this.options.layout === 'dubbo' ? new DubboLayout(ctx) : new CuratorLayout(ctx);
  }

  /**
   * Every service under the root; `scope` (namespace, group) has no meaning in ZooKeeper and is
   * copied into the keys, except `*` (every namespace, every group), which lists the same services
   * under the default namespace and group (`public`, `DEFAULT_GROUP`): a ZooKeeper cluster is one
   * namespace and one group. Dubbo: one `providers:{interface}:{version}:{group}` per combination
   * some provider has; Curator: every service directory.
   */
  async listServices(scope: { namespace: string; group: string }): Promise<ServiceKey[]> {
    const names = await this.layout.listServiceNames();
    const namespace = scope.namespace === ANY ? DEFAULT_NAMESPACE : scope.namespace;
    const group = scope.group === ANY ? DEFAULT_GROUP : scope.group;
    return names.map((name) => ({ namespace, group, name }));
  }

  /**
   * Calls `onChange` when services appear or vanish under the root: for Dubbo when an interface
   * directory comes or goes or its providers start or stop using a version/group combination;
   * for Curator when a service directory comes or goes.
   */
  watchServices(_scope: { namespace: string; group: string }, onChange: () => void): Unsubscribe {
    if (this.closing) return () => {};
    return this.layout.watchServiceNames(onChange);
  }

  /**
   * The services a task naming `service` syncs. Dubbo: a bare interface stands for one
   * `providers:{interface}:{version}:{group}` per combination its providers have (what Dubbo
   * consumers and nacos-sync look up in Nacos), in the service's namespace and group; any other
   * name, and every Curator name, for itself.
   */
  async expandService(service: ServiceKey): Promise<ServiceKey[]> {
    const names = this.layout.expandServiceName ? await this.layout.expandServiceName(service.name) : [service.name];
    return names.map((name) => ({ namespace: service.namespace, group: service.group, name }));
  }

  /** Calls `onChange` when {@link expandService} may answer differently: for a bare Dubbo interface, when a version or group appears or vanishes. */
  watchExpansion(service: ServiceKey, onChange: () => void): Unsubscribe {
    if (this.closing || !this.layout.watchExpansion) return () => {};
    return this.layout.watchExpansion(service.name, onChange);
  }

  /** Every instance of the service; rejects on any failure. Malformed nodes are skipped and kept for {@link readIssues}. */
  async listInstances(service: ServiceKey): Promise<Instance[]> {
    const { nodes, issues } = await this.layout.read(service);
    const key = serviceKeyString(service);
    if (issues.length > 0) this.issues.set(key, issues);
    else this.issues.delete(key);
    return nodes.map((n) => this.effective(n));
  }

  /** The malformed nodes the last `listInstances` of this service skipped, as `{path}: {why}`. */
  readIssues(service: ServiceKey): string[] {
    return [...(this.issues.get(serviceKeyString(service)) ?? [])];
  }

  /**
   * Calls `onChange` when the service's directory changes (a node created or deleted; for Curator
   * also an instance updated in place). Watches of one directory share one ZooKeeper watch.
   */
  watch(service: ServiceKey, onChange: () => void): Unsubscribe {
    if (this.closing) return () => {};
    let dir: string;
    try {
      dir = this.layout.directoryOf(service);
    } catch (err) {
      this.log.warn({ err, service: service.name }, 'cannot watch a service whose name does not fit the layout');
      return () => {};
    }
    return this.watches.watch(dir, onChange, { dataOfChildren: this.layout.watchesData });
  }

  /**
   * Writes a plan into the service's directory, one writer per directory at a time:
   * - an upsert creates its node EPHEMERAL (parents persistent, as needed), keeps a node that
   *   already says the same in our session, rewrites one whose data differs, replaces one left by
   *   another session (a previous regsync process), and deletes other nodes of the same instance
   *   (`ip:port#cluster`) and task (a Dubbo URL that changed), so there is never more than one;
   * - a remove deletes every node of that instance and task.
   * Every write is attempted; failures then reject together as {@link ZooKeeperApplyError}. An
   * instance that cannot be encoded (a Dubbo instance without `protocol` or `interface`) fails
   * alone. An empty plan touches nothing.
   */
  async apply(service: ServiceKey, plan: ApplyPlan): Promise<void> {
    if (plan.upsert.length === 0 && plan.remove.length === 0) return;
    const dir = this.layout.directoryOf(service);
    await this.locks.run(dir, async () => {
      const listing = (await this.layout.read(service)).nodes.map((n) => ({ path: n.path, instance: this.effective(n) }));
      const failures: ZooKeeperWriteFailure[] = [];
      const targets = new Map<string, { instance: Instance; node: EncodedNode }>();
      for (const instance of plan.upsert) {
        try {
          const node = this.layout.encode(service, instance);
          targets.set(node.path, { instance, node });
        } catch (error) {
          failures.push({ op: 'upsert', instance: instanceId(instance), error });
        }
      }
      const deleteNode = async (path: string) => {
        await this.conn.remove(path);
        this.owned.forget(path);
      };
      await Promise.all(
        [...targets.values()].map(async ({ instance, node }) => {
          try {
            const ensured = await this.ensureNode(node, true);
            this.owned.remember({ path: node.path, data: ensured.data, service, instance: copyOf(instance) });
            const stale = new Set([
              ...listing.filter((n) => !targets.has(n.path) && sameCopy(n.instance, instance)).map((n) => n.path),
              ...this.owned.inDirectory(dir).filter((n) => !targets.has(n.path) && sameCopy(n.instance, instance)).map((n) => n.path),
            ]);
            for (const path of stale) await deleteNode(path);
          } catch (error) {
            failures.push({ op: 'upsert', instance: instanceId(instance), error });
          }
        }),
      );
      await Promise.all(
        plan.remove.map(async (instance) => {
          try {
            const victims = new Set([
              ...listing.filter((n) => !targets.has(n.path) && sameCopy(n.instance, instance)).map((n) => n.path),
              ...this.owned.inDirectory(dir).filter((n) => !targets.has(n.path) && sameCopy(n.instance, instance)).map((n) => n.path),
            ]);
            for (const path of victims) await deleteNode(path);
          } catch (error) {
            failures.push({ op: 'remove', instance: instanceId(instance), error });
          }
        }),
      );
      const attempted = plan.upsert.length + plan.remove.length;
      this.log.debug({ service: service.name, upserts: plan.upsert.length, removes: plan.remove.length, failed: failures.length }, 'zookeeper apply');
      if (failures.length > 0) throw new ZooKeeperApplyError(this.clusterId, service.name, failures, attempted);
    });
  }

  /**
   * Takes copies the engine found unchanged into this adapter's session and memory: those it did
   * not write itself (a previous regsync process did, and their session dies with it) are
   * re-created as its own, once each, so they survive that session and are re-created after an
   * expiry of this one. Copies it already holds cost nothing. The engine calls it on the shard's
   * leader after every reconcile.
   */
  async retain(service: ServiceKey, instances: Instance[]): Promise<void> {
    const foreign = instances.filter((instance) => {
      try {
        return this.owned.get(this.layout.encode(service, instance).path) === undefined;
      } catch {
        return false; // Cannot be written here, so it was not written here either.
      }
    });
    if (foreign.length > 0) await this.apply(service, { upsert: foreign, remove: [] });
  }

  /** For metrics and diagnostics. */
  stats(): ZooKeeperAdapterStats {
    const { sessions, expiries } = this.conn.stats();
    return {
      layout: this.options.layout,
      connected: this.conn.connected,
      sessionId: this.conn.sessionId,
      sessions,
      expiries,
      watchedPaths: this.watches.size,
      ownedNodes: this.owned.size,
      recreatedNodes: this.recreatedNodes,
    };
  }

  /**
   * Stops every watch and closes the session; ZooKeeper then deletes the ephemeral copies at once
   * (as Nacos copies expire once beats stop). Idempotent; later calls reject with `zookeeper-closed`.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.watches.close();
      await this.conn.close();
    })();
    return this.closing;
  }

  /** The instance `listInstances` answers for a node: as asked for, when it is our node and still holds what we wrote. */
  private effective(node: NodeRecord): Instance {
    const own = this.owned.get(node.path);
    if (own && (node.data === undefined || this.layout.sameContent(node.data, own.data))) return copyOf(own.instance);
    return node.instance;
  }

  private connected(info: ConnectedInfo): void {
    if (this.closing) return;
    this.watches.rearmAll();
    if (info.newSession) this.recreatePending = true;
    if (this.recreatePending) this.startRecreate();
  }

  private startRecreate(): void {
    if (this.recreating) {
      this.recreateAgain = true;
      return;
    }
    this.recreatePending = false;
    const run = this.recreateOwned()
      .then((complete) => {
        if (!complete) this.recreatePending = true;
      })
      .finally(() => {
        this.recreating = undefined;
        if (this.recreateAgain && !this.closing) {
          this.recreateAgain = false;
          if (this.recreatePending && this.conn.connected) this.startRecreate();
        }
      });
    this.recreating = run;
  }

  /**
   * Makes every owned node exist again in the current session (after an expiry the server deleted
   * them). A node another session holds now is not taken back: it is forgotten. Answers whether
   * every node could be checked; otherwise the next connection tries again.
   */
  private async recreateOwned(): Promise<boolean> {
    let complete = true;
    let created = 0;
    await Promise.all(
      this.owned.directories().map((dir) =>
        this.locks.run(dir, async () => {
          await Promise.all(
            this.owned.inDirectory(dir).map(async (node) => {
              try {
                const ensured = await this.ensureNode(node, false);
                if (this.owned.get(node.path) !== node) return;
                if (ensured.outcome === 'lost') {
                  this.owned.forget(node.path);
                  this.log.warn({ path: node.path }, 'a node regsync wrote is held by another session now; leaving it');
                  return;
                }
                if (ensured.outcome === 'created') {
                  created += 1;
                  this.recreatedNodes += 1;
                }
                if (!ensured.data.equals(node.data)) this.owned.remember({ ...node, data: ensured.data });
              } catch (err) {
                complete = false;
                this.log.warn({ err, path: node.path }, 'cannot re-create a node after a session change; retrying after the next reconnection');
              }
            }),
          );
        }),
      ),
    );
    if (created > 0) this.log.info({ created, owned: this.owned.size }, 're-created ephemeral copies in the new zookeeper session');
    return complete;
  }

  /**
   * Makes `node` exist with its data as an ephemeral node of the current session. With `steal`, a
   * node held by another session (or a persistent one) is deleted and created again; without, it is
   * reported `lost`.
   */
  private async ensureNode(node: EncodedNode | OwnedNode, steal: boolean): Promise<Ensured> {
    for (let attempt = 0; attempt < 4; attempt += 1) {
      let outcome = await this.conn.create(node.path, node.data, 'ephemeral');
      if (outcome === 'no-parent') {
        await this.conn.mkdirp(parentOf(node.path));
        outcome = await this.conn.create(node.path, node.data, 'ephemeral');
      }
      if (outcome === 'created') return { outcome: 'created', data: node.data };
      if (outcome === 'no-parent') continue;
      const existing = await this.conn.getData(node.path);
      if (!existing) continue; // deleted meanwhile: create again
      if (this.conn.ownsEphemeral(existing.stat)) {
        if (this.layout.sameContent(existing.data, node.data)) return { outcome: 'kept', data: existing.data };
        if (await this.conn.setData(node.path, node.data)) return { outcome: 'updated', data: node.data };
        continue;
      }
      if (!steal) return { outcome: 'lost', data: existing.data };
      await this.conn.remove(node.path);
    }
    throw new ZooKeeperRequestError({
      code: 'zookeeper-error',
      clusterId: this.clusterId,
      op: 'create',
      path: node.path,
      detail: 'the node kept changing while it was being written; the next reconcile tries again',
    });
  }

  private warnOnce(path: string, reason: string): void {
    if (this.warned.has(path)) return;
    if (this.warned.size >= MAX_WARNED_PATHS) this.warned.clear();
    this.warned.add(path);
    this.log.warn({ path, reason }, 'malformed zookeeper node skipped');
  }
}

/** Same instance identity (`ip:port#cluster`) written by the same task: nodes of one copy. */
function sameCopy(a: Instance, b: Instance): boolean {
  return instanceId(a) === instanceId(b) && a.metadata[MARK_TASK] === b.metadata[MARK_TASK];
}

function copyOf(instance: Instance): Instance {
  return { ...instance, metadata: { ...instance.metadata } };
}

/**
 * Builds the adapter of one ZooKeeper cluster (the engine's `AdapterFactory` for kind `zookeeper`).
 * Throws {@link ZooKeeperConfigError} on a bad cluster definition; connects lazily, on first use.
 */
export function createZooKeeperAdapter(spec: ClusterSpec, deps: ZooKeeperAdapterDeps): ZooKeeperAdapter {
  return new ZooKeeperAdapter(spec, deps);
}
