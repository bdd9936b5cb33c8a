import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { ReconcileReason } from '../model/reconcile-reason.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { ClusterRecovery } from './cluster-recovery.js';
import { FailedSyncs } from './failed-syncs.js';

/*
 * Two processes (two ClusterRecovery objects on one Redis) reconciling service syncs of clusters
 * that stop answering: what one failed, the other runs again once it reaches the cluster; probes
 * go out while a cluster is down; a recovery that fails again loops on nothing.
 */
const r = redisPerTest();
const silent = pino({ level: 'silent' });

interface Queued {
  key: string;
  reason: ReconcileReason;
}

function process(queued: Queued[], probeIntervalMs = 60_000): ClusterRecovery {
  const queue = { enqueue: async (key: string, reason: ReconcileReason) => void queued.push({ key, reason }) };
  return new ClusterRecovery({ failed: new FailedSyncs(r.redis, r.prefix), queue, logger: silent, probeIntervalMs });
}

/** A reconcile of `key` run by `p` for `reason`, that reaches (or not) each cluster given. */
async function reconcile(p: ClusterRecovery, key: string, reason: ReconcileReason, reached: Record<string, boolean>): Promise<void> {
  await p.run(key, reason, async () => {
    for (const [cluster, ok] of Object.entries(reached)) p.observer.clusterReached?.(cluster, ok, { taskId: 't', key });
  });
}

describe('ClusterRecovery', () => {
  it('runs the failed service syncs of a cluster again, once each, when another process reaches it', async () => {
    const queued: Queued[] = [];
    const [one, other] = [process([]), process(queued)];
    await reconcile(one, 'k1', 'change', { dest: false });
    await reconcile(one, 'k2', 'full', { dest: false });
    await waitUntil(async () => (await r.redis.scard(`${r.prefix}:failed-syncs:dest`)) === 2, { message: 'both recorded' });
    // The first process probes dest this period; the other learns in its round that dest is down, then reaches it.
    await one.probeRound();
    await other.probeRound();
    await reconcile(other, 'k3', 'change', { src: true, dest: true });
    await waitUntil(() => queued.filter((q) => q.reason === 'recovery').length === 2, { message: 'both queued again' });
    expect(queued.map((q) => q.key).sort()).toEqual(['k1', 'k2']);
    // Reached again: nothing more to run.
    await reconcile(other, 'k4', 'change', { dest: true });
    await other.probeRound();
    expect(queued).toHaveLength(2);
    expect(await r.redis.smembers(`${r.prefix}:failed-clusters`)).toEqual([]);
  });

  it('probes a cluster that is down with one of its failed service syncs, from one process per period', async () => {
    const [a, b]: [Queued[], Queued[]] = [[], []];
    const [one, other] = [process(a), process(b)];
    await reconcile(one, 'k1', 'change', { dest: false });
    await waitUntil(async () => (await r.redis.exists(`${r.prefix}:cluster-down:dest`)) === 1, { message: 'dest marked down' });
    await one.probeRound();
    await other.probeRound();
    expect([...a, ...b]).toEqual([{ key: 'k1', reason: 'probe' }]);
  });

  it('does not mark a cluster down for a recovery that fails again: a service sync that always fails is run again once per failure of its own', async () => {
    const queued: Queued[] = [];
    const p = process(queued);
    await reconcile(p, 'bad', 'change', { dest: false });
    await waitUntil(async () => (await r.redis.exists(`${r.prefix}:cluster-down:dest`)) === 1, { message: 'dest marked down' });
    await reconcile(p, 'good', 'change', { dest: true });
    await waitUntil(() => queued.length === 1, { message: 'bad queued again' });
    // The recovery fails again; other service syncs keep reaching dest: no more recoveries.
    await reconcile(p, 'bad', 'recovery', { dest: false });
    await waitUntil(async () => (await r.redis.sismember(`${r.prefix}:failed-syncs:dest`, 'bad')) === 1, { message: 'bad recorded again' });
    for (let i = 0; i < 3; i += 1) await reconcile(p, 'good', 'change', { dest: true });
    await p.probeRound();
    await reconcile(p, 'good', 'change', { dest: true });
    expect(queued).toEqual([{ key: 'bad', reason: 'recovery' }]);
    // Its own next failure (a full sync, say) makes it run again at the next reach.
    await reconcile(p, 'bad', 'full', { dest: false });
    await waitUntil(async () => (await r.redis.exists(`${r.prefix}:cluster-down:dest`)) === 1, { message: 'dest marked down again' });
    await reconcile(p, 'good', 'change', { dest: true });
    await waitUntil(() => queued.length === 2, { message: 'bad queued once more' });
  });

  it('a heartbeat answered counts as reaching the cluster', async () => {
    const queued: Queued[] = [];
    const p = process(queued);
    await reconcile(p, 'k1', 'change', { dest: false });
    await waitUntil(async () => (await r.redis.exists(`${r.prefix}:cluster-down:dest`)) === 1, { message: 'dest marked down' });
    p.observer.beat?.('dest', 'failed');
    p.observer.beat?.('dest', 'ok');
    await waitUntil(() => queued.length === 1, { message: 'k1 queued again' });
  });
});
