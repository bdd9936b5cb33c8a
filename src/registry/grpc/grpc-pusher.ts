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
  /** Pushes started (first attempts). */
  sent: number;
  /** Pushes answered with success (once per push, whichever attempt was answered). */
  acked: number;
  /** Attempts after the first. */
  retried: number;
  /** Pushes given up (unanswered, refused, or their connection gone). */
  failed: number;
  /** Pushes still unanswered `ackTimeoutMs` after their first attempt (answered later, sent again or given up). */
  late: number;
}

interface GrpcSubscriber {
  connection: GrpcConnection;
  ref: GrpcServiceRef;
  /** The `clusters` string of the subscribe, echoed in every push. */
  clusters: string;
}

/**
 * One push to one subscriber, until it is answered, given up, or replaced by a newer push of the
 * same service to the same connection (which carries the newer list).
 */
interface Delivery {
  key: string;
  subscriber: GrpcSubscriber;
  /** Order of the push among every push this pusher wrote. */
  seq: number;
  attempts: number;
  /** When the push is given up if still unanswered (ms); the same budget as `maxAttempts` plain retries. */
  deadline: number;
  /** Its first `ackTimeoutMs` passed unanswered. */
  late: boolean;
  timer: NodeJS.Timeout | undefined;
  /** Nothing more is sent (answered, given up, replaced, or the subscription gone). */
  done: boolean;
  /** Counted as acked or failed (once, whatever the attempts). */
  settled: boolean;
  /** Attempts written whose answer (or deadline) has not come yet. */
  inFlight: number;
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
  /** Connection id -> service key -> the push awaiting its answer there. */
  private readonly deliveries = new Map<string, Map<string, Delivery>>();
  /** Connection id -> `seq` of the latest push it answered with success. */
  private readonly answeredUpTo = new Map<string, number>();
  private seq = 0;
  private readonly counters: GrpcPushStats = { sent: 0, acked: 0, retried: 0, failed: 0, late: 0 };
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
    for (const pending of this.deliveries.values()) for (const d of pending.values()) this.finish(d);
    this.deliveries.clear();
    this.answeredUpTo.clear();
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
    for (const d of [...(this.deliveries.get(connection.id)?.values() ?? [])]) this.finish(d);
    this.answeredUpTo.delete(connection.id);
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
    const d = this.deliveries.get(connectionId)?.get(key);
    if (d) this.finish(d);
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
      this.push(key, subscriber);
    }
  }

  /** Starts a push of the service's current state to one subscriber; it replaces the one still awaiting its answer there. */
  private push(key: string, subscriber: GrpcSubscriber): void {
    if (this.closed) return;
    const connectionId = subscriber.connection.id;
    let pending = this.deliveries.get(connectionId);
    if (!pending) {
      pending = new Map();
      this.deliveries.set(connectionId, pending);
    }
    const previous = pending.get(key);
    if (previous) this.finish(previous);
    const { ackTimeoutMs, retryDelayMs, maxAttempts } = this.options;
    const deadline = Date.now() + maxAttempts * ackTimeoutMs + (maxAttempts - 1) * retryDelayMs;
    const d: Delivery = { key, subscriber, seq: (this.seq += 1), attempts: 0, deadline, late: false, timer: undefined, done: false, settled: false, inFlight: 0 };
    pending.set(key, d);
    this.send(d);
  }

  /**
   * Writes one attempt of a push. Its answer is awaited until the push's deadline, so that an answer
   * arriving late still settles it (a replaced push too); `ackTimeoutMs` later {@link overdue}
   * decides whether to send again.
   */
  private send(d: Delivery): void {
    const { connection, ref, clusters } = d.subscriber;
    if (d.done || this.closed || this.subscribers.get(d.key)?.get(connection.id) !== d.subscriber) {
      this.finish(d);
      if (d.inFlight === 0) this.settle(d, false);
      return;
    }
    const serviceInfo = this.serviceInfo(ref, clusters, connection.setup.clientIp, false);
    d.attempts += 1;
    d.inFlight += 1;
    if (d.attempts === 1) this.counters.sent += 1;
    else this.counters.retried += 1;
    this.log.debug({ connectionId: connection.id, service: groupedName(ref.groupName, ref.name), attempt: d.attempts }, 'grpc push');
    this.arm(d, () => this.overdue(d), this.options.ackTimeoutMs);
    const waitMs = Math.max(1, d.deadline - Date.now());
    connection.request(SERVER_REQUEST.notifySubscriber, { serviceInfo, module: 'naming' }, waitMs).then(
      (answer) => {
        d.inFlight -= 1;
        if (isOk(answer.body)) {
          const id = connection.id;
          this.answeredUpTo.set(id, Math.max(this.answeredUpTo.get(id) ?? 0, d.seq));
          this.finish(d);
          this.settle(d, true);
        } else if (!d.done) this.again(d, 'push answered without success');
        else if (d.inFlight === 0) this.settle(d, false);
      },
      (err: unknown) => {
        d.inFlight -= 1;
        if (err instanceof ServerRequestError && err.code === 'closed') {
          this.finish(d);
          this.settle(d, false);
          this.onDeadConnection(connection);
          return;
        }
        // The deadline passed: the last attempt still waiting gives the push up.
        if (d.inFlight > 0) return;
        this.finish(d);
        this.settle(d, false, err instanceof Error ? err.message : String(err));
      },
    );
  }

  /**
   * A push unanswered for `ackTimeoutMs`. The stream is ordered and reliable while the connection
   * lives, so a missing answer means a busy subscriber far more often than a lost push: it is sent
   * again only when the connection shows it is not behind (it answered a later push, or this one is
   * all it has to answer); otherwise it keeps waiting, within the same deadline. Sending again to a
   * subscriber that is behind would only add to what it has to read (a push storm under load).
   */
  private overdue(d: Delivery): void {
    if (d.done) return;
    if (!d.late) this.counters.late += 1;
    d.late = true;
    if (d.attempts >= this.options.maxAttempts) return;
    const id = d.subscriber.connection.id;
    const answeredLater = (this.answeredUpTo.get(id) ?? 0) > d.seq;
    const alone = (this.deliveries.get(id)?.size ?? 0) <= 1;
    if (answeredLater || alone) this.again(d, 'push unanswered');
    else this.arm(d, () => this.overdue(d), this.options.ackTimeoutMs);
  }

  private again(d: Delivery, why: string): void {
    if (d.attempts >= this.options.maxAttempts || this.closed || Date.now() + this.options.retryDelayMs >= d.deadline) {
      // Attempts still waiting may yet be answered.
      this.finish(d);
      if (d.inFlight === 0) this.settle(d, false, why);
      return;
    }
    this.arm(d, () => this.send(d), this.options.retryDelayMs);
  }

  private settle(d: Delivery, acked: boolean, why?: string): void {
    if (d.settled) return;
    d.settled = true;
    if (acked) {
      this.counters.acked += 1;
      return;
    }
    this.counters.failed += 1;
    this.log.debug({ connectionId: d.subscriber.connection.id, why, attempts: d.attempts }, 'grpc push given up');
  }

  private arm(d: Delivery, run: () => void, ms: number): void {
    clearTimeout(d.timer);
    d.timer = setTimeout(run, ms);
    d.timer.unref();
  }

  /** The push needs nothing more (answered, given up, replaced, or its subscription gone). */
  private finish(d: Delivery): void {
    d.done = true;
    clearTimeout(d.timer);
    d.timer = undefined;
    const id = d.subscriber.connection.id;
    const pending = this.deliveries.get(id);
    if (pending?.get(d.key) !== d) return;
    pending.delete(d.key);
    if (pending.size === 0) this.deliveries.delete(id);
  }
}

function serviceKey(namespaceId: string, grouped: string): string {
  return `${namespaceId}\n${grouped}`;
}

