import { setTimeout as delay } from 'node:timers/promises';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { ApplyPlan, ClusterSpec, Instance, RegistryAdapter, ServiceKey, Unsubscribe } from '../../src/model/index.js';
import { instanceId, serviceKeyString } from '../../src/model/index.js';
import { KeyedLock } from '../../src/util/keyed-lock.js';
import { KubeClient, loadKubeConfig } from './kube-client.js';
import { KubeInformer, type InformerEvent, type InformerStats } from './kube-informer.js';
import {
  ANNOTATION_SERVICE_NAME,
  LABEL_MANAGED_BY,
  LABEL_SERVICE_NAME,
  LABEL_SLICE_MANAGED_BY,
  MANAGER,
  kubeServiceName,
} from './kube-names.js';
import type { KubeEndpointSlice, KubeService, KubeServicePort } from './kube-objects.js';
import { KubernetesApplyError, type KubernetesWriteFailure } from './kubernetes-apply-error.js';
import { KubernetesConfigError } from './kubernetes-config-error.js';
import { parseKubernetesOptions, type KubernetesAdapterOptions } from './kubernetes-options.js';
import { KubernetesRefusedError } from './kubernetes-refused-error.js';
import { KubernetesRequestError } from './kubernetes-request-error.js';
import { ANY, NamespacePolicy } from './namespace-policy.js';
import { planSlices, portNameOf, type SliceLayout } from './slice-layout.js';
import { exportOf, isManagedService, managedInstances, nativeInstances, sortInstances, type ExportRules } from './service-view.js';

/** What the adapter needs from its surroundings. */
export interface KubernetesAdapterDeps {
  logger: Logger;
  /**
   * Builds the client configuration instead of `options.kubeconfig` / the in-cluster config: tests
   * point the adapter at a test API server with a KubeConfig built in code.
   */
  kubeConfig?: (() => KubeConfig) | undefined;
}

/** A snapshot of an adapter's state, for metrics, diagnostics and tests. */
export interface KubernetesAdapterStats {
  /** The API server from the kubeconfig. */
  server: string;
  watchedServices: number;
  /** Per watched scope (`*` or a namespace): the Service and EndpointSlice informers. */
  informers: Record<string, { services: InformerStats & { healthy: boolean }; endpointSlices: InformerStats & { healthy: boolean } }>;
}

/** The Service and EndpointSlice informers of one scope: the whole cluster (`*`) or one namespace. */
interface Scope {
  services: KubeInformer<KubeService>;
  slices: KubeInformer<KubeEndpointSlice>;
}

const SLICES_OF_SERVICE_SELECTOR = LABEL_SERVICE_NAME;

/**
 * The Kubernetes side of regsync: reads Services and their EndpointSlices as instances, watches them,
 * and writes services as selector-less Services with EndpointSlices regsync manages.
 *
 * Reading (source): a Service exports (per `regsync.io/sync`, `syncByDefault`) under its name or
 * `regsync.io/service-name`; its instances are the addresses of its EndpointSlices on one port (see
 * {@link nativeInstances}). One Service informer and one EndpointSlice informer per cluster (or per
 * allowed namespace when `allowNamespaces` lists names), shared by every task, feed the reads and
 * the watches; reads wait for their first full list and fail while their watch is failing, so a
 * half-known cluster is never read as empty.
 *
 * Writing (destination): the registry's service name becomes a DNS-1035 Service name
 * ({@link kubeServiceName}); the Service has no selector and carries
 * `app.kubernetes.io/managed-by: regsync`; its EndpointSlices carry
 * `endpointslice.kubernetes.io/managed-by: regsync` and every instance's fields and marks in the
 * `regsync.io/instances` annotation, so they read back exactly as written. Objects without those
 * labels are never changed nor deleted: a Service of the same name that regsync did not create makes
 * `apply` fail with {@link KubernetesRefusedError} (`kubernetes-not-owned`), which the engine shows
 * in the task status. Writes read fresh state first and are conditional on its resourceVersion;
 * a conflict re-reads and retries.
 *
 * Deliberately left out: `heartbeat` (Kubernetes has no instance leases), Endpoints (v1) objects,
 * ExternalName Services, pagination of lists, topology hints, ports other than TCP.
 */
