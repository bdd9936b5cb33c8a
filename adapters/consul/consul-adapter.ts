import type { Logger } from 'pino';
import type { ApplyPlan, RegistryAdapter, Unsubscribe, WatchEvent, WatchOptions } from '../../src/model/adapter.js';
import { MARK_TASK, instanceId, instancesDigest, serviceKeyString, type ClusterSpec, type Instance, type ServiceKey } from '../../src/model/index.js';
import { ConsulApplyError, type ConsulWriteFailure } from './consul-apply-error.js';
import { BlockingLoop, BlockingSlots, type BlockingPace } from './consul-blocking.js';
import { ConsulHttp, type ConsulAnswer } from './consul-http.js';
import { copyServiceId, instanceOfEntry, registrationOf, type ConsulHealthEntry, type CopyNode, type ReadEntry } from './consul-meta.js';
import { parseConsulCluster, type ConsulClusterConfig } from './consul-options.js';
import { ConsulRequestError } from './consul-request-error.js';

/** What the adapter needs besides its cluster. */
export interface ConsulAdapterDeps {
  logger: Logger;
}

/** Where a read instance lives: what a removal sends. */
interface Location {
  node: string;
  serviceId: string;
}

/** One blocking query per watched service, shared by every watch of it in this process. */
interface ServiceFeed {
  loop: BlockingLoop;
  listeners: Set<(event?: WatchEvent) => void>;
  /** The last read, once there is one. */
  last: Instance[] | undefined;
  digest: string | undefined;
}

/**
 * A Consul cluster, through its HTTP API.
 *
 * - Names: every Consul service is one service key, `<namespace>/<group>/<service name>`, where
 *   namespace and group are the cluster's own (`namespace`, default `public`; `options.group`,
 *   default `DEFAULT_GROUP`): Consul has neither. Keys of any other namespace or group are empty.
 * - Reads: `GET /v1/health/service/:name`; an instance per entry (the service's address, else its
 *   node's), healthy when every check passes (or warns, with `includeWarning`), disabled under
 *   maintenance. Tags go to the metadata key `consul.tags`; `key=value` tags also become metadata
 *   (as nacos-sync reads them) unless the meta has the key. A read that ACLs emptied fails
 *   (`consul-auth-failed`): it says nothing of what Consul holds.
 * - Watches: blocking queries (see {@link BlockingLoop}), at most `maxBlockingQueries` open (the
 *   rest poll every `pollIntervalMs`), over connections of their own; the first answer is handed
 *   over as the watch's first read, later ones call back only when the instances differ. An answer
 *   ACLs emptied moves no index: it is asked for again (with backoff) until it can be read.
 * - Writes: catalog registrations on a node no agent owns (`options.nodeName`, `regsync`), as
 *   consul-k8s does: copies need no heartbeat and no agent removes them; one check per copy
 *   (`regsync:<id>`, passing or critical) says it is a copy; stable service ids
 *   (`<name>-<12 hex of sha1>`). Removals only ever touch regsync's node: an instance registered
 *   elsewhere is refused, never deregistered.
 * - Marks and metadata keys are encoded for Consul's meta rule (see `consul-meta.ts`).
 */
export class ConsulAdapter implements RegistryAdapter {
  private readonly http: ConsulHttp;
  private readonly feeds = new Map<string, ServiceFeed>();
  private readonly listWatches = new Set<BlockingLoop>();
  private readonly locations = new Map<string, Map<string, Location>>();
  private readonly issues = new Map<string, string[]>();
  private readonly pace: BlockingPace;
  private readonly slots: BlockingSlots;
  private readonly ignored: ReadonlySet<string>;
  private readonly copyNode: CopyNode;
  private closed = false;

