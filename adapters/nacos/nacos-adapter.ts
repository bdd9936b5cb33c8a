import type { Logger } from 'pino';
import type {
  ApplyPlan,
  BeatResult,
  ClusterSpec,
  Instance,
  RegistryAdapter,
  ServiceKey,
  ServicesChange,
  TransportStats,
  Unsubscribe,
  WatchEvent,
  WatchOptions,
} from '../../src/model/index.js';
import { instanceId } from '../../src/model/index.js';
import { answersGrpc, type GrpcEndpoint } from './grpc/grpc-connection.js';
import { NacosGrpcNaming, type GrpcNamingStats } from './grpc/grpc-naming.js';
import { batchProblem } from './grpc/messages.js';
import { clusterAddresses, routeToCluster, unmapped } from './local-address.js';
import type { NacosApi, PushSubscription } from './nacos-api.js';
import { NacosApplyError, type NacosWriteFailure } from './nacos-apply-error.js';
import { NacosConfigError } from './nacos-config-error.js';
import { NacosHttp } from './nacos-http.js';
import { parseEndpoint, parseNacosOptions, type NacosAdapterOptions, type NacosApiVersion, type NacosEndpoint, type NacosProtocol } from './nacos-options.js';
import { NacosRequestError, type NacosRequestErrorCode } from './nacos-request-error.js';
import { NacosV1Api } from './nacos-v1-api.js';
import { NacosV3Api } from './nacos-v3-api.js';
import { PushReceiver, type PushReceiverStats } from './push-receiver.js';
import { FuzzyServiceLists } from './fuzzy-service-lists.js';
import { ServiceListWatch } from './service-list-watch.js';
import { WatchHub } from './watch-hub.js';
import { describeService, toServiceRef, type ServiceRef } from './wire.js';

/** The scope wildcard: every namespace, or every group. Nacos namespace ids and group names cannot be `*`. */
const ANY = '*';

/**
 * A list the server answered with a failure, with what it was needed for and the likely reason;
 * anything else (the network, a closed adapter) as it is.
 */
function explained(err: unknown, purpose: string): unknown {
  if (!(err instanceof NacosRequestError) || err.status === undefined) return err;
  const why =
    err.status === 401 || err.status === 403
      ? ' (the cluster\'s user lacks the permission)'
      : err.status === 404 || err.status === 410
        ? ' (this server does not offer it)'
        : '';
  return err.explained(`${purpose}${why}`);
}

/** What the adapter needs from its surroundings. */
export interface NacosAdapterDeps {
  logger: Logger;
  /** Told of every failed request to the cluster, by error code (metrics; see `NacosHttpOptions.onRequestError`). */
  onRequestError?: ((code: NacosRequestErrorCode) => void) | undefined;
}

/** A snapshot of an adapter's state, for metrics and diagnostics. */
export interface NacosAdapterStats {
  /** The protocol in use, once known. */
  apiVersion: NacosProtocol | undefined;
  /** The gRPC connection, its subscriptions and publish sets; undefined over HTTP. */
  grpc: GrpcNamingStats | undefined;
  watchedServices: number;
  /** Service-list scopes polled for `watchServices`. */
  watchedServiceLists: number;
  /** Service-list scopes watched by push for `watchServices` (Nacos 3.x fuzzy watch over gRPC). */
  pushedServiceLists: number;
  /** Push receiver counters; undefined while no receiver is open. */
  push: (PushReceiverStats & { port: number; clientIP: string }) | undefined;
  /** Successful logins (0 without credentials). */
  logins: number;
  concurrency: { inUse: number; waiting: number };
}

/**
 * The Nacos side of regsync: reads, watches, writes and keeps alive instances of one Nacos cluster,
 * over the Nacos SDK gRPC protocol (Nacos 2.x/3.x: subscriptions whose pushes carry the instance
 * list, ephemeral copies as one publish set per service bound to this process's connection, no
 * beats) or over HTTP, the v1 open API (Nacos 1.x-3.1, UDP push, beats) or the v3 API (polling),
 * chosen per cluster by `options.apiVersion` (`auto`: gRPC where it answers, else v1, else v3).
 *
 * One instance per cluster, shared by every task: one gRPC connection, or one HTTP connection pool
 * per endpoint, one bound on HTTP requests in flight, one login, one UDP push socket.
 *
 * Deliberately left out: service metadata and selectors, health-check settings. gRPC lists one
 * group of one namespace at a time, so `*` scopes are listed over HTTP, unless a Nacos 3.x fuzzy
 * watch of the scope holds them (see {@link watchServices}). A v1 reader does not see
 * disabled instances (the v1 list leaves them out), and neither does a gRPC reader (Nacos leaves
 * them out of subscriptions and queries), so a copy of a disabled instance is not made from such a
 * source, and a disabled copy in such a destination looks absent.
 */