export class KubernetesAdapter implements RegistryAdapter {
  readonly clusterId: string;
  /** consul-k8s's name for the clusters it syncs from: a copy it made in Consul never comes back into Kubernetes. */
  readonly foreignNames = ['kubernetes'] as const;
  readonly options: KubernetesAdapterOptions;
  private readonly policy: NamespacePolicy;
  private readonly rules: ExportRules;
  private readonly client: KubeClient;
  private readonly log: Logger;
  private readonly scopes = new Map<string, Scope>();
  private readonly watchers = new Map<string, Set<() => void>>();
  private readonly serviceListWatchers = new Map<string, Set<() => void>>();
  private readonly issues = new Map<string, string[]>();
  private readonly lock = new KeyedLock();
  private closing: Promise<void> | undefined;

  constructor(spec: ClusterSpec, deps: KubernetesAdapterDeps) {
    this.clusterId = spec.id;
    if (spec.kind !== 'kubernetes') throw new KubernetesConfigError(spec.id, 'kind', `expected kubernetes, got ${String(spec.kind)}`);
    this.options = parseKubernetesOptions(spec);
    this.policy = new NamespacePolicy(spec.id, this.options);
    this.rules = { syncByDefault: this.options.syncByDefault, portName: this.options.portName, ephemeral: this.options.ephemeral };
    const bindings = deps.logger.bindings();
    this.log = deps.logger.child({ component: 'kubernetes-adapter', ...(bindings.cluster === undefined ? { cluster: spec.id } : {}) });
    let kc: KubeConfig;
    try {
      kc = deps.kubeConfig ? deps.kubeConfig() : loadKubeConfig(spec.id, this.options);
    } catch (err) {
      if (err instanceof KubernetesConfigError) throw err;
      throw new KubernetesConfigError(spec.id, 'kubeconfig', err instanceof Error ? err.message : String(err));
    }
    this.client = new KubeClient(spec.id, kc, this.options.requestTimeoutMs);
    const serverHost = hostPort(this.client.server);
    if (spec.endpoints.length > 0 && serverHost !== undefined && !spec.endpoints.includes(serverHost)) {
      this.log.info({ server: this.client.server, endpoints: spec.endpoints }, 'kubernetes adapter: endpoints are not used; the API server comes from the kubeconfig');
    }
  }

  /**
   * Every Service exported from the namespace `scope` maps to, by exported name. A `*` namespace
   * (or group) covers every allowed namespace whose target matches the rest of the scope, and each
   * key carries that namespace's target (see {@link NamespacePolicy.covers}).
   */
  async listServices(scope: { namespace: string; group: string }): Promise<ServiceKey[]> {
    this.assertOpen('list', 'services');
    if (isWildcard(scope)) return this.listCovered(scope);
    const namespace = this.policy.toKube(scope);
    if (namespace === undefined || !this.policy.allowed(namespace)) return [];
    const informers = await this.ready(namespace);
    const names = new Set<string>();
    for (const svc of informers.services.list(namespace)) {
      const exported = exportOf(svc, this.rules);
      if (exported.exported) names.add(exported.name);
    }
    return [...names].sort().map((name) => ({ namespace: scope.namespace, group: scope.group, name }));
  }

  /** Calls `onChange` when a Service appears in, vanishes from, or is renamed in the scope's namespace (every covered one for `*`). */
  watchServices(scope: { namespace: string; group: string }, onChange: () => void): Unsubscribe {
    if (this.closing) return () => {};
    if (isWildcard(scope)) {
      for (const namespace of this.watchedNamespaces()) this.scope(namespace)?.services.start();
    } else {
      const namespace = this.policy.toKube(scope);
      if (namespace === undefined || !this.policy.allowed(namespace)) return () => {};
      this.scope(namespace)?.services.start();
    }
    return subscribe(this.serviceListWatchers, scopeKey(scope), onChange);
  }

