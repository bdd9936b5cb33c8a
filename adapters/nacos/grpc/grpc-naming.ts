import type { Logger } from 'pino';
import type { Instance, Unsubscribe, WatchEvent } from '../../../src/model/index.js';
import type { NacosRequestErrorCode } from '../nacos-request-error.js';
import type { NacosTokenSource } from '../nacos-token-source.js';
import { NacosRequestError } from '../nacos-request-error.js';
import type { ServiceRef } from '../wire.js';
import { WireFormatError } from '../wire-format-error.js';
import { GrpcConnection, type GrpcConnectionStats, type GrpcEndpoint, type GrpcTimings } from './grpc-connection.js';
import { FuzzyWatches } from './fuzzy-watches.js';
import { FUZZY_WATCH_ABILITY, namingRequest, readServiceInfo, REQUEST, wireInstance, type ServiceInfoRead } from './messages.js';
import { EncodedBody } from './payload.js';
import { PublishSets } from './publish-sets.js';
import { GrpcSubscriptions } from './subscriptions.js';

export interface GrpcNamingOptions {
  clusterId: string;
  endpoints: GrpcEndpoint[];
  log: Logger;
  clientIp: string | undefined;
  requestTimeoutMs: number;
  maxConcurrency?: number | undefined;
  tokens: NacosTokenSource | undefined;
  onRequestError?: ((code: NacosRequestErrorCode) => void) | undefined;
  timings?: Partial<GrpcTimings> | undefined;
  /** How often every fuzzy-watch pattern is watched again (default 3 min, as the Java client). */
  fuzzyResyncMs?: number | undefined;
}

/** Counters for metrics and the cluster's status. */
export interface GrpcNamingStats extends GrpcConnectionStats {
  subscriptions: number;
  /** Services whose set this connection publishes, and the copies in them. */
  publishSets: number;
  publishedInstances: number;
  /** Fuzzy-watch patterns held (Nacos 3.x). */
  fuzzyPatterns: number;
}

/** The server advertises persistent instances over gRPC (Nacos 2.3+). */
const PERSISTENT_ABILITY = 'supportPersistentInstanceByGrpc';

/**
 * Nacos naming over one gRPC connection: watches by subscription (pushes carry the instance
 * list), reads from the subscription where there is one, ephemeral copies as one publish set per
 * service (`BatchInstanceRequest`), persistent ones by `PersistentInstanceRequest`, service lists
 * by `ServiceListRequest`. After every reconnect it subscribes and publishes everything again.
 */
export class NacosGrpcNaming {
  readonly connection: GrpcConnection;
  private readonly subscriptions: GrpcSubscriptions;
  private readonly sets: PublishSets;
  private readonly fuzzy: FuzzyWatches;
  private readonly log: Logger;
  private closed = false;

  constructor(private readonly opts: GrpcNamingOptions) {
    this.log = opts.log;
    const tokens = opts.tokens;
    this.connection = new GrpcConnection({
      clusterId: opts.clusterId,
      endpoints: opts.endpoints,
      log: opts.log,
      clientIp: opts.clientIp,
      requestTimeoutMs: opts.requestTimeoutMs,
      maxConcurrency: opts.maxConcurrency,
      authHeaders: tokens ? async () => ({ accessToken: await tokens.token('v3') }) : undefined,
      authRefused: tokens ? (headers) => headers.accessToken !== undefined && tokens.invalidate(headers.accessToken) : undefined,
      onPush: (info) => this.subscriptions.pushed(readServiceInfo(info)),
      onFuzzyWatch: (type, body) => this.fuzzy.handle(type, body),
      onConnected: (generation) => this.replay(generation),
      timings: opts.timings,
      onRequestError: opts.onRequestError,
    });
    this.subscriptions = new GrpcSubscriptions({
      log: opts.log,
      subscribe: (ref, subscribe) => this.subscribe(ref, subscribe),
      connection: () => ({ generation: this.connection.currentGeneration, ready: this.connection.isReady }),
    });
    const connection = this.connection;
    this.fuzzy = new FuzzyWatches({
      log: opts.log,
      resyncMs: opts.fuzzyResyncMs,
      connection: {
        request: (type, body) => connection.request(type, body, { auth: true }),
        ready: () => connection.ready(),
        get isReady() {
          return connection.isReady;
        },
        get currentGeneration() {
          return connection.currentGeneration;
        },
        get ability() {
          return connection.ability;
        },
      },
    });
    this.sets = new PublishSets({
      log: opts.log,
      send: (ref, _instances, json) => this.sendBatch(ref, json),
      clear: async (ref, last) => {
        await this.connection.request(REQUEST.instance, namingRequest(ref, { type: 'deregisterInstance', instance: last }), { auth: true });
      },
    });
  }

  /** Connects (if not yet) and resolves once the connection is up. */
  ready(): Promise<void> {
    return this.connection.ready();
  }

  /** The instances of a service: from its subscription when watched, else a `ServiceQueryRequest`. */
  async listInstances(ref: ServiceRef): Promise<Instance[]> {
    const cached = await this.subscriptions.read(ref);
    if (cached) return cached;
    const body = await this.connection.request(REQUEST.serviceQuery, namingRequest(ref, { cluster: '', healthyOnly: false, udpPort: 0 }), { auth: true });
    return this.serviceInfoOf(body.serviceInfo, REQUEST.serviceQuery).instances;
  }