export class NacosAdapter implements RegistryAdapter {
  readonly clusterId: string;
  private readonly options: NacosAdapterOptions;
  private readonly endpoints: NacosEndpoint[];
  private readonly log: Logger;
  private readonly http: NacosHttp;
  private readonly hub: WatchHub;
  private readonly serviceLists: ServiceListWatch;
  private readonly pushedLists: FuzzyServiceLists;
  private apiPromise: Promise<NacosApi> | undefined;
  private httpVersion: NacosApiVersion | undefined;
  /** Resolves to the gRPC naming, or undefined for HTTP. */
  private modePromise: Promise<NacosGrpcNaming | undefined> | undefined;
  private mode: { grpc: NacosGrpcNaming | undefined } | undefined;
  /** Ephemeral copies written through `apply` without an owner's desired set. */
  private readonly directOwner = 'apply';
  private readonly directShares = new Map<string, Instance[]>();
  private readonly onRequestError: ((code: NacosRequestErrorCode) => void) | undefined;
  private receiver: PushReceiver | undefined;
  private pushTarget: PushSubscription | undefined;
  private pushStarting: Promise<PushSubscription> | undefined;
  private pushFailing = false;
  private beatIntervalMs: number;
  private lightBeatEnabled = false;
  private closing: Promise<void> | undefined;

  constructor(spec: ClusterSpec, deps: NacosAdapterDeps) {
    this.clusterId = spec.id;
    if (spec.kind !== 'nacos') throw new NacosConfigError(spec.id, 'kind', `expected nacos, got ${String(spec.kind)}`);
    if (!Array.isArray(spec.endpoints) || spec.endpoints.length === 0) {
      throw new NacosConfigError(spec.id, 'endpoints', 'at least one host:port is needed');
    }
    if ((spec.username === undefined || spec.username === '') !== (spec.password === undefined || spec.password === '')) {
      throw new NacosConfigError(spec.id, 'username/password', 'give both or neither');
    }
    this.options = parseNacosOptions(spec);
    this.endpoints = spec.endpoints.map((e) => parseEndpoint(spec.id, e));
    this.beatIntervalMs = this.options.heartbeatIntervalMs;
    this.onRequestError = deps.onRequestError;
    const bindings = deps.logger.bindings();
    this.log = deps.logger.child({ component: 'nacos-adapter', ...(bindings.cluster === undefined ? { cluster: spec.id } : {}) });
    this.http = new NacosHttp({
      clusterId: spec.id,
      endpoints: this.endpoints,
      contextPath: this.options.contextPath,
      maxConcurrency: this.options.maxConcurrency,
      requestTimeoutMs: this.options.requestTimeoutMs,
      credentials: spec.username && spec.password ? { username: spec.username, password: spec.password } : undefined,
      log: this.log,
      onRequestError: deps.onRequestError,
    });
    this.hub = new WatchHub({
      pollIntervalMs: this.options.pollIntervalMs,
      log: this.log,
      list: (ref) => this.pollList(ref),
    });
    this.serviceLists = new ServiceListWatch({
      intervalMs: this.options.serviceListPollIntervalMs,
      log: this.log,
      list: (scope) => this.listScope(scope),
    });
    this.pushedLists = new FuzzyServiceLists({
      log: this.log,
      intervalMs: this.options.serviceListPollIntervalMs,
      fuzzy: async () => {
        const grpc = await this.transport();
        return grpc ? grpc.fuzzyWatches() : undefined;
      },
      listNamespaces: async () => (await this.api()).listNamespaces(),
      poll: (scope, onChange) => this.serviceLists.watch(scope, onChange),
    });
  }

  /** The last `clientBeatInterval` the server answered (v1), else `options.heartbeatIntervalMs`. */
  get heartbeatIntervalMs(): number {
    return this.beatIntervalMs;
  }

