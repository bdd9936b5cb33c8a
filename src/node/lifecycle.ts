import type { Logger } from 'pino';
import { within } from '../util/within.js';

/** One started part of a process: what undoes it, and how long undoing it may take. */
interface Started {
  name: string;
  stop: () => unknown;
  ms: number;
}

/**
 * The parts of a process in the order they started, stopped in reverse: each `step` starts one
 * part and records what undoes it. A step that fails undoes every part started before it (so a
 * failed start leaves nothing behind) and rejects. Every stop is bounded: a part stuck (a
 * connection reconnecting after an outage, say) is logged and left behind, and the rest still stops.
 */
export class Lifecycle {
  private readonly started: Started[] = [];
  private stopping: Promise<void> | undefined;

  constructor(private readonly log: Logger) {}

  /**
   * Starts a part: runs `start`, then records `stop` (given what `start` answered) to be run within
   * `ms` at {@link stop}. When `start` throws, everything started so far is stopped first.
   */
  async step<T>(name: string, start: () => T | Promise<T>, stop: (started: T) => unknown, ms = 5_000): Promise<T> {
    let value: T;
    try {
      value = await start();
    } catch (err) {
      await this.stop();
      throw err;
    }
    this.started.push({ name, stop: () => stop(value), ms });
    return value;
  }

  /** Records what undoes a part that needs no start of its own (built, not yet running). */
  defer(name: string, stop: () => unknown, ms = 5_000): void {
    this.started.push({ name, stop, ms });
  }

  /** Stops every started part in reverse order, each within its bound; a second call waits for the first. */
  stop(): Promise<void> {
    this.stopping ??= (async () => {
      for (const part of this.started.splice(0).reverse()) {
        const work = Promise.resolve()
          .then(part.stop)
          .catch((err: unknown) => this.log.warn({ err, step: part.name }, 'shutdown step failed; going on'));
        if (!(await within(work, part.ms))) this.log.warn({ step: part.name, ms: part.ms }, 'shutdown step did not finish in time; going on');
      }
    })();
    return this.stopping;
  }
}
