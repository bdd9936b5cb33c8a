import { describe, expect, it } from 'vitest';
import { waitUntil } from './wait-until.js';

describe('waitUntil', () => {
  it('resolves with the first truthy probe result', async () => {
    let calls = 0;
    const value = await waitUntil(() => {
      calls += 1;
      return calls >= 3 ? { calls } : null;
    }, { intervalMs: 1 });
    expect(value).toEqual({ calls: 3 });
  });

  it('treats thrown errors and rejections as "not yet"', async () => {
    let calls = 0;
    const value = await waitUntil(async () => {
      calls += 1;
      if (calls === 1) throw new Error('sync-ish failure');
      if (calls === 2) return Promise.reject(new Error('rejected'));
      return 'ok';
    }, { intervalMs: 1 });
    expect(value).toBe('ok');
  });

  it('rejects naming the message and the last probe value on timeout', async () => {
    await expect(waitUntil(() => 0, { timeoutMs: 30, intervalMs: 5, message: 'the answer' })).rejects.toThrow(
      /waiting for the answer; last probe value: 0/,
    );
  });

  it('rejects naming the last probe error, kept as cause', async () => {
    const failure = new Error('connection refused');
    const error = await waitUntil(
      () => {
        throw failure;
      },
      { timeoutMs: 30, intervalMs: 5, message: 'a server' },
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toMatch(/waiting for a server; last probe error: Error: connection refused/);
    expect((error as Error).cause).toBe(failure);
  });

  it('gives up on a probe that never settles', async () => {
    await expect(
      waitUntil(() => new Promise<boolean>(() => undefined), { timeoutMs: 30, message: 'a hung probe' }),
    ).rejects.toThrow(/a hung probe; last probe was still pending/);
  });
});