  /**
   * The protocol for this cluster: the configured one, or (auto) gRPC when a `ServerCheckRequest`
   * on an endpoint's gRPC port answers, else v1 unless the server answers 404/410 to a v1 service
   * list, then v3. Asked once; a failed probe is asked again next time.
   */
  async resolveApiVersion(): Promise<NacosProtocol> {
    if ((await this.transport()) !== undefined) return 'grpc';
    return (await this.api()).version;
  }

  /** Over gRPC, ephemeral copies live as long as this process's connection: no beats, every replica publishes. */
  async connectionBound(): Promise<boolean> {
    return (await this.transport()) !== undefined;
  }

  /** Over gRPC: replaces `owner`'s share of the service's publish set. Over HTTP nothing is bound to a connection: a no-op. */
  async publish(service: ServiceKey, owner: string, instances: readonly Instance[]): Promise<void> {
    const grpc = await this.transport();
    if (grpc) await grpc.publish(toServiceRef(service), owner, instances);
  }

  /**
   * Every service of `scope.group` in `scope.namespace` (all pages). `*` as the namespace lists
   * every namespace of the cluster (`GET /nacos/v1/console/namespaces`, or the v3 admin namespace
   * list) and each of them; `*` as the group lists every group (v1: the catalog list
   * `GET /nacos/v1/ns/catalog/services`; v3: the admin service list without a group filter). Keys
   * carry the real namespace (`public` for the public one) and group of each service under a `*`,
   * and the scope's own values otherwise. Rejects when any list fails (never a partial answer); an
   * error of a list only a `*` needs says so. A scope whose fuzzy watch is complete (see
   * {@link watchServices}) is answered from the pushed set, with no request.
   */
  async listServices(scope: { namespace: string; group: string }): Promise<ServiceKey[]> {
    // A scope watched by fuzzy watch, its pushed set complete: no request at all.
    const pushed = this.pushedLists.list(scope);
    if (pushed) return pushed;
    const services = await this.listScope(scope);
    this.serviceLists.observed(scope, services);
    return services;
  }

  /** Whether the scope's fuzzy watch is complete (its services answered from the pushed set). */
  servicesPushed(scope: { namespace: string; group: string }): boolean {
    return this.pushedLists.complete(scope);
  }

  /**
   * Calls `onChange` when services may have appeared in or vanished from the scope (`*` namespaces
   * and groups included). Over gRPC to a server with fuzzy watch (Nacos 3.x), by push: a pattern
   * per namespace of the scope, `onChange` on every service added or deleted, told which (see
   * {@link FuzzyServiceLists}), and `listServices` of the scope answered from the pushed set with no
   * request while it is complete. Otherwise (HTTP, Nacos 2.x, a pattern over the server's limits) the
   * scope is listed every `options.serviceListPollIntervalMs` and compared with the last list seen
   * (a poll, or the last `listServices` of the same scope), `onChange` told nothing (list again);
   * failures are logged and retried.
   */
  watchServices(scope: { namespace: string; group: string }, onChange: (change?: ServicesChange) => void): Unsubscribe {
    if (this.closing) return () => {};
    // Over HTTP nothing is pushed: the list poll starts at once.
    if (this.mode && !this.mode.grpc) return this.serviceLists.watch(scope, onChange);
    return this.pushedLists.watch(scope, onChange);
  }

  /** Every instance of a service; rejects on any failure (a failed read is never an empty service). */
  async listInstances(service: ServiceKey): Promise<Instance[]> {
    const ref = toServiceRef(service);
    const grpc = await this.transport();
    if (grpc) return grpc.listInstances(ref);
    const api = await this.api();
    // The first read of a watched service is its watch's baseline, and (v1) subscribes to push in
    // place of the watch's first poll, which then comes a whole poll interval later.
    const subscription = api.supportsPush && this.hub.wantsSubscription(ref) ? await this.pushSubscription() : undefined;
    const instances = await api.listInstances(ref, subscription);
    this.hub.observed(ref, instances, subscription !== undefined);
    return instances;
  }

