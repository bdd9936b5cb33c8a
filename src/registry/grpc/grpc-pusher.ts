import type { Logger } from 'pino';
import { isOk, SERVER_REQUEST } from '../../../adapters/nacos/grpc/messages.js';
import type { LabelSource } from '../label-selector.js';
import { groupedName, type NamingStore, type ServiceChange } from '../naming-store.js';
import { serviceInfoView, type HostTimings } from '../service-view.js';
import type { GrpcConnection } from './connection.js';
import type { GrpcServiceRef } from './naming-input.js';
import { ServerRequestError } from './server-request-error.js';

/** Push timings (Nacos `PushConstants`: merged over 500 ms, 5 s for the ack, retried after 1 s). */
export interface GrpcPushOptions {
  /** Changes of a service within this window are pushed once. */
  mergeWindowMs: number;
  ackTimeoutMs: number;
  retryDelayMs: number;
  /** Attempts per push, the first included; then the push is given up (the next change pushes again). */
  maxAttempts: number;
}

export const DEFAULT_GRPC_PUSH: GrpcPushOptions = { mergeWindowMs: 500, ackTimeoutMs: 5_000, retryDelayMs: 1_000, maxAttempts: 3 };

/** Push counters, for tests and metrics. */
export interface GrpcPushStats {
  sent: number;
  acked: number;
  retried: number;
  failed: number;
}

interface GrpcSubscriber {
  connection: GrpcConnection;
  ref: GrpcServiceRef;
  /** The `clusters` string of the subscribe, echoed in every push. */
  clusters: string;
}

interface ScheduledPush {
  timer: NodeJS.Timeout;
  /** Connection ids to push to; undefined = every subscriber of the service. */
  targets: Set<string> | undefined;
}

/**
 * Subscriptions of gRPC connections and the `NotifySubscriberRequest`s that follow every change of a
 * subscribed service: merged per service within a window, each subscriber getting the hosts its own
 * subscribe would show (its `clusters`, disabled hosts left out, the service's label selector evaluated
 * for the connection's clientIp), answered with an ack or retried. A push that cannot be written
 * reports the connection dead.
 */
export class GrpcPusher {
  private readonly subscribers = new Map<string, Map<string, GrpcSubscriber>>();
  private readonly byConnection = new Map<string, Set<string>>();
  private readonly scheduled = new Map<string, ScheduledPush>();
  private readonly retries = new Set<NodeJS.Timeout>();
  private readonly counters: GrpcPushStats = { sent: 0, acked: 0, retried: 0, failed: 0 };
  private readonly onChange = (change: ServiceChange) => this.schedule(serviceKey(change.namespaceId, change.groupedName), undefined);
  private closed = false;

  constructor(
    private readonly store: NamingStore,
    private readonly timings: HostTimings & { cacheMillis: number },
    private readonly labels: LabelSource | undefined,
    private readonly options: GrpcPushOptions,
    private readonly log: Logger,
    private readonly onDeadConnection: (connection: GrpcConnection) => void,
  ) {}

  start(): void {
    this.store.on('change', this.onChange);
  }

  close(): void {
    this.closed = true;
    this.store.off('change', this.onChange);
    for (const s of this.scheduled.values()) clearTimeout(s.timer);
    this.scheduled.clear();
    for (const t of this.retries) clearTimeout(t);
    this.retries.clear();
  }

  /** Subscribes a connection (one subscription per service; a repeat replaces `clusters`). The first one schedules a push to it. */
  subscribe(connection: GrpcConnection, ref: GrpcServiceRef, clusters: string): void {
    const key = serviceKey(ref.namespaceId, groupedName(ref.groupName, ref.name));
    let subs = this.subscribers.get(key);
    if (!subs) {
      subs = new Map();
      this.subscribers.set(key, subs);
    }
    const first = !subs.has(connection.id);
    subs.set(connection.id, { connection, ref, clusters });
    let keys = this.byConnection.get(connection.id);
    if (!keys) {
      keys = new Set();
      this.byConnection.set(connection.id, keys);
    }
    keys.add(key);
    if (first) this.schedule(key, connection.id);
  }

  unsubscribe(connection: GrpcConnection, ref: GrpcServiceRef): void {
    const key = serviceKey(ref.namespaceId, groupedName(ref.groupName, ref.name));
    this.removeSubscription(connection.id, key);
  }