  /**
   * The instances of a service: those of every Service of the mapped namespace that exports the
   * name (from the informers), plus those of the Service regsync writes for it (read fresh: a
   * destination must see its own last write). Empty when nothing exports the name; rejects while the
   * informers have no full list or their watch is failing.
   */
  async listInstances(service: ServiceKey): Promise<Instance[]> {
    this.assertOpen('list', serviceKeyString(service));
    const key = serviceKeyString(service);
    const namespace = this.policy.toKube(service);
    if (namespace === undefined || !this.policy.allowed(namespace)) {
      this.issues.set(key, []);
      return [];
    }
    const informers = await this.ready(namespace);
    const ours = kubeServiceName(service.name);
    const issues: string[] = [];
    const found = new Map<string, Instance>();
    let nativeNamedOurs = false;
    for (const svc of informers.services.list(namespace)) {
      if (isManagedService(svc)) continue;
      if (svc.metadata?.name === ours) nativeNamedOurs = true;
      const exported = exportOf(svc, this.rules);
      if (exported.name !== service.name) continue;
      issues.push(...exported.issues);
      if (!exported.exported) continue;
      const read = nativeInstances(svc, informers.slices.byIndex(`${namespace}/${svc.metadata?.name ?? ''}`), this.rules);
      issues.push(...read.issues);
      for (const i of read.instances) if (!found.has(instanceId(i))) found.set(instanceId(i), i);
    }
    if (!nativeNamedOurs) {
      const read = await this.readManaged(namespace, ours, service.name);
      issues.push(...read.issues);
      for (const i of read.instances) if (!found.has(instanceId(i))) found.set(instanceId(i), i);
    }
    this.issues.set(key, issues);
    return sortInstances([...found.values()]);
  }

  readIssues(service: ServiceKey): string[] {
    return this.issues.get(serviceKeyString(service)) ?? [];
  }

  /** Calls `onChange` when the Service(s) exporting the name or their EndpointSlices change, in real time (watch). */
  watch(service: ServiceKey, onChange: () => void): Unsubscribe {
    const namespace = this.policy.toKube(service);
    if (this.closing || namespace === undefined || !this.policy.allowed(namespace)) return () => {};
    const scope = this.scope(namespace);
    scope?.services.start();
    scope?.slices.start();
    return subscribe(this.watchers, serviceKeyString(service), onChange);
  }

  /**
   * Makes the Service regsync writes for `service` hold what it held, minus `plan.remove`, plus
   * `plan.upsert` (every task's instances stay), rewriting only the slices that change; creates the
   * Service on the first instance and deletes it with its slices after the last. Reads fresh state
   * first; every write is conditional on what was read, and a conflict (another writer in between)
   * reads again and retries, `conflictAttempts` times. Rejects with {@link KubernetesRefusedError}
   * when a Service of that name exists that regsync did not create (nothing is written), with
   * {@link KubernetesApplyError} when some writes failed after all were tried.
   */
  async apply(service: ServiceKey, plan: ApplyPlan): Promise<void> {
    if (plan.upsert.length === 0 && plan.remove.length === 0) return;
    this.assertOpen('apply', serviceKeyString(service));
    const namespace = this.policy.toKube(service);
    if (namespace === undefined) {
      throw new KubernetesRefusedError(
        'kubernetes-namespace-unmapped',
        this.clusterId,
        serviceKeyString(service),
        `no kubernetes namespace maps to namespace ${JSON.stringify(service.namespace)} and group ${JSON.stringify(service.group)} (options.namespaceMap, options.group)`,
      );
    }
    const name = kubeServiceName(service.name);
    if (!this.policy.allowed(namespace)) {
      throw new KubernetesRefusedError('kubernetes-namespace-denied', this.clusterId, `${namespace}/${name}`, `namespace ${namespace} is not allowed (options.allowNamespaces, options.denyNamespaces)`);
    }
    await this.lock.run(`${namespace}/${name}`, () => this.applyLocked(namespace, name, service.name, plan));
  }

  /** For metrics, diagnostics and tests. */
  stats(): KubernetesAdapterStats {
    const informers: KubernetesAdapterStats['informers'] = {};
    for (const [key, scope] of this.scopes) {
      informers[key] = {
        services: { ...scope.services.stats(), healthy: scope.services.healthy },
        endpointSlices: { ...scope.slices.stats(), healthy: scope.slices.healthy },
      };
    }
    return { server: this.client.server, watchedServices: this.watchers.size, informers };
  }

