import type { Logger } from 'pino';
import type { ApplyPlan, BeatResult, RegistryAdapter, Unsubscribe, WatchEvent } from '../../src/model/adapter.js';
import { instanceId, serviceKeyString, type ClusterSpec, type Instance, type ServiceKey } from '../../src/model/index.js';
import { EurekaApplyError, type EurekaWriteFailure } from './eureka-apply-error.js';
import { EurekaFeed } from './eureka-feed.js';
import { EurekaHttp } from './eureka-http.js';
import { copyInstanceId, infoOf, instanceOfInfo, instancesOfApp, serviceNameOf, type EurekaApplication, type EurekaInfo } from './eureka-meta.js';
import { parseEurekaCluster, type EurekaClusterConfig } from './eureka-options.js';
import { EurekaRequestError } from './eureka-request-error.js';

/** What the adapter needs besides its cluster. */
export interface EurekaAdapterDeps {
  logger: Logger;
}

/** A write of this process, shown by reads for `readCacheMs` (null: cancelled). */
interface RecentWrite {
  at: number;
  instance: Instance | null;
  eurekaId: string;
}

/**
 * A Eureka cluster (Netflix or Spring Cloud server), through its REST API v2.
 *
 * - Names: each application is one service key `<namespace>/<group>/<name>` (the cluster's
 *   `namespace`, default `public`; `options.group`, default `DEFAULT_GROUP`); the name is the VIP
 *   address that names the application (`orders-service` for `ORDERS-SERVICE`), else the
 *   application's name in lower case. Copies are written as the application `NAME` upper-cased
 *   with the VIP address `name`, so names keep their case both ways.
 * - Reads: `GET /apps/{APP}`; `UP` instances are healthy, `OUT_OF_SERVICE` ones disabled, the
 *   others unhealthy (only `UP` ones are copied). Watches follow the registry as Eureka clients
 *   do (see {@link EurekaFeed}), every `pollIntervalMs` (30 s).
 * - Writes: a complete InstanceInfo per copy (`POST /apps/{APP}`), renewed through the heartbeat
 *   proxy every `renewalIntervalS` (a 404 registers it again), cancelled on removal.
 * - The server's response cache shows writes up to 30 s late: for `readCacheMs` after this
 *   process registered or cancelled a copy, reads show what it wrote, so that a reconcile neither
 *   reads its own cancel as an instance still there, nor its registration as one missing.
 */
export class EurekaAdapter implements RegistryAdapter {
  private readonly http: EurekaHttp;
  private readonly feed: EurekaFeed;
  /** service key -> instance id -> this process's last write. */
  private readonly recent = new Map<string, Map<string, RecentWrite>>();
  /** service key -> instance id -> the Eureka id it was read under. */
  private readonly ids = new Map<string, Map<string, string>>();
  private readonly issues = new Map<string, string[]>();
  private closed = false;
  readonly heartbeatIntervalMs: number;
  /** Every copy holds a lease, whatever its `ephemeral`: the heartbeat proxy renews them all. */
  readonly leasesEveryInstance = true;

  constructor(
    readonly clusterId: string,
    private readonly config: EurekaClusterConfig,
    private readonly log: Logger,
  ) {
    this.http = new EurekaHttp(clusterId, config);
    this.feed = new EurekaFeed(this.http, config.options.pollIntervalMs, config.options.fullFetchEvery, log);
    this.heartbeatIntervalMs = config.options.renewalIntervalS * 1000;
  }

  private inScope(scope: { namespace: string; group: string }): boolean {
    return (scope.namespace === '*' || scope.namespace === this.config.namespace) && (scope.group === '*' || scope.group === this.config.options.group);
  }

  private open(what: string): void {
    if (this.closed) throw new EurekaRequestError('eureka-closed', this.clusterId, what, 'the adapter is closed');
  }