  /**
   * Calls `onChange` when the service may have changed: at once on a UDP push (v1), else when a poll
   * every `pollIntervalMs` sees different instances. Watchers of one service share one subscription;
   * the first read after watching (or else the first poll, which comes within a few seconds and
   * subscribes to push) records a baseline without calling anyone, so read after watching.
   */
  watch(service: ServiceKey, onChange: (event?: WatchEvent) => void, options?: WatchOptions): Unsubscribe {
    const ref = toServiceRef(service);
    if (this.closing) {
      this.log.debug({ service: describeService(ref) }, 'watch on a closed nacos adapter ignored');
      return () => {};
    }
    const start = (grpc: NacosGrpcNaming | undefined) => (grpc ? grpc.watch(ref, onChange) : this.hub.watch(ref, onChange, options));
    if (this.mode) return start(this.mode.grpc);
    // The protocol is not known yet: watch once it is (asking again while the cluster cannot be reached).
    let stop: Unsubscribe | undefined;
    let cancelled = false;
    let timer: NodeJS.Timeout | undefined;
    const attempt = () => {
      this.transport().then(
        (grpc) => {
          if (!cancelled && !this.closing) stop = start(grpc);
        },
        (err: unknown) => {
          if (cancelled || this.closing) return;
          this.log.debug({ err, service: describeService(ref) }, 'nacos protocol unknown yet; the watch starts once the cluster answers');
          timer = setTimeout(attempt, this.options.pollIntervalMs);
          timer.unref();
        },
      );
    };
    attempt();
    return () => {
      cancelled = true;
      clearTimeout(timer);
      stop?.();
    };
  }

  /**
   * Registers every upsert (with all fields) and deregisters every removal, concurrently within
   * `maxConcurrency`; all are attempted, then failures reject together as {@link NacosApplyError}.
   * An empty plan sends nothing.
   */
  async apply(service: ServiceKey, plan: ApplyPlan): Promise<void> {
    const grpc = await this.transport();
    if (grpc) return this.applyGrpc(grpc, service, plan);
    const writes = [
      ...plan.upsert.map((instance) => ({ op: 'register' as const, instance })),
      ...plan.remove.map((instance) => ({ op: 'deregister' as const, instance })),
    ];
    if (writes.length === 0) return;
    const ref = toServiceRef(service);
    const api = await this.api();
    const results = await Promise.allSettled(
      writes.map((w) => (w.op === 'register' ? api.register(ref, w.instance) : api.deregister(ref, w.instance))),
    );
    const failures: NacosWriteFailure[] = [];
    results.forEach((r, i) => {
      const write = writes[i];
      if (r.status === 'rejected' && write) failures.push({ op: write.op, instance: instanceId(write.instance), error: r.reason });
    });
    this.log.debug(
      { service: describeService(ref), registered: plan.upsert.length, deregistered: plan.remove.length, failed: failures.length },
      'nacos apply',
    );
    if (failures.length > 0) throw new NacosApplyError(this.clusterId, describeService(ref), failures, writes.length);
  }

  /**
   * Renews an ephemeral instance: `ok`, or `unknown` when the server lost it (register it again).
   * Persistent instances never expire and are answered `ok` without a request. v1 beats carry the
   * instance body until the server announces light beats (see `options.lightBeats`). Beats jump the
   * queue of waiting requests.
   */
  async heartbeat(service: ServiceKey, instance: Instance): Promise<BeatResult> {
    if (!instance.ephemeral) return 'ok';
    // Over gRPC an ephemeral instance lives with the connection that published it.
    if ((await this.transport()) !== undefined) return 'ok';
    const api = await this.api();
    const answer = await api.beat(toServiceRef(service), instance, this.options.lightBeats && this.lightBeatEnabled);
    if (answer.intervalMs !== undefined) this.beatIntervalMs = answer.intervalMs;
    if (answer.lightBeatEnabled !== undefined) this.lightBeatEnabled = answer.lightBeatEnabled;
    return answer.result;
  }

  /** Over gRPC, the digest of a watched service's pushed list; undefined over HTTP (polls and UDP hints are no feed of the list). */
  cachedDigest(service: ServiceKey): string | undefined {
    return this.mode?.grpc?.cachedDigest(toServiceRef(service));
  }

  /** The gRPC connection's counters; undefined over HTTP (UDP pushes are in {@link stats}). */
  transportStats(): TransportStats | undefined {
    const grpc = this.mode?.grpc?.stats();
    if (!grpc) return undefined;
    return { connections: grpc.state === 'ready' ? 1 : 0, reconnects: grpc.reconnects, pushesReceived: grpc.pushesReceived, publishSets: grpc.publishSets };
  }