  /** Stops every informer; idempotent. Later reads and writes reject with `kubernetes-closed`. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.watchers.clear();
      this.serviceListWatchers.clear();
      await Promise.all([...this.scopes.values()].flatMap((s) => [s.services.stop(), s.slices.stop()]));
    })();
    return this.closing;
  }

  private async applyLocked(namespace: string, name: string, originalName: string, plan: ApplyPlan): Promise<void> {
    const takenNames = new Set<string>();
    let failures: KubernetesWriteFailure[];
    for (let attempt = 1; ; attempt += 1) {
      const outcome = await this.writeOnce(namespace, name, originalName, plan, takenNames);
      failures = outcome.failures;
      if (!outcome.conflict) break;
      if (attempt >= this.options.conflictAttempts) {
        failures.push({ op: 'write', target: `services ${namespace}/${name}`, error: outcome.conflict });
        break;
      }
      this.log.debug({ service: `${namespace}/${name}`, attempt, err: outcome.conflict }, 'write conflict; reading again');
      await delay(Math.round(20 * attempt * (0.5 + Math.random())));
    }
    if (failures.length > 0) throw new KubernetesApplyError(this.clusterId, `${namespace}/${name}`, failures);
  }

  /** One read-compute-write round. Answers the failures, and the first conflict when there was one (then retried). */
  private async writeOnce(
    namespace: string,
    name: string,
    originalName: string,
    plan: ApplyPlan,
    takenNames: Set<string>,
  ): Promise<{ failures: KubernetesWriteFailure[]; conflict?: KubernetesRequestError }> {
    let svc = await this.client.readService(namespace, name);
    if (svc && !isManagedService(svc)) {
      throw new KubernetesRefusedError(
        'kubernetes-not-owned',
        this.clusterId,
        `${namespace}/${name}`,
        `a Service of that name exists that regsync did not create (no label ${LABEL_MANAGED_BY}=${MANAGER}); it is left alone`,
      );
    }
    const holds = svc?.metadata?.annotations?.[ANNOTATION_SERVICE_NAME];
    if (svc && holds !== originalName) {
      throw new KubernetesRefusedError(
        'kubernetes-not-owned',
        this.clusterId,
        `${namespace}/${name}`,
        `the Service regsync created there holds service ${JSON.stringify(holds)}, not ${JSON.stringify(originalName)}; it is left alone`,
      );
    }
    const slices = (await this.client.listSlices(namespace, `${LABEL_SERVICE_NAME}=${name},${LABEL_SLICE_MANAGED_BY}=${MANAGER}`)).items;
    const next = new Map<string, Instance>();
    for (const i of managedInstances(slices).instances) next.set(instanceId(i), i);
    for (const i of plan.remove) next.delete(instanceId(i));
    for (const i of plan.upsert) next.set(instanceId(i), i);

    const failures: KubernetesWriteFailure[] = [];
    let conflict: KubernetesRequestError | undefined;
    const attempt = async (op: KubernetesWriteFailure['op'], target: string, write: () => Promise<unknown>): Promise<boolean> => {
      try {
        await write();
        return true;
      } catch (err) {
        const e = this.client.toError(op, target, err);
        if (e.isConflict) {
          conflict ??= e;
          if (op === 'create' && e.reason === 'AlreadyExists') takenNames.add(target.slice(target.lastIndexOf('/') + 1));
        } else failures.push({ op, target, error: e });
        return false;
      }
    };
    const layoutFor = (ownerUid: string): SliceLayout =>
      planSlices({ namespace, serviceName: name, ownerUid, current: slices, instances: [...next.values()], maxPerSlice: this.options.maxEndpointsPerSlice, takenNames });
    let layout = layoutFor(svc?.metadata?.uid ?? '');
    for (const i of layout.invalid) {
      failures.push({ op: 'write', target: `instance ${instanceId(i)}`, error: new Error(`address ${JSON.stringify(i.ip)} is neither IPv4, IPv6 nor a DNS name`) });
    }

    if (layout.ports.length === 0) {
      // Nothing left to hold: the slices go, then the Service.
      for (const slice of slices) {
        const sliceName = slice.metadata?.name ?? '';
        await attempt('delete', `endpointslices ${namespace}/${sliceName}`, () => this.client.deleteSlice(namespace, sliceName, slice.metadata?.resourceVersion));
      }
      if (svc && !conflict && failures.length === 0) {
        const current = svc;
        await attempt('delete', `services ${namespace}/${name}`, () => this.client.deleteService(namespace, name, current.metadata?.resourceVersion));
      }
      this.log.debug({ service: `${namespace}/${name}`, deleted: slices.length }, 'kubernetes service emptied');
      return { failures, ...(conflict ? { conflict } : {}) };
    }

    const ports: KubeServicePort[] = layout.ports.map((port) => ({ name: portNameOf(port), port, targetPort: port, protocol: 'TCP' }));
    if (!svc) {
      const body: KubeService = {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: { name, namespace, labels: { [LABEL_MANAGED_BY]: MANAGER }, annotations: { [ANNOTATION_SERVICE_NAME]: originalName } },
        spec: { type: 'ClusterIP', ...(this.options.headless ? { clusterIP: 'None' } : {}), ports },
      };
      const created = await this.tryWrite(() => this.client.createService(namespace, body));
      if (created instanceof KubernetesRequestError) {
        if (created.isConflict) return { failures, conflict: created };
        failures.push({ op: 'create', target: `services ${namespace}/${name}`, error: created });
        return { failures };
      }
      svc = created;
      layout = layoutFor(svc.metadata?.uid ?? '');
    } else if (!samePorts(svc.spec?.ports ?? [], ports)) {
      const current = svc;
      const replaced = await this.tryWrite(() =>
        this.client.replaceService(namespace, { ...current, metadata: stripReadOnly(current.metadata), spec: { ...current.spec, ports } }),
      );
      if (replaced instanceof KubernetesRequestError) {
        if (replaced.isConflict) return { failures, conflict: replaced };
        failures.push({ op: 'replace', target: `services ${namespace}/${name}`, error: replaced });
      }
    }

    for (const slice of layout.create) {
      await attempt('create', `endpointslices ${namespace}/${slice.metadata?.name ?? ''}`, () => this.client.createSlice(namespace, slice));
    }
    for (const slice of layout.replace) {
      await attempt('replace', `endpointslices ${namespace}/${slice.metadata?.name ?? ''}`, () =>
        this.client.replaceSlice(namespace, { ...slice, metadata: stripReadOnly(slice.metadata) }),
      );
    }
    for (const slice of layout.remove) {
      const sliceName = slice.metadata?.name ?? '';
      await attempt('delete', `endpointslices ${namespace}/${sliceName}`, () => this.client.deleteSlice(namespace, sliceName, slice.metadata?.resourceVersion));
    }
    this.log.debug(
      { service: `${namespace}/${name}`, instances: next.size, created: layout.create.length, replaced: layout.replace.length, deleted: layout.remove.length },
      'kubernetes apply',
    );
    return { failures, ...(conflict ? { conflict } : {}) };
  }

