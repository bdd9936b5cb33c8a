import type { Logger } from 'pino';
import type { ReconcileReason } from '../model/reconcile-reason.js';
import type { FailedSyncs } from './failed-syncs.js';
import type { EngineObserver } from './observer.js';
import type { ReconcileSink } from './sync-engine.js';

export interface ClusterRecoveryOptions {
  failed: FailedSyncs;
  /** Where the service syncs to run again go (the shard queues, with their de-duplication). */
  queue: ReconcileSink;
  logger: Logger;
  /**
   * How often this process looks for clusters with failed service syncs, and how often one of
   * the processes probes each such cluster with one of them (default 2000 ms).
   */
  probeIntervalMs?: number | undefined;
}

/**
 * Runs again, once a cluster answers again, the service syncs whose reconcile could not reach it
 * (source or destination), rather than leaving them to the next full sync once the queue's retries
 * are spent. Every process reconciling may notice the recovery, whichever failed the syncs:
 *
 * - a reconcile that cannot reach a cluster records its service sync in Redis ({@link FailedSyncs});
 *   one that was not itself a recovery also marks the cluster down;
 * - while a cluster is down, every worker looks every `probeIntervalMs`, and one of them (by a lock
 *   of one period) probes it: it queues one of the failed service syncs (`probe`, tried once); so a
 *   cluster nothing else uses is still noticed when it comes back;
 * - the first reconcile (any, the probe's or another's) or heartbeat that reaches a cluster marked
 *   down, in a process that knows it down, takes every failed service sync of it at once and
 *   queues each once (`recovery`, before full syncs; one still queued or retrying is merged by the
 *   queue's de-duplication).
 *
 * No loop: a recovery or probe that fails again is recorded but does not mark the cluster down, so a service
 * sync that fails whatever happens (a write its destination refuses) is run again once per failure
 * of a reconcile of its own, not at every success of another one.
 *
 * Deliberately left out: a probe of its own (a `ping` in the adapter contract): the reconcile of a
 * failed service sync is the probe, and it reads both sides as the run again will.
 */
export class ClusterRecovery {
  private readonly log: Logger;
  private readonly periodMs: number;
  /** Clusters this process knows to be marked down (from its own failures and the probe rounds). */
  private readonly down = new Set<string>();
  /** Why each reconcile running here was asked for, by service sync key (one runs at a time per key). */
  private readonly running = new Map<string, ReconcileReason>();
  private timer: NodeJS.Timeout | undefined;
  private round: Promise<void> | undefined;

  constructor(private readonly opts: ClusterRecoveryOptions) {
    this.log = opts.logger.child({ component: 'recovery' });
    this.periodMs = opts.probeIntervalMs ?? 2_000;
  }

  /** The observer that follows reconciles and heartbeats reaching clusters or not. */
  get observer(): EngineObserver {
    return {
      clusterReached: (clusterId, reached, detail) => {
        if (reached) this.reached(clusterId, detail.key);
        else if (detail.key !== undefined) this.failed(clusterId, detail.key);
      },
      // A beat that was answered reached the cluster, whatever it said of the instance.
      beat: (clusterId, result) => {
        if (result !== 'failed') this.reached(clusterId, undefined);
      },
    };
  }

  /** Runs one reconcile asked for with `reason`, so that its failures are told apart (a recovery or probe marks nothing down). */
  async run<T>(key: string, reason: ReconcileReason, reconcile: () => Promise<T>): Promise<T> {
    this.running.set(key, reason);
    try {
      return await reconcile();
    } finally {
      if (this.running.get(key) === reason) this.running.delete(key);
    }
  }

  /** A recovery or probe found the service sync's task not running: nothing to run again. */
  forget(key: string): void {
    void this.opts.failed.forget(key).catch((err: unknown) => this.log.debug({ err, key }, 'cannot forget a failed service sync'));
  }

  /** Looks for clusters marked down every period from now on (the worker role). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.round ??= this.probeRound().finally(() => (this.round = undefined));
    }, this.periodMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.round;
  }

  /** One look at the clusters with failed service syncs: learns which are down, probes those it holds the lock of. */
  async probeRound(): Promise<void> {
    try {
      const clusters = await this.opts.failed.clusters();
      for (const cluster of clusters) {
        // The lock lapses a little before the next round, so that the probes keep one period apart.
        const { down, probe } = await this.opts.failed.probe(cluster, this.periodMs * 0.9);
        if (down) this.down.add(cluster);
        else this.down.delete(cluster);
        if (probe !== undefined) await this.opts.queue.enqueue(probe, 'probe');
      }
    } catch (err) {
      this.log.debug({ err }, 'cannot look for clusters with failed service syncs; trying again');
    }
  }

  private failed(cluster: string, key: string): void {
    // A recovery or probe that fails again waits for the next recovery; only another failure marks the cluster down.
    const reason = this.running.get(key);
    const down = reason !== 'recovery' && reason !== 'probe';
    if (down) this.down.add(cluster);
    void this.opts.failed.note(cluster, key, down).catch((err: unknown) => this.log.warn({ err, cluster, key }, 'cannot record a failed service sync; the next full sync runs it'));
  }

  private reached(cluster: string, key: string | undefined): void {
    if (!this.down.has(cluster)) return;
    this.down.delete(cluster);
    void this.drain(cluster, key);
  }

  private async drain(cluster: string, reachedBy: string | undefined): Promise<void> {
    try {
      // The service sync whose reconcile reached the cluster just ran: not again.
      const keys = (await this.opts.failed.drain(cluster)).filter((key) => key !== reachedBy);
      if (keys.length === 0) return;
      this.log.info({ cluster, serviceSyncs: keys.length }, 'cluster reached again; running its failed service syncs again');
      const { queue } = this.opts;
      if (queue.enqueueMany) await queue.enqueueMany(keys, 'recovery');
      else await Promise.all(keys.map((key) => queue.enqueue(key, 'recovery')));
    } catch (err) {
      // Marked down here again: the next reconcile that reaches it, or the next probe, drains it.
      this.down.add(cluster);
      this.log.warn({ err, cluster }, 'cannot run the failed service syncs of a cluster reached again; trying at the next reach');
    }
  }
}
