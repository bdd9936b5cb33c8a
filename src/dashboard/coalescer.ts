/**
 * Runs `run` at most once at a time: requests while it is pending join it, requests while it runs
 * make one more run afterwards. A burst of events is one refresh, and the last event is never missed.
 */
export class Coalescer {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running = false;
  /** A request came while running: the shortest delay asked for, or undefined. */
  private again: number | undefined;

  constructor(
    private readonly run: () => Promise<void>,
    private readonly delayMs: number,
  ) {}

  request(delayMs = this.delayMs): void {
    if (this.running) {
      this.again = Math.min(this.again ?? delayMs, delayMs);
      return;
    }
    if (this.timer !== undefined) {
      if (delayMs > 0) return;
      clearTimeout(this.timer);
    }
    this.timer = setTimeout(() => void this.fire(), delayMs);
  }

  private async fire(): Promise<void> {
    this.timer = undefined;
    this.running = true;
    try {
      await this.run();
    } finally {
      this.running = false;
      const again = this.again;
      this.again = undefined;
      if (again !== undefined) this.request(again);
    }
  }
}