  private async tryWrite<T>(write: () => Promise<T>): Promise<T | KubernetesRequestError> {
    try {
      return await write();
    } catch (err) {
      if (err instanceof KubernetesRequestError) return err;
      throw err;
    }
  }

  /** The Service regsync writes for a name, read fresh: its instances exactly as written. */
  private async readManaged(namespace: string, name: string, originalName: string): Promise<{ instances: Instance[]; issues: string[] }> {
    const svc = await this.client.readService(namespace, name);
    if (!svc || !isManagedService(svc)) return { instances: [], issues: [] };
    const holds = svc.metadata?.annotations?.[ANNOTATION_SERVICE_NAME];
    if (holds !== originalName) {
      return { instances: [], issues: [`service ${namespace}/${name} was created by regsync for service ${JSON.stringify(holds)}`] };
    }
    const slices = await this.client.listSlices(namespace, `${LABEL_SERVICE_NAME}=${name},${LABEL_SLICE_MANAGED_BY}=${MANAGER}`);
    return managedInstances(slices.items);
  }

  /** The exported services of every namespace a wildcard scope covers, keyed by each namespace's target. */
  private async listCovered(scope: { namespace: string; group: string }): Promise<ServiceKey[]> {
    const keys = new Map<string, ServiceKey>();
    for (const watched of this.watchedNamespaces()) {
      const informers = await this.ready(watched);
      for (const svc of informers.services.list(watched)) {
        const target = this.policy.covers(svc.metadata?.namespace ?? '', scope);
        const exported = target ? exportOf(svc, this.rules) : undefined;
        if (!target || !exported?.exported) continue;
        const key = { ...target, name: exported.name };
        keys.set(serviceKeyString(key), key);
      }
    }
    return [...keys.values()].sort((a, b) => serviceKeyString(a).localeCompare(serviceKeyString(b)));
  }