  /** Drops every subscription of a connection that is gone. */
  dropConnection(connection: GrpcConnection): void {
    for (const key of [...(this.byConnection.get(connection.id) ?? [])]) this.removeSubscription(connection.id, key);
  }

  /** Subscriptions held, over all connections. */
  subscriptionCount(): number {
    let n = 0;
    for (const subs of this.subscribers.values()) n += subs.size;
    return n;
  }

  stats(): GrpcPushStats {
    return { ...this.counters };
  }

  /**
   * The `serviceInfo` a connection with `clientIp` sees: plain `name` with `groupName`, `clusters`
   * echoed, disabled hosts left out, the selector applied, `allIPs` (2.x) and `allIps` (3.x) both.
   */
  serviceInfo(ref: GrpcServiceRef, clusters: string, clientIp: string, healthyOnly: boolean): Record<string, unknown> {
    const service = this.store.getService(ref.namespaceId, ref.groupName, ref.name);
    const view = serviceInfoView(
      service,
      ref,
      { clusters, healthyOnly, enabledOnly: true },
      this.timings,
      { ip: clientIp === '' ? undefined : clientIp, labels: this.labels },
    );
    return { ...view, name: ref.name, allIPs: false, allIps: false };
  }

  private removeSubscription(connectionId: string, key: string): void {
    const subs = this.subscribers.get(key);
    subs?.delete(connectionId);
    if (subs?.size === 0) this.subscribers.delete(key);
    const keys = this.byConnection.get(connectionId);
    keys?.delete(key);
    if (keys?.size === 0) this.byConnection.delete(connectionId);
  }

  private schedule(key: string, target: string | undefined): void {
    if (this.closed) return;
    const pending = this.scheduled.get(key);
    if (pending) {
      if (target === undefined) pending.targets = undefined;
      else pending.targets?.add(target);
      return;
    }
    if (target === undefined && !this.subscribers.has(key)) return;
    const timer = setTimeout(() => {
      const due = this.scheduled.get(key);
      this.scheduled.delete(key);
      this.pushService(key, due?.targets);
    }, this.options.mergeWindowMs);
    timer.unref();
    this.scheduled.set(key, { timer, targets: target === undefined ? undefined : new Set([target]) });
  }

  private pushService(key: string, targets: Set<string> | undefined): void {
    const subs = this.subscribers.get(key);
    if (!subs) return;
    for (const subscriber of subs.values()) {
      if (targets && !targets.has(subscriber.connection.id)) continue;
      this.push(key, subscriber, 1);
    }
  }

  private push(key: string, subscriber: GrpcSubscriber, attempt: number): void {
    const { connection, ref, clusters } = subscriber;
    if (this.closed || this.subscribers.get(key)?.get(connection.id) !== subscriber) return;
    const serviceInfo = this.serviceInfo(ref, clusters, connection.setup.clientIp, false);
    if (attempt === 1) this.counters.sent += 1;
    else this.counters.retried += 1;
    this.log.debug({ connectionId: connection.id, service: groupedName(ref.groupName, ref.name), attempt }, 'grpc push');
    connection.request(SERVER_REQUEST.notifySubscriber, { serviceInfo, module: 'naming' }, this.options.ackTimeoutMs).then(
      (answer) => {
        if (isOk(answer.body)) this.counters.acked += 1;
        else this.retry(key, subscriber, attempt, 'push answered without success');
      },
      (err: unknown) => {
        if (err instanceof ServerRequestError && err.code === 'closed') {
          this.counters.failed += 1;
          this.onDeadConnection(connection);
          return;
        }
        this.retry(key, subscriber, attempt, err instanceof Error ? err.message : String(err));
      },
    );
  }

  private retry(key: string, subscriber: GrpcSubscriber, attempt: number, why: string): void {
    if (attempt >= this.options.maxAttempts || this.closed) {
      this.counters.failed += 1;
      this.log.debug({ connectionId: subscriber.connection.id, why, attempts: attempt }, 'grpc push given up');
      return;
    }
    const timer = setTimeout(() => {
      this.retries.delete(timer);
      this.push(key, subscriber, attempt + 1);
    }, this.options.retryDelayMs);
    timer.unref();
    this.retries.add(timer);
  }
}

function serviceKey(namespaceId: string, grouped: string): string {
  return `${namespaceId}\n${grouped}`;
}