  /** For metrics and diagnostics. */
  stats(): NacosAdapterStats {
    const receiver = this.receiver;
    const target = this.pushTarget;
    const grpc = this.mode?.grpc;
    return {
      apiVersion: grpc ? 'grpc' : this.httpVersion,
      grpc: grpc?.stats(),
      watchedServices: this.hub.size,
      watchedServiceLists: this.serviceLists.size,
      pushedServiceLists: this.pushedLists.pushed,
      push: receiver?.alive && target ? { ...receiver.stats(), port: target.udpPort, clientIP: target.clientIP } : undefined,
      logins: this.http.tokens?.loginCount ?? 0,
      concurrency: this.http.concurrency(),
    };
  }

  /** Stops watches, the push socket and the connection pools; idempotent. Later calls reject. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.hub.close();
      this.pushedLists.close();
      this.serviceLists.close();
      const mode = this.modePromise ? await this.modePromise.catch(() => undefined) : undefined;
      mode?.close();
      const starting = this.pushStarting;
      if (starting) await starting.catch(() => undefined);
      await this.receiver?.close();
      this.receiver = undefined;
      await this.http.close();
    })();
    return this.closing;
  }

  /**
   * The gRPC naming when this cluster is spoken to over gRPC, else undefined (HTTP). Decided once
   * (see {@link resolveApiVersion}); a probe that reached nothing is asked again next time.
   */
  private transport(): Promise<NacosGrpcNaming | undefined> {
    if (this.mode) return Promise.resolve(this.mode.grpc);
    if (!this.modePromise) {
      const detecting = this.detectTransport();
      this.modePromise = detecting;
      detecting.then(
        (grpc) => {
          if (this.closing) grpc?.close();
          else this.mode = { grpc };
        },
        () => {
          if (this.modePromise === detecting) this.modePromise = undefined;
        },
      );
    }
    return this.modePromise;
  }

  private async detectTransport(): Promise<NacosGrpcNaming | undefined> {
    const wanted = this.options.apiVersion;
    if (wanted === 'v1' || wanted === 'v3') return undefined;
    const endpoints = this.grpcEndpoints();
    if (wanted === 'auto') {
      const answers = await Promise.all(endpoints.map((e, i) => answersGrpc(e, Math.min(3_000, this.options.requestTimeoutMs), this.endpoints[i]?.port)));
      if (!answers.includes(true)) {
        // Unreachable altogether rejects here, and the choice is made again at the next use.
        const api = await this.api();
        this.log.info({ grpcEndpoints: endpoints.map((e) => e.label), http: api.version }, 'nacos answers no gRPC; using HTTP');
        return undefined;
      }
    }
    if (this.closing) throw this.closedError('gRPC');
    const grpc = new NacosGrpcNaming({
      clusterId: this.clusterId,
      endpoints,
      log: this.log,
      clientIp: this.options.clientIP,
      requestTimeoutMs: this.options.requestTimeoutMs,
      maxConcurrency: this.options.maxConcurrency,
      tokens: this.http.tokens,
      onRequestError: this.onRequestError,
    });
    this.log.info({ grpcEndpoints: endpoints.map((e) => e.label) }, 'nacos answers gRPC; using gRPC (pushes on our connection, copies without beats)');
    // Connected before first use where the cluster lets it; else the connection keeps trying.
    await grpc.ready().catch((err: unknown) => this.log.warn({ err }, 'nacos gRPC connection not up yet; retrying'));
    return grpc;
  }

  /** Each endpoint's gRPC address: `options.grpcPort`, else its HTTP port + 1000. */
  private grpcEndpoints(): GrpcEndpoint[] {
    return this.endpoints.map((e) => {
      const port = this.options.grpcPort ?? e.port + 1000;
      const hostPart = e.host.includes(':') ? `[${e.host}]` : e.host;
      return { host: e.host, port, label: `${hostPart}:${port}` };
    });
  }