  /** What the informers are keyed by: `undefined` for the cluster-wide pair, else each allowed namespace. */
  private watchedNamespaces(): Array<string | undefined> {
    return this.policy.clusterWide ? [undefined] : this.policy.namespaces;
  }

  /** The informers serving a namespace (`undefined`: the cluster-wide ones), once both hold a full list and their watches work. */
  private async ready(namespace: string | undefined): Promise<Scope> {
    const scope = this.scope(namespace);
    if (!scope) throw new KubernetesRequestError({ code: 'kubernetes-not-ready', clusterId: this.clusterId, verb: 'read', target: namespace ?? '*', detail: 'namespace not allowed' });
    scope.services.start();
    scope.slices.start();
    await Promise.all([scope.services.whenSynced(this.options.initialListTimeoutMs), scope.slices.whenSynced(this.options.initialListTimeoutMs)]);
    return scope;
  }

  /**
   * The informer pair for a namespace: the cluster-wide one, or the namespace's own (created on
   * first use). `undefined` asks for the cluster-wide pair, which exists only when the policy is
   * cluster-wide.
   */
  private scope(namespace: string | undefined): Scope | undefined {
    if (namespace === undefined ? !this.policy.clusterWide : !this.policy.allowed(namespace)) return undefined;
    const ns = this.policy.clusterWide ? undefined : namespace;
    const key = ns ?? '*';
    let scope = this.scopes.get(key);
    if (scope) return scope;
    const common = {
      clusterId: this.clusterId,
      client: this.client,
      watchTimeoutSeconds: this.options.watchTimeoutSeconds,
      requestTimeoutMs: this.options.requestTimeoutMs,
      backoffInitialMs: this.options.backoffInitialMs,
      backoffMaxMs: this.options.backoffMaxMs,
      log: this.log,
      onRecovered: () => this.notifyAll(),
    };
    const services: KubeInformer<KubeService> = new KubeInformer<KubeService>({
      ...common,
      name: ns === undefined ? 'services' : `services in ${ns}`,
      path: ns === undefined ? '/api/v1/services' : `/api/v1/namespaces/${encodeURIComponent(ns)}/services`,
      list: () => this.client.listServices(ns),
      onEvent: (e) => this.onServiceEvent(e),
    });
    const slices: KubeInformer<KubeEndpointSlice> = new KubeInformer<KubeEndpointSlice>({
      ...common,
      name: ns === undefined ? 'endpointslices' : `endpointslices in ${ns}`,
      path: ns === undefined ? '/apis/discovery.k8s.io/v1/endpointslices' : `/apis/discovery.k8s.io/v1/namespaces/${encodeURIComponent(ns)}/endpointslices`,
      list: () => this.client.listSlices(ns, SLICES_OF_SERVICE_SELECTOR),
      labelSelector: SLICES_OF_SERVICE_SELECTOR,
      indexKey: (slice) => {
        const owner = slice.metadata?.labels?.[LABEL_SERVICE_NAME];
        return owner === undefined ? undefined : `${slice.metadata?.namespace ?? ''}/${owner}`;
      },
      onEvent: (e) => this.onSliceEvent(e, services),
    });
    scope = { services, slices };
    this.scopes.set(key, scope);
    return scope;
  }

