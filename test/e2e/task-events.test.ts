import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import { scrape } from '../support/prometheus.js';
import { openSse, type SseClient } from '../support/sse-client.js';
import { addRegistry, api, copiesIn, defineClusters, defineTask, persistent, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

interface EventView {
  id: string;
  at: string;
  kind: string;
  taskId?: string;
  service?: string;
  clusterId?: string;
  message: string;
}

describe('task events of a running regsync', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let url: string;
  let stream: SseClient | undefined;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b');
    url = (await startSync(fx)).url as string;
    // The mass-deletion guard's events on their own: no source warm-up holds the drop first (see source-warmup.test.ts).
    await defineClusters(url, fx, { warmupSeconds: 0 });
  });
  afterAll(async () => {
    // The stream is still open: closing regsync must end it rather than wait for it.
    if (fx) await stopFixture(fx);
    await stream?.ended;
  });

  const eventsOf = async (task: string): Promise<EventView[]> => {
    const res = await api(url, 'GET', `/api/v1/tasks/${task}/events?limit=100`);
    expect(res.status).toBe(200);
    return (res.body as { items: EventView[] }).items;
  };
  const status = async (task: string) => (await api(url, 'GET', `/api/v1/tasks/${task}`)).body.status.services[0];

  it('lists the reconcile that wrote copies and the held deletion, newest first, and streams them as they happen', async () => {
    const ips = Array.from({ length: 10 }, (_, i) => `10.61.0.${i + 1}`);
    for (const ip of ips) a.store.register('public', 'DEFAULT_GROUP', 'guarded', persistent(ip));
    stream = await openSse(`${url}/api/v1/events`);
    expect(stream.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await waitUntil(() => stream?.comments.includes('connected'), { message: 'the event stream is live' });

    await defineTask(url, 'guarded', 'a', 'b', 'guarded', { options: { massDeletionConfirm: 'operator' } });
    await waitUntil(() => copiesIn(b, 'guarded').length === 10, { message: 'ten copies in b' });
    await waitUntil(async () => (await eventsOf('guarded')).some((e) => e.kind === 'reconciled'), { message: 'the reconcile is listed' });
    const written = (await eventsOf('guarded')).find((e) => e.kind === 'reconciled');
    expect(written).toMatchObject({ taskId: 'guarded', service: 'public/DEFAULT_GROUP/guarded' });
    expect(written?.message).toMatch(/^10 copies written to and 0 removed from b/);

    // Nine of ten sources go at once: the guard holds the removal.
    for (const ip of ips.slice(1)) a.store.deregister('public', 'DEFAULT_GROUP', 'guarded', ip, 8080, 'DEFAULT');
    a.store.register('public', 'DEFAULT_GROUP', 'guarded', persistent('10.61.1.1'));
    await waitUntil(async () => (await status('guarded')).held !== null, { message: 'mass deletion held' });
    const listed = await waitUntil(
      async () => {
        const items = await eventsOf('guarded');
        return items.some((e) => e.kind === 'held') ? items : undefined;
      },
      { message: 'the held deletion is listed' },
    );
    const held = listed.find((e) => e.kind === 'held');
    expect(held?.message).toMatch(/holding a mass deletion: 9 of 10 copies/);
    // Newest first: ids only decrease.
    const ids = listed.map((e) => e.id.split('-').map(Number) as [number, number]);
    for (let i = 1; i < ids.length; i += 1) {
      const [p, q] = [ids[i - 1] as [number, number], ids[i] as [number, number]];
      expect(p[0] > q[0] || (p[0] === q[0] && p[1] > q[1]), `${listed[i - 1]?.id} before ${listed[i]?.id}`).toBe(true);
    }
    expect(listed.findIndex((e) => e.kind === 'held')).toBeLessThan(listed.findIndex((e) => e.id === written?.id));
    expect(listed.some((e) => e.kind === 'task' && /task saved, running: a -> b/.test(e.message))).toBe(true);

    // The stream delivered the same events, live.
    await waitUntil(() => stream?.events.some((e) => e.kind === 'held' && e.taskId === 'guarded'), { message: 'held event streamed' });
    expect(stream.events.find((e) => e.id === written?.id)).toEqual(written);

    // The operator releases: the removal is applied, and both show up.
    expect((await api(url, 'POST', '/api/v1/tasks/guarded/release', {})).status).toBe(202);
    await waitUntil(() => copiesIn(b, 'guarded').length === 2, { message: 'removal applied' });
    await waitUntil(
      () => stream?.events.some((e) => e.kind === 'released') && stream.events.some((e) => e.kind === 'reconciled' && /9 removed/.test(String(e.message))),
      { message: 'release and removal streamed' },
    );
  });

  it('records no event for reconciles that change nothing', async () => {
    const before = await status('guarded');
    const count = (await eventsOf('guarded')).filter((e) => e.kind === 'reconciled').length;
    expect((await api(url, 'POST', '/api/v1/tasks/guarded/resync')).status).toBe(202);
    await waitUntil(async () => (await status('guarded')).lastSyncAt !== before.lastSyncAt, { message: 'the resync ran' });
    const after = await eventsOf('guarded');
    expect(after.filter((e) => e.kind === 'reconciled')).toHaveLength(count);
    expect(after[0]).toMatchObject({ kind: 'task', message: expect.stringMatching(/reconcile of every service asked for/) });
  });

  it('records a failing source once, not once per retry', async () => {
    expect((await api(url, 'POST', '/api/v1/clusters', { id: 'dead', kind: 'nacos', endpoints: ['127.0.0.1:1'] })).status).toBe(201);
    await defineTask(url, 'from-dead', 'dead', 'b', 'orders');
    // The job is retried with backoff; the status keeps the same error.
    await waitUntil(async () => /cannot read source dead/.test(String((await status('from-dead'))?.lastError)), { message: 'error in the status' });
    const errors = await waitUntil(
      async () => {
        const items = (await eventsOf('from-dead')).filter((e) => e.kind === 'error');
        return items.length > 0 ? items : undefined;
      },
      { message: 'the error is listed' },
    );
    expect(errors[0]?.message).toMatch(/^cannot read source dead: /);
    // Retries fail the same way: still one event.
    await waitUntil(async () => ((await scrape(`${url}/metrics`)).value('regsync_reconciles_total', { task: 'from-dead', outcome: 'failed' }) ?? 0) >= 2, {
      message: 'a retry failed too',
    });
    expect((await eventsOf('from-dead')).filter((e) => e.kind === 'error')).toHaveLength(1);
    // Cluster changes show up in the events of the tasks using the cluster.
    expect((await api(url, 'PUT', '/api/v1/clusters/dead', { id: 'dead', kind: 'nacos', endpoints: ['127.0.0.1:2'] })).status).toBe(200);
    await waitUntil(async () => (await eventsOf('from-dead')).some((e) => e.kind === 'cluster' && e.clusterId === 'dead'), { message: 'cluster event listed' });
    expect((await api(url, 'GET', '/api/v1/tasks/nope/events')).status).toBe(404);
  });
});
