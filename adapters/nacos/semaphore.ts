/** How urgently a permit is wanted: `high` waiters are served before every `normal` one. */
export type Priority = 'high' | 'normal';

/** Gives a permit back; calling it more than once has no further effect. */
export type Release = () => void;

/**
 * Bounds how many requests one adapter has in flight against its cluster.
 *
 * Why our own: it is a dozen lines, and it needs one thing general-purpose limiters lack here:
 * heartbeats must never queue behind a large `apply` (nacos-sync's worst flapping reports came from
 * beats starving behind sync work), so `high` waiters overtake `normal` ones.
 *
 * Deliberately left out: fairness between callers of the same priority beyond FIFO, timeouts while
 * waiting (the request timeout starts once a permit is held), cancellation.
 */
export class Semaphore {
  private available: number;
  private readonly waiting: Record<Priority, Array<() => void>> = { high: [], normal: [] };

  constructor(readonly permits: number) {
    if (!Number.isInteger(permits) || permits < 1) throw new RangeError(`permits must be a positive integer, got ${permits}`);
    this.available = permits;
  }

  /** Resolves with a release function once a permit is free. */
  acquire(priority: Priority = 'normal'): Promise<Release> {
    if (this.available > 0) {
      this.available -= 1;
      return Promise.resolve(this.releaser());
    }
    return new Promise<Release>((resolve) => {
      this.waiting[priority].push(() => resolve(this.releaser()));
    });
  }

  /**
   * Runs `task` while holding a permit. With a permit free it starts at once, in this turn of the
   * event loop (every request of a busy adapter passes here).
   */
  run<T>(task: () => Promise<T>, priority: Priority = 'normal'): Promise<T> {
    if (this.available > 0) {
      this.available -= 1;
      let running: Promise<T>;
      try {
        running = task();
      } catch (err) {
        this.releaseOne();
        return Promise.reject(err as Error);
      }
      return running.finally(this.releaseOne);
    }
    return this.acquire(priority).then(async (release) => {
      try {
        return await task();
      } finally {
        release();
      }
    });
  }

  /** Permits in use, and callers waiting for one (for metrics and tests). */
  stats(): { inUse: number; waiting: number } {
    return { inUse: this.permits - this.available, waiting: this.waiting.high.length + this.waiting.normal.length };
  }

  private releaser(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.releaseOne();
    };
  }

  /** Hands one permit to the next waiter, or back to the pool. */
  private readonly releaseOne = (): void => {
    const next = this.waiting.high.shift() ?? this.waiting.normal.shift();
    if (next) next();
    else this.available += 1;
  };
}
