/**
 * Runs async sections one at a time per key (different keys run concurrently). The adapter locks a
 * Service around each `apply`, so that two tasks writing the same Service from one process take
 * turns instead of racing each other into write conflicts (other processes are kept apart by
 * resourceVersion preconditions).
 */
export class KeyedLock {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(key: string, section: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(key) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = previous.then(() => mine);
    this.tails.set(key, tail);
    await previous;
    try {
      return await section();
    } finally {
      release();
      if (this.tails.get(key) === tail) this.tails.delete(key);
    }
  }
}