  /** The digest of a watched service's pushed list, while the connection that confirmed it is up. */
  cachedDigest(ref: ServiceRef): string | undefined {
    return this.subscriptions.digest(ref);
  }

  watch(ref: ServiceRef, onChange: (event?: WatchEvent) => void): Unsubscribe {
    return this.subscriptions.watch(ref, onChange);
  }

  /** Names of every service of exactly this group (all pages of `ServiceListRequest`). */
  async listServiceNames(namespaceId: string, group: string, pageSize: number): Promise<string[]> {
    const names: string[] = [];
    for (let pageNo = 1; ; pageNo += 1) {
      const body = await this.connection.request(REQUEST.serviceList, { headers: {}, namespace: namespaceId, serviceName: '', groupName: group, pageNo, pageSize, module: 'naming' }, { auth: true });
      const page = body.serviceNames;
      const count = Number(body.count);
      if (!Array.isArray(page) || !page.every((n) => typeof n === 'string') || !Number.isFinite(count)) {
        throw this.badAnswer(REQUEST.serviceList, 'ServiceListResponse without serviceNames and count');
      }
      names.push(...(page as string[]));
      if (page.length < pageSize || names.length >= count) return names;
    }
  }

  /** Replaces `owner`'s share of the service's publish set (ephemeral copies only); `resend` sends it even if unchanged. */
  publish(ref: ServiceRef, owner: string, instances: readonly Instance[], resend = false): Promise<void> {
    return this.sets.set(ref, owner, instances, resend);
  }

  /**
   * The connection's fuzzy watches once connected, when the server advertises `fuzzyWatch` (Nacos
   * 3.x); undefined when it does not. Rejects while no connection can be made.
   */
  async fuzzyWatches(): Promise<FuzzyWatches | undefined> {
    await this.connection.ready();
    return this.connection.ability[FUZZY_WATCH_ABILITY] === true ? this.fuzzy : undefined;
  }

  /** Whether persistent instances can go over gRPC (else the adapter writes them over HTTP). */
  async persistentByGrpc(): Promise<boolean> {
    await this.connection.ready();
    return this.connection.ability[PERSISTENT_ABILITY] === true;
  }

  /** Registers or removes a persistent instance (`PersistentInstanceRequest`, Nacos 2.3+). */
  async persistent(ref: ServiceRef, op: 'register' | 'deregister', instance: Instance): Promise<void> {
    const type = op === 'register' ? 'registerInstance' : 'deregisterInstance';
    await this.connection.request(REQUEST.persistentInstance, namingRequest(ref, { type, instance: wireInstance(ref, instance) }), { auth: true });
  }

  stats(): GrpcNamingStats {
    const sets = this.sets.stats();
    return { ...this.connection.stats(), subscriptions: this.subscriptions.size, publishSets: sets.sets, publishedInstances: sets.instances, fuzzyPatterns: this.fuzzy.size };
  }

  close(): void {
    this.closed = true;
    this.subscriptions.close();
    this.fuzzy.close();
    this.connection.close();
  }

  private async subscribe(ref: ServiceRef, subscribe: boolean): Promise<ServiceInfoRead | undefined> {
    // Bounded with every other request by the connection's maxConcurrency: a `*` task's thousands of
    // subscribes (and their replay after a reconnect) queue rather than outwait their deadlines.
    const body = await this.connection.request(REQUEST.subscribeService, namingRequest(ref, { subscribe, clusters: '' }), { auth: true });
    return subscribe ? this.serviceInfoOf(body.serviceInfo, REQUEST.subscribeService) : undefined;
  }

  /** A `BatchInstanceRequest` whose instances come serialized already (`instancesJson`: a JSON array). */
  private async sendBatch(ref: ServiceRef, instancesJson: string): Promise<void> {
    const head = JSON.stringify(namingRequest(ref, { type: 'batchRegisterInstance' }));
    await this.connection.request(REQUEST.batchInstance, new EncodedBody(`${head.slice(0, -1)},"instances":${instancesJson}}`), { auth: true });
  }

  private replay(generation: number): void {
    if (generation === 1) return;
    this.fuzzy.connected(generation);
    this.log.info({ generation, subscriptions: this.subscriptions.size, publishSets: this.sets.stats().sets }, 'nacos gRPC reconnected; subscribing and publishing again');
    this.subscriptions.resubscribeAll();
    void this.sets.republishAll().then((failed) => this.redo(generation, failed));
  }

  /** Sends again, every 3 s as Nacos' clients redo, what the replay after connect `generation` could not. */
  private redo(generation: number, failed: number): void {
    if (failed === 0 || this.closed || this.connection.currentGeneration !== generation) return;
    this.log.warn({ failed }, 'nacos gRPC publish sets not accepted after reconnect; sending again in 3 s');
    const timer = setTimeout(() => void this.sets.retryUnsent().then((left) => this.redo(generation, left)), 3_000);
    timer.unref();
  }

  private serviceInfoOf(info: unknown, type: string): ServiceInfoRead {
    try {
      return readServiceInfo(info);
    } catch (err) {
      if (err instanceof WireFormatError) throw this.badAnswer(type, err.message);
      throw err;
    }
  }

  private badAnswer(type: string, detail: string): NacosRequestError {
    return new NacosRequestError({ code: 'nacos-bad-response', clusterId: this.opts.clusterId, method: 'gRPC', path: type, endpoint: this.connection.stats().endpoint ?? '?', detail });
  }
}
