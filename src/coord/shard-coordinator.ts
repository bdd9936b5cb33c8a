import { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { setTimeout as delay } from 'node:timers/promises';
import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { ensureDeployment, type DeploymentSettings } from './deployment.js';
import { LeaseManager, type LeaseRecord } from './lease.js';
import { Membership, type MembershipOptions } from './membership.js';
import { replicasFor } from './rendezvous.js';

/** Why a worker stopped leading a shard. */
export type UnleadReason = 'released' | 'lost';

/** One shard as {@link ShardCoordinator.snapshot} sees it. */
export interface ShardSnapshot {
  shard: number;
  /** Current lease owner; undefined while the shard has no leader. */
  leader?: string;
  token?: number;
  ttlLeftMs?: number;
  /** The shard's replicas among the live workers, preferred leader first. */
  replicas: string[];
}

/** Options of {@link ShardCoordinator}. */
export interface ShardCoordinatorOptions {
  /** This worker's membership; its id is the worker id. Joined by start() if not yet. */
  membership: Membership;
  /** Leases owned by the same worker id. */
  leases: LeaseManager;
  deployment: DeploymentSettings;
  /** Re-evaluation period in ms; default 500. Membership changes and lost leases re-evaluate at once too. */
  tickMs?: number;
  /**
   * How long a replica that is not a shard's preferred one leaves a free shard to the preferred one
   * (default {@link PREFERRED_REPLICA_FIRST_MS}); not when the preferred one let its own lease run out.
   */
  preferredFirstMs?: number;
  logger?: Logger;
}

/** A pass looks at a lease this long after Redis said it would run out (its key is gone by then). */
const EXPIRY_SLACK_MS = 20;
/**
 * How long a replica that is not a shard's preferred one leaves a free shard to the preferred one
 * before taking it (the preferred replica takes it in its own pass meanwhile, if it is alive). A
 * shard whose lease the preferred replica itself held and let run out is taken at once: that
 * replica is dead or cut off until its membership record runs out, and the wait would only add to
 * the takeover.
 */
const PREFERRED_REPLICA_FIRST_MS = 150;

/**
 * Decides which shards this worker serves and leads. Every worker computes each shard's replica set
 * from the same live worker list by rendezvous hashing ({@link replicasFor}); at every tick it
 *
 * - acquires the lease of a free shard where it is the preferred (first) replica;
 * - acquires the lease of a free shard where it is another replica, once it has seen the lease free on
 *   two evaluations in a row (the preferred one gets the first chance), or at once when the lease
 *   that ran out was the preferred replica's own: a leader killed with -9 is replaced as its lease
 *   runs out (a pass is due then, see {@link passSoon});
 * - releases a lease where it is no longer a replica (a worker joined), or where a better-ranked live
 *   replica exists (handover to the preferred one). It does not take back a shard it handed over for one
 *   lease TTL, so that a slow preferred replica cannot make the lease flap; and it does not hand a
 *   shard back, for one membership TTL, to a preferred replica that let the shard's lease run out
 *   (a dead worker stays in the member list until its record runs out).
 * - acquires nothing for one lease TTL after its connection came back from an outage (a failover):
 *   the holders whose leases ran out meanwhile take them back as they reconnect, and leadership
 *   goes on where it was.
 *
 * Leading is only as good as {@link LeaseManager.isValid}: ask {@link isLeading} right before every
 * leader-only action (a beat, a retain, taking over a live set), not once for a batch of them; it
 * turns false at the lease's local deadline, before `unlead` is emitted for a lease that ran out.
 *
 * Events: `lead` (shard, token), `unlead` (shard, reason), `replicas` (sorted shards this worker
 * serves, when that set changes).
 */
export class ShardCoordinator extends EventEmitter<{
  lead: [shard: number, token: number];
  unlead: [shard: number, reason: UnleadReason];
  replicas: [shards: number[]];
}> {
  readonly id: string;
  readonly membership: Membership;
  readonly leases: LeaseManager;
  readonly deployment: DeploymentSettings;
  readonly tickMs: number;
  private readonly logger: Logger;
  private served = new Set<number>();
  /** Shards of which this worker is the only live replica. */
  private sole = new Set<number>();
  private readonly led = new Map<number, number>();
  private readonly seenFree = new Set<number>();
  private readonly handedOver = new Map<number, number>();
  /** Each shard's lease holder as last read (kept while the lease is free). */
  private readonly lastHolder = new Map<number, string>();
  /**
   * Shards taken here from a preferred replica that let its lease run out: its id and when. Not
   * handed back to it while its membership record may still be the one it wrote before it died
   * (one membership TTL): a dead leader stays preferred until then, and handing its shards back
   * would leave them leaderless until it dropped out.
   */
  private readonly takenFrom = new Map<number, { preferred: string; at: number }>();
  private readonly preferredFirstMs: number;
  private timer: NodeJS.Timeout | undefined;
  /** The next pass due before the next tick: another's lease of a shard served here runs out sooner. */
  private soon: NodeJS.Timeout | undefined;
  private state: 'new' | 'running' | 'stopped' = 'new';
  private pass: Promise<void> | undefined;
  private passAgain = false;
  private readonly onChange = (): void => void this.evaluate();
  private readonly onLost = (shard: number, token: number): void => {
    if (this.led.get(shard) !== token) return;
    this.led.delete(shard);
    this.emit('unlead', shard, 'lost');
    void this.evaluate();
  };

  constructor(opts: ShardCoordinatorOptions) {
    super();
    if (opts.leases.owner !== opts.membership.id) {
      throw new Error(`lease owner ${opts.leases.owner} is not the membership's worker id ${opts.membership.id}`);
    }
    this.id = opts.membership.id;
    this.membership = opts.membership;
    this.leases = opts.leases;
    this.deployment = opts.deployment;
    this.tickMs = opts.tickMs ?? 500;
    this.preferredFirstMs = opts.preferredFirstMs ?? PREFERRED_REPLICA_FIRST_MS;
    this.logger = (opts.logger ?? silentLogger()).child({ component: 'coordinator', worker: this.id });
  }

  /** Joins the membership if needed, evaluates once and starts ticking. */
  async start(): Promise<void> {
    if (this.state !== 'new') return;
    this.state = 'running';
    this.membership.on('change', this.onChange);
    this.leases.on('lost', this.onLost);
    await this.membership.join();
    this.timer = setInterval(() => void this.evaluate(), this.tickMs);
    this.timer.unref();
    await this.evaluate();
  }

  /**
   * Graceful stop (SIGTERM): releases every lease at once, then leaves the membership, so the others
   * take over without waiting for a TTL. Gives up after one lease TTL (Redis unreachable: by then the
   * leases have run out anyway) and {@link halt}s.
   */
  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    this.shutdown();
    const graceful = (async () => {
      await this.pass;
      await Promise.all(this.leases.heldShards().map((shard) => this.release(shard)));
      await this.membership.leave();
    })();
    const timeout = new AbortController();
    const finished = await Promise.race([
      graceful.then(() => true),
      delay(this.leases.ttlMs, false, { signal: timeout.signal, ref: false }).catch(() => false),
    ]);
    timeout.abort();
    if (!finished) {
      this.logger.warn('graceful stop timed out; leases and membership will run out by their TTL');
      this.halt();
      void graceful.catch(() => undefined);
    }
  }

  /** Stops everything without a word to Redis, as kill -9 would: leases and membership run out by TTL. */
  halt(): void {
    this.shutdown();
    this.membership.halt();
    this.leases.halt();
  }

  /** Shards this worker is a replica of, sorted. */
  servedShards(): number[] {
    return [...this.served].sort((a, b) => a - b);
  }

  /** Shards this worker holds the lease of, sorted. */
  ledShards(): number[] {
    return [...this.led.keys()].sort((a, b) => a - b);
  }

  /** Whether this worker is the only live replica of the shard (every reconcile of it runs here), as last evaluated. */
  soleReplica(shard: number): boolean {
    return this.sole.has(shard);
  }

  /**
   * Whether this worker leads the shard and the lease's local deadline has not passed: no Redis call,
   * cheap enough for every beat.
   */
  isLeading(shard: number): boolean {
    return this.led.has(shard) && this.leases.isValid(shard);
  }

  /**
   * Whether this worker keeps the shard's copies alive: it leads the shard ({@link isLeading}), or
   * its lease's deadline passed within the lease grace while Redis did not answer (see
   * `LeaseManagerOptions.graceMs`). The test before beats and retains; no Redis call.
   */
  keepsAlive(shard: number): boolean {
    return this.led.has(shard) && this.leases.keepsAlive(shard);
  }

  /** Every shard's leader (from Redis, now) and replicas (from the live workers as last seen). */
  async snapshot(): Promise<ShardSnapshot[]> {
    const leases = await this.leases.readAll(this.deployment.shards);
    const ids = this.membership.liveIds();
    return leases.map((lease, shard) => ({
      shard,
      ...(lease && { leader: lease.owner, token: lease.token, ttlLeftMs: lease.ttlLeftMs }),
      replicas: replicasFor(shard, ids, this.deployment.replicas),
    }));
  }

  /** Runs one evaluation now (joining the one under way, and running again after it). */
  evaluate(): Promise<void> {
    if (this.state !== 'running') return this.pass ?? Promise.resolve();
    if (this.pass) {
      this.passAgain = true;
      return this.pass;
    }
    const run = async (): Promise<void> => {
      do {
        this.passAgain = false;
        await this.evaluateOnce();
      } while (this.passAgain && this.state === 'running');
    };
    this.pass = run()
      .catch((error: unknown) => this.logger.warn({ err: error }, 'shard evaluation failed; retrying at the next tick'))
      .finally(() => (this.pass = undefined));
    return this.pass;
  }

  private async evaluateOnce(): Promise<void> {
    // This worker is alive whatever the list says: its record may have run out during an outage and
    // not be written again yet, and it must not hand its shards over for that.
    const live = this.membership.liveIds();
    const ids = live.includes(this.id) ? live : [...live, this.id].sort();
    const leases = await this.leases.readAll(this.deployment.shards);
    if (this.state !== 'running') return;
    const served = new Set<number>();
    const sole = new Set<number>();
    const work: Array<Promise<number | undefined>> = [];
    const now = performance.now();
    for (let shard = 0; shard < this.deployment.shards; shard += 1) {
      const replicas = replicasFor(shard, ids, this.deployment.replicas);
      const rank = replicas.indexOf(this.id);
      if (rank >= 0) served.add(shard);
      if (rank === 0 && replicas.length === 1) sole.add(shard);
      work.push(this.decide(shard, rank, replicas[0], leases[shard], now));
    }
    this.sole = sole;
    this.passSoon(await Promise.all(work));
    if (served.size !== this.served.size || [...served].some((s) => !this.served.has(s))) {
      this.served = served;
      this.emit('replicas', this.servedShards());
    }
  }

  /**
   * One shard's part of a pass: keeps, releases or takes its lease. Answers in how many ms a pass
   * should look at the shard again when that is sooner than the next tick might be: another's lease
   * of a shard served here runs out then (a dead leader's shard is taken as its lease expires, not
   * up to a tick later), or a free shard this replica leaves to the preferred one for a moment.
   */
  private async decide(shard: number, rank: number, preferred: string | undefined, lease: LeaseRecord | undefined, now: number): Promise<number | undefined> {
    if (lease) this.lastHolder.set(shard, lease.owner);
    const token = this.leases.token(shard);
    if (token !== undefined) {
      this.seenFree.delete(shard);
      // Acquisitions only happen in these passes, so a record that is not ours means the lease is gone
      // (expired or lost with Redis data): a renew confirms it and emits `lost` without waiting for the timer.
      if (lease?.token !== token || lease.owner !== this.id) await this.leases.renew(shard);
      const taken = this.takenFrom.get(shard);
      if (taken && (rank <= 0 || taken.preferred !== preferred || now - taken.at >= this.membership.ttlMs)) this.takenFrom.delete(shard);
      if (rank < 0) await this.release(shard);
      else if (rank > 0 && !this.takenFrom.has(shard)) {
        this.handedOver.set(shard, now);
        await this.release(shard);
      }
      return undefined;
    }
    if (lease || rank < 0 || this.leases.justReconnected()) {
      this.seenFree.delete(shard);
      // A record without a TTL (never written so) is looked at again no faster than a free shard.
      return lease && rank >= 0 ? Math.max(lease.ttlLeftMs, PREFERRED_REPLICA_FIRST_MS) : undefined;
    }
    const handedOverAt = this.handedOver.get(shard);
    if (handedOverAt !== undefined && now - handedOverAt >= this.leases.ttlMs) this.handedOver.delete(shard);
    // The preferred replica held this lease and let it run out: nobody to leave the shard to.
    const lapsed = preferred !== undefined && this.lastHolder.get(shard) === preferred;
    if (rank > 0 && !lapsed && (!this.seenFree.has(shard) || this.handedOver.has(shard))) {
      this.seenFree.add(shard);
      return this.handedOver.has(shard) ? undefined : this.preferredFirstMs;
    }
    this.seenFree.delete(shard);
    const acquired = await this.leases.acquire(shard);
    if (acquired === undefined || this.led.has(shard)) return undefined;
    if (this.state !== 'running') {
      await this.leases.release(shard);
      return undefined;
    }
    this.led.set(shard, acquired);
    if (rank > 0 && lapsed && preferred !== undefined) this.takenFrom.set(shard, { preferred, at: now });
    else this.takenFrom.delete(shard);
    this.emit('lead', shard, acquired);
    return undefined;
  }

  /** Runs a pass after the soonest of `dueInMs` (ms from now) when the next tick may come later. */
  private passSoon(dueInMs: ReadonlyArray<number | undefined>): void {
    let soonest: number | undefined;
    for (const ms of dueInMs) if (ms !== undefined && (soonest === undefined || ms < soonest)) soonest = ms;
    clearTimeout(this.soon);
    this.soon = undefined;
    if (soonest === undefined || soonest >= this.tickMs || this.state !== 'running') return;
    this.soon = setTimeout(() => {
      this.soon = undefined;
      void this.evaluate();
    }, soonest + EXPIRY_SLACK_MS);
    this.soon.unref();
  }

  private async release(shard: number): Promise<void> {
    const token = this.led.get(shard);
    this.led.delete(shard);
    this.takenFrom.delete(shard);
    // Stop acting as the leader before the lease is free for the next one.
    if (token !== undefined) this.emit('unlead', shard, 'released');
    await this.leases.release(shard);
  }

  private shutdown(): void {
    this.state = 'stopped';
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    clearTimeout(this.soon);
    this.soon = undefined;
    this.membership.off('change', this.onChange);
  }
}

