import type { ConsulAnswer, ConsulHttp } from './consul-http.js';
import { ConsulRequestError } from './consul-request-error.js';

/** How a blocking loop paces itself. */
export interface BlockingPace {
  /** `wait` of each query. */
  waitMs: number;
  /** Least time between queries once the burst is spent. */
  minIntervalMs: number;
  /** Longest pause after failures (doubling from 100 ms). */
  backoffMaxMs: number;
  /** Added to `wait` for the request's own timeout (Consul adds up to wait/16 of jitter). */
  requestTimeoutMs: number;
  /** Period of a loop without a slot: it reads without blocking. */
  pollIntervalMs: number;
}

/**
 * The blocking queries an adapter may hold open at once: each holds a connection, and Consul
 * refuses a client more than `limits.http_max_conns_per_client` (200). A loop that gets no slot
 * polls, and asks again for a slot at every round.
 */
export class BlockingSlots {
  constructor(private free: number) {}

  tryTake(): boolean {
    if (this.free <= 0) return false;
    this.free -= 1;
    return true;
  }

  give(): void {
    this.free += 1;
  }
}

/** Queries a loop may send at once before the pace applies. */
const BURST = 2;
const FIRST_BACKOFF_MS = 100;

/**
 * One blocking query, asked again and again (Consul's `features/blocking`): `?index=<last
 * X-Consul-Index>&wait=<waitMs>` hangs until the data moves. The rules:
 * - an index lower than the last one (a snapshot restore, a new cluster) resets it to 0, so the
 *   next query answers at once and the loop starts over;
 * - an index of 0 is never waited on (it would not block): 1 is;
 * - a token bucket (burst {@link BURST}, then one query per `minIntervalMs`) keeps a service that
 *   changes all the time from costing a query per change;
 * - failures back off from 100 ms, doubling to `backoffMaxMs`; a backoff after no answer at all ends
 *   as soon as the cluster answers again (the adapter probes it every second meanwhile), so the
 *   watches resume within about a second of an outage's end, however long it lasted;
 * - an answer is not proof of change: `onAnswer` gets every answer and compares;
 * - the index moves on only once `onAnswer` returned: when it throws (an answer it cannot use, such
 *   as one emptied by ACLs), the loop backs off as after a failed query and asks again at the old
 *   index, so that the change that answer carried is read as soon as it can be;
 * - without one of the adapter's {@link BlockingSlots}, it reads every `pollIntervalMs` instead;
 * - with `holdMs`, the loop first waits up to that long for {@link seed}: a read of the same data
 *   made elsewhere (the reconcile's) gives the index to block on, and the loop's own first read,
 *   the same request again, is saved; without a seed it reads as usual once the hold is over.
 */
export class BlockingLoop {
  private index = 0;
  private stopped = false;
  private readonly abort = new AbortController();
  private tokens = BURST;
  private lastRefill = Date.now();
  private wake: (() => void) | undefined;
  private slot = false;
  private started = false;

  constructor(
    private readonly http: ConsulHttp,
    private readonly slots: BlockingSlots,
    private readonly path: string,
    private readonly query: () => Record<string, string>,
    private readonly pace: BlockingPace,
    /** Every answer, changed or not; throws when it cannot use the answer (the loop asks again at the old index). */
    private readonly onAnswer: (answer: ConsulAnswer) => void,
    private readonly onError: (err: unknown) => void,
    private readonly holdMs = 0,
  ) {
    void this.run();
  }

  /**
   * Starts the loop from `index`, the `X-Consul-Index` of a read of the same path and query answered
   * just now, instead of reading once more: its first query waits for a change past that read.
   * Answers false (and changes nothing) once the loop has sent its first query.
   */
  seed(index: number): boolean {
    if (this.started || this.stopped || !Number.isInteger(index) || index < 1) return false;
    this.index = index;
    this.started = true;
    this.wake?.();
    return true;
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.abort.abort();
    this.wake?.();
    if (this.slot) this.slots.give();
    this.slot = false;
  }

  private async run(): Promise<void> {
    let backoff = FIRST_BACKOFF_MS;
    let polled = false;
    if (this.holdMs > 0) await this.sleep(this.holdMs);
    this.started = true;
    while (!this.stopped) {
      if (!this.slot) this.slot = this.slots.tryTake();
      if (polled && !this.slot) await this.sleep(this.pace.pollIntervalMs);
      else await this.paced();
      if (this.stopped) return;
      try {
        const waitS = Math.max(1, Math.round(this.pace.waitMs / 1000));
        const blocking = this.slot && this.index > 0;
        polled = !this.slot;
        const answer = await this.http.call({
          method: 'GET',
          path: this.path,
          query: { ...this.query(), ...(blocking ? { index: String(this.index), wait: `${waitS}s` } : {}) },
          timeoutMs: blocking ? Math.ceil(this.pace.waitMs + this.pace.waitMs / 16 + this.pace.requestTimeoutMs) : this.pace.requestTimeoutMs,
          signal: this.abort.signal,
          blocking,
        });
        if (this.stopped) return;
        if (answer.index === undefined) throw new ConsulRequestError('consul-bad-answer', '', `GET ${this.path}`, 'no X-Consul-Index on a blocking read');
        // 0 would never block: wait on 1 (an answer of 0 after 1 is not going backwards).
        // Backwards: start over from 0 (answered at once).
        const next = answer.index === 0 ? 1 : answer.index < this.index ? 0 : answer.index;
        // Moved on only once the answer was handled: one that could not be (emptied by ACLs) is
        // asked for again at the old index, which Consul answers at once, so that the change it
        // carried arrives as soon as it can be read.
        this.onAnswer(answer);
        this.index = next;
        backoff = FIRST_BACKOFF_MS;
      } catch (err) {
        if (this.stopped) return;
        this.onError(err);
        // No answer from the cluster: the first answer again ends the backoff (see ConsulHttp.whenReached).
        const unreached = err instanceof ConsulRequestError && (err.code === 'consul-unreachable' || err.code === 'consul-timeout');
        await this.sleep(backoff, unreached);
        backoff = Math.min(backoff * 2, this.pace.backoffMaxMs);
      }
    }
  }

  /** Waits for a token of the bucket. */
  private async paced(): Promise<void> {
    const now = Date.now();
    if (this.pace.minIntervalMs <= 0) return;
    this.tokens = Math.min(BURST, this.tokens + (now - this.lastRefill) / this.pace.minIntervalMs);
    this.lastRefill = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return;
    }
    await this.sleep((1 - this.tokens) * this.pace.minIntervalMs);
    this.tokens = 0;
    this.lastRefill = Date.now();
  }

  /** Sleeps `ms`, or less when woken (stopped, seeded, or with `untilReached`, the cluster answering again). */
  private sleep(ms: number, untilReached = false): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      const cancel = untilReached ? this.http.whenReached(done) : undefined;
      function done(): void {
        clearTimeout(timer);
        cancel?.();
        resolve();
      }
      this.wake = done;
    });
  }
}
