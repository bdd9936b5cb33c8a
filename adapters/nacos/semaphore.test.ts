import { describe, expect, it } from 'vitest';
import { Semaphore } from './semaphore.js';

describe('Semaphore', () => {
  it('never lets more than its permits run at once', async () => {
    const semaphore = new Semaphore(3);
    let running = 0;
    let most = 0;
    let finished = 0;
    const gates: Array<() => void> = [];
    const tasks = Array.from({ length: 10 }, () =>
      semaphore.run(async () => {
        running += 1;
        most = Math.max(most, running);
        await new Promise<void>((resolve) => gates.push(resolve));
        running -= 1;
        finished += 1;
      }),
    );
    // Open the gates one by one as tasks arrive; at every point at most 3 have started.
    while (finished < 10) {
      await new Promise((resolve) => setImmediate(resolve));
      expect(running).toBeLessThanOrEqual(3);
      gates.shift()?.();
    }
    await Promise.all(tasks);
    expect(most).toBe(3);
    expect(semaphore.stats()).toEqual({ inUse: 0, waiting: 0 });
  });

  it('serves high-priority waiters before normal ones', async () => {
    const semaphore = new Semaphore(1);
    const release = await semaphore.acquire();
    const order: string[] = [];
    const normal = semaphore.acquire('normal').then((r) => {
      order.push('normal');
      r();
    });
    const high = semaphore.acquire('high').then((r) => {
      order.push('high');
      r();
    });
    expect(semaphore.stats()).toEqual({ inUse: 1, waiting: 2 });
    release();
    release(); // a second call changes nothing
    await Promise.all([normal, high]);
    expect(order).toEqual(['high', 'normal']);
    expect(semaphore.stats()).toEqual({ inUse: 0, waiting: 0 });
  });

  it('gives the permit back when a task fails, whether it throws or rejects, with a permit free or after waiting', async () => {
    const semaphore = new Semaphore(1);
    await expect(semaphore.run(() => { throw new Error('sync'); })).rejects.toThrow('sync');
    await expect(semaphore.run(() => Promise.reject(new Error('async')))).rejects.toThrow('async');
    expect(semaphore.stats()).toEqual({ inUse: 0, waiting: 0 });
    const release = await semaphore.acquire();
    const waited = semaphore.run(() => { throw new Error('after waiting'); });
    expect(semaphore.stats()).toEqual({ inUse: 1, waiting: 1 });
    release();
    await expect(waited).rejects.toThrow('after waiting');
    expect(semaphore.stats()).toEqual({ inUse: 0, waiting: 0 });
    await expect(semaphore.run(async () => 'ok')).resolves.toBe('ok');
  });

  it('refuses a non-positive size', () => {
    expect(() => new Semaphore(0)).toThrow(RangeError);
  });
});