/** Options of {@link createShardCoordinator}. */
export interface CreateShardCoordinatorOptions extends Omit<MembershipOptions, 'ttlMs' | 'logger'> {
  /** Explicit deployment settings; undefined takes the stored ones (see {@link ensureDeployment}). */
  shards?: number;
  replicas?: number;
  membershipTtlMs?: number;
  leaseTtlMs?: number;
  /** See `LeaseManagerOptions.graceMs`; default 0. */
  leaseGraceMs?: number;
  tickMs?: number;
  /** See {@link ShardCoordinatorOptions.preferredFirstMs}. */
  preferredFirstMs?: number;
  logger?: Logger;
}

/**
 * Ensures the deployment and wires a coordinator to a new membership and lease manager, all owned by
 * it. Not started: attach the listeners, then call {@link ShardCoordinator.start}.
 */
export async function createShardCoordinator(opts: CreateShardCoordinatorOptions): Promise<ShardCoordinator> {
  const { shards, replicas, membershipTtlMs, leaseTtlMs, leaseGraceMs, tickMs, preferredFirstMs, logger, ...member } = opts;
  const deployment = await ensureDeployment(opts.redis, opts.prefix, { shards, replicas });
  const membership = new Membership({ ...member, ttlMs: membershipTtlMs, logger });
  const leases = new LeaseManager({ redis: opts.redis, prefix: opts.prefix, owner: membership.id, ttlMs: leaseTtlMs, graceMs: leaseGraceMs, logger });
  return new ShardCoordinator({ membership, leases, deployment, tickMs, preferredFirstMs, logger });
}