  /**
   * A plan over gRPC: the ephemeral copies are the owner's share of the service's publish set
   * (`plan.desired`, or the upserts and removals applied to this adapter's own share when there is
   * none); persistent ones are registered one by one, over gRPC where the server offers it (2.3+),
   * else over HTTP.
   */
  private async applyGrpc(grpc: NacosGrpcNaming, service: ServiceKey, plan: ApplyPlan): Promise<void> {
    const ref = toServiceRef(service);
    const persistent = [
      ...plan.upsert.filter((i) => !i.ephemeral).map((instance) => ({ op: 'register' as const, instance })),
      ...plan.remove.filter((i) => !i.ephemeral).map((instance) => ({ op: 'deregister' as const, instance })),
    ];
    // Instances Nacos would refuse are left out of the set (see batchProblem) and named as failures.
    const failures: NacosWriteFailure[] = plan.upsert
      .filter((i) => i.ephemeral)
      .flatMap((i) => {
        const problem = batchProblem(i);
        return problem === undefined ? [] : [{ op: 'register' as const, instance: instanceId(i), error: new Error(`not published: ${problem}`) }];
      });
    const ephemeralWrites = plan.upsert.filter((i) => i.ephemeral).length + plan.remove.filter((i) => i.ephemeral).length;
    const publish = async () => {
      // Ephemeral upserts mean the destination lacks copies this connection may believe it holds.
      if (plan.desired) return grpc.publish(ref, plan.desired.owner, plan.desired.instances, plan.upsert.some((i) => i.ephemeral));
      if (ephemeralWrites === 0) return;
      const key = `${describeService(ref)}`;
      const share = new Map((this.directShares.get(key) ?? []).map((i) => [instanceId(i), i]));
      for (const i of plan.remove) share.delete(instanceId(i));
      for (const i of plan.upsert) if (i.ephemeral) share.set(instanceId(i), i);
      this.directShares.set(key, [...share.values()]);
      return grpc.publish(ref, this.directOwner, [...share.values()]);
    };
    const byGrpc = persistent.length > 0 && (await grpc.persistentByGrpc());
    const results = await Promise.allSettled([
      publish(),
      ...persistent.map(async (w) => {
        if (byGrpc) return grpc.persistent(ref, w.op, w.instance);
        const api = await this.api();
        return w.op === 'register' ? api.register(ref, w.instance) : api.deregister(ref, w.instance);
      }),
    ]);
    results.forEach((r, i) => {
      if (r.status !== 'rejected') return;
      if (i === 0) failures.push({ op: 'register', instance: `publish set (${ephemeralWrites} ephemeral changes)`, error: r.reason });
      else {
        const w = persistent[i - 1];
        if (w) failures.push({ op: w.op, instance: instanceId(w.instance), error: r.reason });
      }
    });
    this.log.debug({ service: describeService(ref), registered: plan.upsert.length, deregistered: plan.remove.length, failed: failures.length }, 'nacos apply (gRPC)');
    if (failures.length > 0) throw new NacosApplyError(this.clusterId, describeService(ref), failures, persistent.length + (ephemeralWrites > 0 || plan.desired ? 1 : 0));
  }

  private closedError(path: string): NacosRequestError {
    return new NacosRequestError({ code: 'nacos-closed', clusterId: this.clusterId, method: 'gRPC', path, endpoint: this.endpoints.map((e) => e.label).join(','), detail: 'the adapter is closed' });
  }

  private api(): Promise<NacosApi> {
    if (!this.apiPromise) {
      const detecting = this.detectApi();
      this.apiPromise = detecting;
      detecting.then(
        (api) => {
          this.httpVersion = api.version;
        },
        () => {
          if (this.apiPromise === detecting) this.apiPromise = undefined;
        },
      );
    }
    return this.apiPromise;
  }

  private async detectApi(): Promise<NacosApi> {
    const wanted = this.options.apiVersion;
    if (wanted === 'v1') return new NacosV1Api(this.http);
    if (wanted === 'v3') return new NacosV3Api(this.http);
    // Without a token on purpose: on a secured server v1 answers 403, which still says "served".
    const v1Probe = { method: 'GET' as const, path: '/v1/ns/service/list', params: { pageNo: '1', pageSize: '1' } };
    const v1 = await this.http.request(v1Probe);
    if (v1.status !== 404 && v1.status !== 410) {
      this.log.info({ endpoint: v1.endpoint, status: v1.status }, 'nacos serves the v1 API; using v1');
      return new NacosV1Api(this.http);
    }
    const v3Probe = { method: 'GET' as const, path: '/v3/admin/core/namespace/list' };
    const v3 = await this.http.request(v3Probe);
    if (v3.status === 404) {
      throw this.http.error(
        v3Probe,
        v3,
        'nacos-http-error',
        `neither the v1 nor the v3 naming API is served here (v1 answered ${v1.status}); check the endpoints and options.contextPath`,
      );
    }
    this.log.info({ endpoint: v3.endpoint, v1Status: v1.status }, 'nacos does not serve the v1 API; using v3 (no push, watches poll)');
    return new NacosV3Api(this.http);
  }

