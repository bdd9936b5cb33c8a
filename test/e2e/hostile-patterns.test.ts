import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startRegsync, type RegsyncProcess } from '../support/regsync-process.js';
import {
  addRegistry,
  api,
  copiesIn,
  defineClusters,
  defineTask,
  persistent,
  registerNative,
  startFixture,
  stopFixture,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/** The include a backtracking matcher needs exponential time for, on a name of `a`s without a `b`. */
const HOSTILE = '*a*a*a*a*a*a*a*a*a*a*a*a*b';
/** Source services with 64-character names the hostile include does not match. */
const LONG_NAMES = Array.from({ length: 20 }, (_, i) => `${'a'.repeat(62)}${String(i).padStart(2, '0')}`);
/** A 64-character name it matches. */
const MATCHED = `${'a'.repeat(63)}b`;

/** POSTs `body` with a deadline: a process that stops answering fails the test rather than hanging it. */
async function postWithin(url: string, path: string, body: unknown): Promise<{ status: number; body: unknown }> {
  const res = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(5_000),
  });
  return { status: res.status, body: await res.json() };
}

/**
 * Polls `/healthz` of a regsync process back to back, each request with its own deadline, so that a
 * process whose event loop is pinned shows up as failures here instead of a hung test.
 */
function healthPoller(url: string): { failures: string[]; answered: () => number; stop: () => Promise<void> } {
  const failures: string[] = [];
  let answered = 0;
  let running = true;
  const loop = (async () => {
    while (running) {
      const started = Date.now();
      try {
        const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2_000) });
        await res.text();
        if (res.status === 200) answered += 1;
        else failures.push(`status ${res.status}`);
      } catch (err) {
        failures.push(`no answer after ${Date.now() - started} ms: ${err instanceof Error ? err.message : String(err)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  })();
  return {
    failures,
    answered: () => answered,
    async stop() {
      running = false;
      await loop;
    },
  };
}

/** A `*` task whose include backtracks in a regular-expression matcher, over names anyone can register. */
describe('a hostile include pattern', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let first: RegsyncProcess | undefined;
  let second: RegsyncProcess | undefined;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b', { beatIntervalMs: 1_000 });
    for (const [i, name] of LONG_NAMES.entries()) a.store.register('public', 'DEFAULT_GROUP', name, persistent(`10.61.0.${i + 1}`));
    natives.push(await registerNative(() => a, MATCHED, '10.61.1.1', 1, {}, 1_000));
    natives.push(await registerNative(() => a, 'orders', '10.61.1.2', 1, {}, 1_000));
    first = await startRegsync(['up', '--redis', fx.redis.url, '--listen', '127.0.0.1:0']);
    await defineClusters(first.url, fx);
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await first?.stop();
    await second?.stop();
    await stopFixture(fx);
  });

  it('refuses malformed patterns with 400, naming the field', async () => {
    const { url } = first as RegsyncProcess;
    const post = await api(url, 'POST', '/api/v1/tasks', { id: 'bad', source: 'a', destination: 'b', service: '*', options: { include: ['orders-*', '[abc'] } });
    expect(post.status).toBe(400);
    expect(post.body.error).toEqual({ code: 'invalid_rules', message: expect.stringMatching(/^options\.include\[1\] "\[abc": "\[" is never closed/) });
    const put = await api(url, 'PUT', '/api/v1/tasks/bad', { source: 'a', destination: 'b', service: '*', options: { mapping: { metadataDeny: ['{1..1000}'] } } });
    expect(put.status).toBe(400);
    expect(put.body.error).toEqual({ code: 'invalid_rules', message: expect.stringMatching(/^options\.mapping\.metadataDeny\[0\] .*more than 64 alternatives/) });
    const batch = await api(url, 'POST', '/api/v1/tasks:batch', { action: 'create', tasks: [{ source: 'a', destination: 'b', service: '*', options: { exclude: ['@(x|y)'] } }] });
    expect(batch.status).toBe(400);
    expect(batch.body.error.message).toMatch(/tasks\[0\]: options\.exclude\[0\] .*extglobs/);
    expect((await api(url, 'GET', '/api/v1/tasks')).body.items).toEqual([]);
  });

  it('keeps the API and the beats going, before and after a restart', async () => {
    const up = ['up', '--redis', fx.redis.url, '--listen', '127.0.0.1:0'];
    const url = (first as RegsyncProcess).url;
    await defineTask(url, 'orders', 'a', 'b', 'orders');
    await waitUntil(() => (copiesIn(b, 'orders')[0]?.beats ?? 0) >= 1, { message: 'first beat of the orders copy' });

    const before = healthPoller(url);
    try {
      const created = await postWithin(url, '/api/v1/tasks', { id: 'hostile', source: 'a', destination: 'b', service: '*', options: { include: [HOSTILE] } });
      expect(created.status).toBe(201);
      await waitUntil(() => copiesIn(b, MATCHED).length === 1, { timeoutMs: 15_000, message: 'the matching service copied' });
      const beats = copiesIn(b, 'orders')[0]?.beats ?? 0;
      await waitUntil(() => (copiesIn(b, 'orders')[0]?.beats ?? 0) >= beats + 3 && (copiesIn(b, MATCHED)[0]?.beats ?? 0) >= 3, {
        timeoutMs: 15_000,
        message: 'beats while the hostile task runs',
      });
    } finally {
      await before.stop();
    }
    expect(before.failures).toEqual([]);
    expect(before.answered()).toBeGreaterThan(0);
    const detail = (await api(url, 'GET', '/api/v1/tasks/hostile')).body;
    expect(detail.status.services.map((s: { service: string }) => s.service)).toEqual([`public/DEFAULT_GROUP/${MATCHED}`]);
    for (const name of LONG_NAMES) expect(b.store.getService('public', 'DEFAULT_GROUP', name)).toBeUndefined();

    // A new process expands the task again, before its REST port opens.
    await (first as RegsyncProcess).proc.kill();
    const beatsAtKill = copiesIn(b, MATCHED)[0]?.beats ?? 0;
    second = await startRegsync(up);
    const after = healthPoller(second.url);
    try {
      await waitUntil(() => (copiesIn(b, MATCHED)[0]?.beats ?? 0) >= beatsAtKill + 3, { timeoutMs: 15_000, message: 'beats from the new process' });
      await waitUntil(() => after.answered() >= 20, { message: 'health answers from the new process' });
    } finally {
      await after.stop();
    }
    expect(after.failures).toEqual([]);
    expect(copiesIn(b, MATCHED).map((c) => c.healthy)).toEqual([true]);
    expect(copiesIn(b, 'orders').map((c) => c.healthy)).toEqual([true]);

    expect((await api(second.url, 'DELETE', '/api/v1/tasks/hostile')).status).toBe(204);
    expect(copiesIn(b, MATCHED)).toEqual([]);
  });
});