  constructor(
    readonly clusterId: string,
    private readonly config: ConsulClusterConfig,
    private readonly log: Logger,
  ) {
    const o = config.options;
    this.http = new ConsulHttp(clusterId, config);
    this.pace = { waitMs: o.blockingWaitMs, minIntervalMs: o.blockingMinIntervalMs, backoffMaxMs: o.backoffMaxMs, requestTimeoutMs: o.requestTimeoutMs, pollIntervalMs: o.pollIntervalMs };
    this.slots = new BlockingSlots(o.maxBlockingQueries);
    this.ignored = new Set(o.ignoreServices);
    this.copyNode = { node: o.nodeName, nodeAddress: o.nodeAddress, datacenter: o.datacenter, namespace: o.consulNamespace, partition: o.partition };
  }

  /** Whether a scope or a service key can name this cluster's services. */
  private inScope(scope: { namespace: string; group: string }): boolean {
    return (scope.namespace === '*' || scope.namespace === this.config.namespace) && (scope.group === '*' || scope.group === this.config.options.group);
  }

  private key(name: string): ServiceKey {
    return { namespace: this.config.namespace, group: this.config.options.group, name };
  }

  private open(what: string): void {
    if (this.closed) throw new ConsulRequestError('consul-closed', this.clusterId, what, 'the adapter is closed');
  }

  async listServices(scope: { namespace: string; group: string }): Promise<ServiceKey[]> {
    this.open('GET /v1/catalog/services');
    if (!this.inScope(scope)) return [];
    const answer = await this.http.call({ method: 'GET', path: '/v1/catalog/services', query: this.http.readQuery() });
    return this.namesOf(answer).map((name) => this.key(name));
  }