  /** The lists behind {@link listServices}, without telling the service-list watches (their own polls). */
  private async listScope(scope: { namespace: string; group: string }): Promise<ServiceKey[]> {
    const grpc = await this.transport();
    if (grpc && scope.namespace !== ANY && scope.group !== ANY) {
      // gRPC lists one group of one namespace; `*` scopes take the HTTP catalog lists below.
      const { namespaceId, group } = toServiceRef({ namespace: scope.namespace, group: scope.group, name: '' });
      const names = await grpc.listServiceNames(namespaceId, group, this.options.servicePageSize);
      return names.map((name) => ({ namespace: scope.namespace, group: scope.group, name }));
    }
    const api = await this.api();
    const pageSize = this.options.servicePageSize;
    const namespaces =
      scope.namespace === ANY
        ? await api.listNamespaces().catch((err: unknown) => {
            throw explained(err, 'namespace "*" needs the list of every namespace');
          })
        : [scope.namespace];
    const lists = await Promise.all(
      namespaces.map(async (namespace): Promise<ServiceKey[]> => {
        const { namespaceId, group } = toServiceRef({ namespace, group: scope.group, name: '' });
        if (scope.group !== ANY) {
          const names = await api.listServiceNames(namespaceId, group, pageSize);
          return names.map((name) => ({ namespace, group: scope.group, name }));
        }
        const services = await api.listAllServices(namespaceId, pageSize).catch((err: unknown) => {
          throw explained(err, `group "*" needs the list of every service of namespace ${namespaceId}`);
        });
        return services.map((s) => ({ namespace, group: s.group, name: s.name }));
      }),
    );
    return lists.flat();
  }

  /** A watch poll: lists the service, subscribing to push when the dialect has it and a socket is open. */
  private async pollList(ref: ServiceRef): Promise<Instance[]> {
    const api = await this.api();
    const subscription = api.supportsPush ? await this.pushSubscription() : undefined;
    return api.listInstances(ref, subscription);
  }

  /** The push socket's port and our address as the server should see it; undefined when it cannot open. */
  private async pushSubscription(): Promise<PushSubscription | undefined> {
    if (this.receiver?.alive && this.pushTarget) return this.pushTarget;
    this.pushStarting ??= this.openReceiver().finally(() => {
      this.pushStarting = undefined;
    });
    try {
      const target = await this.pushStarting;
      this.pushFailing = false;
      return target;
    } catch (err) {
      if (!this.pushFailing) this.log.warn({ err }, 'nacos push receiver could not open; polling only, retrying at the next poll');
      this.pushFailing = true;
      return undefined;
    }
  }

  private async openReceiver(): Promise<PushSubscription> {
    const route = await routeToCluster(this.endpoints, this.options.requestTimeoutMs);
    const allowed = await clusterAddresses(this.endpoints);
    allowed.add(route.remoteAddress);
    const receiver = new PushReceiver({
      log: this.log,
      isClusterAddress: (address) => allowed.has(unmapped(address)),
      onService: (grouped) => this.hub.pushed(grouped),
    });
    const udpPort = await receiver.start(route.localAddress);
    if (this.closing) {
      await receiver.close();
      throw new NacosRequestError({
        code: 'nacos-closed',
        clusterId: this.clusterId,
        method: 'UDP',
        path: 'push',
        endpoint: route.endpoint,
        detail: 'the adapter is closed',
      });
    }
    await this.receiver?.close();
    this.receiver = receiver;
    this.pushTarget = { udpPort, clientIP: this.options.clientIP ?? route.localAddress };
    this.log.info({ bind: `${route.localAddress}:${udpPort}`, clientIP: this.pushTarget.clientIP }, 'nacos push receiver listening');
    return this.pushTarget;
  }
}

/**
 * Builds the adapter of one Nacos cluster (the engine's `AdapterFactory` for kind `nacos`). Throws
 * {@link NacosConfigError} on a bad cluster definition; connects lazily, on first use.
 */
export function createNacosAdapter(spec: ClusterSpec, deps: NacosAdapterDeps): NacosAdapter {
  return new NacosAdapter(spec, deps);
}