  async listServices(scope: { namespace: string; group: string }): Promise<ServiceKey[]> {
    this.open('GET /apps');
    if (!this.inScope(scope)) return [];
    const answer = await this.http.call('GET', '/apps', [200]);
    const apps = (answer.body as { applications?: { application?: unknown } } | undefined)?.applications?.application;
    const list = (apps === undefined || apps === null ? [] : Array.isArray(apps) ? apps : [apps]) as EurekaApplication[];
    return list
      .filter((a) => typeof a.name === 'string' && instancesOfApp(a).length > 0)
      .map((a) => ({ namespace: this.config.namespace, group: this.config.options.group, name: serviceNameOf(a.name as string, instancesOfApp(a)) }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }

  watchServices(scope: { namespace: string; group: string }, onChange: () => void): Unsubscribe {
    this.open('watch /apps');
    if (!this.inScope(scope)) return () => {};
    return this.feed.subscribe((_changed, appsChanged) => {
      if (appsChanged) onChange();
    });
  }

  async listInstances(service: ServiceKey): Promise<Instance[]> {
    const app = service.name.toUpperCase();
    this.open(`GET /apps/${app}`);
    if (!this.inScope(service)) return [];
    const answer = await this.http.call('GET', `/apps/${encodeURIComponent(app)}`, [200, 404]);
    const infos = answer.status === 404 ? [] : instancesOfApp((answer.body as { application?: EurekaApplication } | undefined)?.application);
    return this.readOf(service, infos);
  }

  /** The instances of `infos`, with this process's recent writes laid over them. */
  private readOf(service: ServiceKey, infos: readonly EurekaInfo[]): Instance[] {
    const key = serviceKeyString(service);
    const byId = new Map<string, Instance>();
    const eurekaIds = new Map<string, string>();
    const issues: string[] = [];
    for (const info of infos) {
      const read = instanceOfInfo(info);
      if (typeof read === 'string') {
        if (issues.length < 20) issues.push(read);
        continue;
      }
      byId.set(instanceId(read.instance), read.instance);
      eurekaIds.set(instanceId(read.instance), read.eurekaId);
    }
    const recent = this.recent.get(key);
    if (recent !== undefined) {
      const since = Date.now() - this.config.options.readCacheMs;
      for (const [id, write] of recent) {
        if (write.at < since) {
          recent.delete(id);
          continue;
        }
        if (write.instance === null) byId.delete(id);
        else {
          byId.set(id, write.instance);
          eurekaIds.set(id, write.eurekaId);
        }
      }
      if (recent.size === 0) this.recent.delete(key);
    }
    this.ids.set(key, eurekaIds);
    if (issues.length > 0) this.issues.set(key, issues);
    else this.issues.delete(key);
    return [...byId.values()];
  }

  readIssues(service: ServiceKey): string[] {
    return this.issues.get(serviceKeyString(service)) ?? [];
  }

  watch(service: ServiceKey, onChange: (event?: WatchEvent) => void): Unsubscribe {
    const app = service.name.toUpperCase();
    this.open(`watch /apps/${app}`);
    if (!this.inScope(service)) return () => {};
    let first = true;
    const deliver = () => {
      const read = this.readOf(service, this.feed.instancesOf(app));
      onChange(first ? { firstRead: read } : undefined);
      first = false;
    };
    const unsubscribe = this.feed.subscribe((changed) => {
      if (first || changed.has(app)) deliver();
    });
    // A feed already running has its copy: this watch's first read comes from it at once.
    if (this.feed.ready) queueMicrotask(() => first && deliver());
    return unsubscribe;
  }

  async apply(service: ServiceKey, plan: ApplyPlan): Promise<void> {
    this.open('apply');
    const app = service.name.toUpperCase();
    const key = serviceKeyString(service);
    const failures: EurekaWriteFailure[] = [];
    if (!this.inScope(service)) {
      for (const i of plan.upsert) failures.push({ op: 'register', target: `instance ${instanceId(i)}`, error: new Error(`cluster ${this.clusterId} holds only ${this.config.namespace}/${this.config.options.group}`) });
      if (failures.length > 0) throw new EurekaApplyError(this.clusterId, key, failures);
      return;
    }
    const known = this.ids.get(key);
    const remember = (id: string, instance: Instance | null, eurekaId: string) => {
      const map = this.recent.get(key) ?? new Map<string, RecentWrite>();
      map.set(id, { at: Date.now(), instance, eurekaId });
      this.recent.set(key, map);
    };
    const ops: Array<{ op: EurekaWriteFailure['op']; instance: Instance; run: () => Promise<void> }> = [
      ...plan.upsert.map((instance) => ({
        op: 'register' as const,
        instance,
        run: async () => {
          const o = this.config.options;
          await this.http.call('POST', `/apps/${encodeURIComponent(app)}`, [200, 204], infoOf(service.name, instance, { renewalIntervalS: o.renewalIntervalS, leaseDurationS: o.leaseDurationS, dataCenterName: o.dataCenterName, now: Date.now() }));
          remember(instanceId(instance), instance, copyInstanceId(service.name, instance));
        },
      })),
      ...plan.remove.map((instance) => ({
        op: 'cancel' as const,
        instance,
        run: async () => {
          const eurekaId = known?.get(instanceId(instance)) ?? copyInstanceId(service.name, instance);
          // 404: already gone (evicted, or cancelled by another replica).
          await this.http.call('DELETE', `/apps/${encodeURIComponent(app)}/${encodeURIComponent(eurekaId)}`, [200, 404]);
          remember(instanceId(instance), null, eurekaId);
        },
      })),
    ];
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < ops.length) {
        const op = ops[next++] as (typeof ops)[number];
        try {
          await op.run();
        } catch (error) {
          failures.push({ op: op.op, target: `instance ${instanceId(op.instance)}`, error });
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.config.options.writeConcurrency, ops.length) }, worker));
    if (failures.length > 0) throw new EurekaApplyError(this.clusterId, key, failures);
  }

  async heartbeat(service: ServiceKey, instance: Instance): Promise<BeatResult> {
    this.open('heartbeat');
    const app = service.name.toUpperCase();
    const eurekaId = this.ids.get(serviceKeyString(service))?.get(instanceId(instance)) ?? copyInstanceId(service.name, instance);
    const answer = await this.http.call('PUT', `/apps/${encodeURIComponent(app)}/${encodeURIComponent(eurekaId)}`, [200, 404]);
    return answer.status === 404 ? 'unknown' : 'ok';
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.feed.close();
    await this.http.close();
  }
}

/** Builds the adapter of a Eureka cluster. */
export function createEurekaAdapter(spec: ClusterSpec, deps: EurekaAdapterDeps): EurekaAdapter {
  return new EurekaAdapter(spec.id, parseEurekaCluster(spec), deps.logger);
}