  private onServiceEvent(e: InformerEvent<KubeService>): void {
    const namespace = e.object.metadata?.namespace ?? '';
    const target = this.policy.allowed(namespace) ? this.policy.toTarget(namespace) : undefined;
    if (!target) return;
    const before = e.previous ? exportOf(e.previous, this.rules) : undefined;
    const after = e.type === 'deleted' ? undefined : exportOf(e.object, this.rules);
    for (const name of new Set([before?.name, after?.name, exportOf(e.object, this.rules).name])) {
      if (name !== undefined) this.notify(this.watchers, serviceKeyString({ ...target, name }));
    }
    const listedBefore = before?.exported ? before.name : undefined;
    const listedAfter = after?.exported ? after.name : undefined;
    if (listedBefore !== listedAfter) {
      // The scope itself, and the wildcard scopes that cover it.
      for (const namespace of [target.namespace, ANY]) {
        for (const group of [target.group, ANY]) this.notify(this.serviceListWatchers, scopeKey({ namespace, group }));
      }
    }
  }

  private onSliceEvent(e: InformerEvent<KubeEndpointSlice>, services: KubeInformer<KubeService>): void {
    const namespace = e.object.metadata?.namespace ?? '';
    const target = this.policy.allowed(namespace) ? this.policy.toTarget(namespace) : undefined;
    if (!target) return;
    const owners = new Set([e.previous?.metadata?.labels?.[LABEL_SERVICE_NAME], e.object.metadata?.labels?.[LABEL_SERVICE_NAME]]);
    for (const owner of owners) {
      if (owner === undefined) continue;
      const svc = services.get(namespace, owner);
      // Without its Service a slice exports nothing; the Service's own event will tell.
      if (svc) this.notify(this.watchers, serviceKeyString({ ...target, name: exportOf(svc, this.rules).name }));
    }
  }

  private notify(registry: Map<string, Set<() => void>>, key: string): void {
    for (const cb of [...(registry.get(key) ?? [])]) {
      try {
        cb();
      } catch (err) {
        this.log.warn({ err, key }, 'watch callback threw');
      }
    }
  }

  /** After a watch failure: whatever happened meanwhile, everyone re-reads. */
  private notifyAll(): void {
    for (const key of this.watchers.keys()) this.notify(this.watchers, key);
    for (const key of this.serviceListWatchers.keys()) this.notify(this.serviceListWatchers, key);
  }

  private assertOpen(verb: string, target: string): void {
    if (this.closing) throw new KubernetesRequestError({ code: 'kubernetes-closed', clusterId: this.clusterId, verb, target, detail: 'the adapter is closed' });
  }
}

/**
 * Builds the adapter of one Kubernetes cluster (the engine's `AdapterFactory` for kind
 * `kubernetes`). Throws {@link KubernetesConfigError} on a bad cluster definition; lists and
 * watches lazily, on first use.
 */
export function createKubernetesAdapter(spec: ClusterSpec, deps: KubernetesAdapterDeps): KubernetesAdapter {
  return new KubernetesAdapter(spec, deps);
}

function subscribe(registry: Map<string, Set<() => void>>, key: string, cb: () => void): Unsubscribe {
  const entry = () => cb();
  let set = registry.get(key);
  if (!set) {
    set = new Set();
    registry.set(key, set);
  }
  set.add(entry);
  return () => {
    const current = registry.get(key);
    current?.delete(entry);
    if (current?.size === 0) registry.delete(key);
  };
}

function isWildcard(scope: { namespace: string; group: string }): boolean {
  return scope.namespace === ANY || scope.group === ANY;
}

function scopeKey(scope: { namespace: string; group: string }): string {
  return `${scope.namespace}\n${scope.group}`;
}

function samePorts(have: readonly KubeServicePort[], want: readonly KubeServicePort[]): boolean {
  const form = (ports: readonly KubeServicePort[]) =>
    JSON.stringify(ports.map((p) => [p.name ?? '', p.port, String(p.targetPort ?? p.port), p.protocol ?? 'TCP']).sort());
  return form(have) === form(want);
}

/** Metadata fit for a write body: what the server sets itself is left out (resourceVersion stays: it is the precondition). */
function stripReadOnly<M extends object | undefined>(meta: M): M {
  if (!meta) return meta;
  const { creationTimestamp: _c, managedFields: _m, generation: _g, ...rest } = meta as Record<string, unknown>;
  return rest as M;
}

function hostPort(server: string): string | undefined {
  try {
    const url = new URL(server);
    return `${url.hostname}:${url.port || (url.protocol === 'https:' ? '443' : '80')}`;
  } catch {
    return undefined;
  }
}