  private namesOf(answer: ConsulAnswer): string[] {
    const body = answer.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new ConsulRequestError('consul-bad-answer', this.clusterId, 'GET /v1/catalog/services', 'expected an object of service names');
    }
    if (answer.filtered && Object.keys(body).length === 0) throw this.hiddenByAcls('GET /v1/catalog/services', 'any service');
    return Object.keys(body)
      .filter((name) => !this.ignored.has(name))
      .sort();
  }

  watchServices(scope: { namespace: string; group: string }, onChange: () => void): Unsubscribe {
    this.open('watch /v1/catalog/services');
    if (!this.inScope(scope)) return () => {};
    let digest: string | undefined;
    const loop = new BlockingLoop(
      this.http,
      this.slots,
      '/v1/catalog/services',
      () => this.http.readQuery(),
      this.pace,
      (answer) => {
        const next = this.namesOf(answer).join('\n');
        if (digest !== undefined && next !== digest) onChange();
        digest = next;
      },
      (err) => this.log.debug({ err }, 'consul service list watch failed; retrying'),
    );
    this.listWatches.add(loop);
    return () => {
      loop.stop();
      this.listWatches.delete(loop);
    };
  }

  async listInstances(service: ServiceKey): Promise<Instance[]> {
    const path = `/v1/health/service/${encodeURIComponent(service.name)}`;
    this.open(`GET ${path}`);
    if (!this.inScope(service) || this.ignored.has(service.name)) return [];
    const answer = await this.http.call({ method: 'GET', path, query: this.http.readQuery() });
    const instances = this.instancesOf(service, answer);
    // A watch waiting for this read blocks on its index (see `watch`).
    const feed = this.feeds.get(serviceKeyString(service));
    if (feed !== undefined && feed.last === undefined && answer.index !== undefined && feed.loop.seed(answer.index)) {
      feed.last = instances;
      feed.digest = instancesDigest(instances);
    }
    return instances;
  }

  /** The instances of an answer of `health/service`; remembers where each lives and what was skipped. */
  private instancesOf(service: ServiceKey, answer: ConsulAnswer): Instance[] {
    if (!Array.isArray(answer.body)) {
      throw new ConsulRequestError('consul-bad-answer', this.clusterId, `GET /v1/health/service/${service.name}`, 'expected a list of entries');
    }
    if (answer.filtered && answer.body.length === 0) throw this.hiddenByAcls(`GET /v1/health/service/${service.name}`, `service ${service.name} or its nodes`);
    const byId = new Map<string, ReadEntry>();
    const issues: string[] = [];
    const includeWarning = this.config.options.includeWarning;
    for (const raw of answer.body as ConsulHealthEntry[]) {
      const read = typeof raw === 'object' && raw !== null ? instanceOfEntry(raw, includeWarning) : 'an entry that is not an object';
      if (typeof read === 'string') {
        if (issues.length < 20) issues.push(read);
        continue;
      }
      const id = instanceId(read.instance);
      const other = byId.get(id);
      if (other !== undefined) {
        const keep = this.preferred(other, read);
        if (issues.length < 20) issues.push(`${id} is registered on nodes ${other.node} and ${read.node}; read the one on ${keep.node}`);
        byId.set(id, keep);
        continue;
      }
      byId.set(id, read);
    }
    const key = serviceKeyString(service);
    this.locations.set(key, new Map([...byId].map(([id, r]) => [id, { node: r.node, serviceId: r.serviceId }])));
    if (issues.length > 0) this.issues.set(key, issues);
    else this.issues.delete(key);
    return [...byId.values()].map((r) => r.instance);
  }

  /**
   * Which of two registrations at one address stands for it: a copy regsync wrote (on its node,
   * marked with a task) over any other, so that its task still sees it, and removes it once the
   * source instance goes, when the application registered itself at that address meanwhile (it
   * moved to Consul); else the one not on regsync's node, the registry's own; else the first.
   */
  private preferred(first: ReadEntry, second: ReadEntry): ReadEntry {
    const isCopy = (r: ReadEntry) => r.node === this.copyNode.node && r.instance.metadata[MARK_TASK] !== undefined;
    if (isCopy(first) !== isCopy(second)) return isCopy(first) ? first : second;
    return first.node === this.copyNode.node && second.node !== this.copyNode.node ? second : first;
  }

  /**
   * An answer emptied by ACLs (`X-Consul-Results-Filtered-By-ACLs`: a token without `service:read`
   * or `node:read`, or none under default deny) says nothing of what Consul holds: it fails like a
   * refused read, so that no copy is removed on its account and the status names the token.
   */
  private hiddenByAcls(request: string, what: string): ConsulRequestError {
    const token = this.config.token === undefined ? 'the anonymous token (the cluster has none)' : "the cluster's token";
    return new ConsulRequestError('consul-auth-failed', this.clusterId, request, `the answer is empty, filtered by ACLs: ${token} may not read ${what}`);
  }

  readIssues(service: ServiceKey): string[] {
    return this.issues.get(serviceKeyString(service)) ?? [];
  }

  /**
   * With `readFollows` (the engine's reconcile reads the service here next), a new blocking loop
   * waits up to `requestTimeoutMs` for that read and blocks on its index, rather than reading the
   * same entries once more: a cold sync of a `*` task then reads each service once, not twice. Without
   * that read in time it reads by itself, and hands that read over as the first one.
   */
  watch(service: ServiceKey, onChange: (event?: WatchEvent) => void, options?: WatchOptions): Unsubscribe {
    const path = `/v1/health/service/${encodeURIComponent(service.name)}`;
    this.open(`watch ${path}`);
    if (!this.inScope(service) || this.ignored.has(service.name)) return () => {};
    const key = serviceKeyString(service);
    let feed = this.feeds.get(key);
    if (feed === undefined) {
      const created: ServiceFeed = { listeners: new Set(), last: undefined, digest: undefined, loop: undefined as unknown as BlockingLoop };
      created.loop = new BlockingLoop(
        this.http,
        this.slots,
        path,
        () => this.http.readQuery(),
        this.pace,
        (answer) => this.feedAnswer(service, created, answer),
        (err) => this.log.debug({ err, service: key }, 'consul watch failed; retrying'),
        options?.readFollows === true ? this.config.options.requestTimeoutMs : 0,
      );
      this.feeds.set(key, created);
      feed = created;
    } else if (feed.last !== undefined) {
      // A later watch of a service already read: its first read is the last one.
      const first = feed.last;
      queueMicrotask(() => onChange({ firstRead: first }));
    }
    const listener = (event?: WatchEvent) => onChange(event);
    feed.listeners.add(listener);
    const current = feed;
    return () => {
      current.listeners.delete(listener);
      if (current.listeners.size === 0 && this.feeds.get(key) === current) {
        current.loop.stop();
        this.feeds.delete(key);
      }
    };
  }

  /**
   * One answer of a service's blocking loop. An answer that cannot be read (emptied by ACLs, not a
   * list) throws: the loop then asks again at the index before it, rather than wait past a change
   * it never saw.
   */
  private feedAnswer(service: ServiceKey, feed: ServiceFeed, answer: ConsulAnswer): void {
    const instances = this.instancesOf(service, answer);
    const digest = instancesDigest(instances);
    const first = feed.last === undefined;
    const changed = digest !== feed.digest;
    feed.last = instances;
    feed.digest = digest;
    if (!first && !changed) return;
    for (const listener of [...feed.listeners]) {
      try {
        listener(first ? { firstRead: instances } : undefined);
      } catch (err) {
        this.log.warn({ err }, 'a watch listener threw');
      }
    }
  }

  async apply(service: ServiceKey, plan: ApplyPlan): Promise<void> {
    this.open('apply');
    const failures: ConsulWriteFailure[] = [];
    const target = (i: Instance) => `instance ${instanceId(i)}`;
    if (!this.inScope(service) || this.ignored.has(service.name)) {
      const why = this.ignored.has(service.name) ? `service ${service.name} is in ignoreServices` : `cluster ${this.clusterId} holds only ${this.config.namespace}/${this.config.options.group}`;
      for (const i of plan.upsert) failures.push({ op: 'register', target: target(i), error: new Error(why) });
      if (failures.length > 0) throw new ConsulApplyError(this.clusterId, serviceKeyString(service), failures);
      return;
    }
    const known = this.locations.get(serviceKeyString(service));
    const writes: Array<() => Promise<void>> = [];
    for (const instance of plan.upsert) {
      writes.push(async () => {
        const body = registrationOf(service.name, instance, this.copyNode);
        if (typeof body === 'string') throw Object.assign(new Error(body), { op: 'register' });
        await this.http.call({ method: 'PUT', path: '/v1/catalog/register', body });
      });
    }
    for (const instance of plan.remove) {
      writes.push(async () => {
        const at = known?.get(instanceId(instance)) ?? { node: this.copyNode.node, serviceId: copyServiceId(service.name, instance) };
        if (at.node !== this.copyNode.node) throw new Error(`registered on node ${at.node}, not regsync's ${this.copyNode.node}: left alone`);
        await this.http.call({
          method: 'PUT',
          path: '/v1/catalog/deregister',
          body: {
            Node: at.node,
            ServiceID: at.serviceId,
            ...(this.copyNode.datacenter !== undefined ? { Datacenter: this.copyNode.datacenter } : {}),
            ...(this.copyNode.namespace !== undefined ? { Namespace: this.copyNode.namespace } : {}),
            ...(this.copyNode.partition !== undefined ? { Partition: this.copyNode.partition } : {}),
          },
        });
      });
    }
    const ops: Array<{ op: ConsulWriteFailure['op']; instance: Instance }> = [
      ...plan.upsert.map((instance) => ({ op: 'register' as const, instance })),
      ...plan.remove.map((instance) => ({ op: 'deregister' as const, instance })),
    ];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < writes.length) {
        const n = next++;
        try {
          await (writes[n] as () => Promise<void>)();
        } catch (error) {
          const { op, instance } = ops[n] as (typeof ops)[number];
          failures.push({ op, target: target(instance), error });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.config.options.writeConcurrency, writes.length) }, worker));
    if (failures.length > 0) throw new ConsulApplyError(this.clusterId, serviceKeyString(service), failures);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const feed of this.feeds.values()) feed.loop.stop();
    this.feeds.clear();
    for (const loop of this.listWatches) loop.stop();
    this.listWatches.clear();
    await this.http.close();
  }
}

/** Builds the adapter of a Consul cluster; throws `ConsulConfigError` for settings it cannot use. */
export function createConsulAdapter(spec: ClusterSpec, deps: ConsulAdapterDeps): ConsulAdapter {
  return new ConsulAdapter(spec.id, parseConsulCluster(spec), deps.logger);
}
