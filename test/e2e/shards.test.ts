import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import { replicasFor } from '../../src/coord/index.js';
import type { RunningRegistry } from '../../src/registry/index.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import {
  beatenSince,
  beatsOf,
  interleavedBeats,
  RegsyncCluster,
  runRegsyncWithin,
  sampleLeaders,
  settledProbe,
  shardOfService,
  startBeatTap,
  watchCopies,
  type BeatTap,
  type ClusterSnapshot,
} from '../support/regsync-cluster.js';
import {
  addRegistry,
  api,
  copiesIn,
  defineClusters,
  defineTask,
  nativesIn,
  registerNative,
  startFixture,
  stopFixture,
  type NativeInstance,
  type SyncFixture,
} from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

/*
 * regsync as several processes on one Redis: `regsync api` (HTTP only) and `regsync worker`s (no HTTP)
 * sharing 8 shards with 2 replicas each. The workers run with a 2 s lease TTL and registry B marks an
 * ephemeral copy unhealthy after 8 s without a beat (removed after 16 s): a shard leader that dies
 * must be replaced, and the copies it beat must be beaten again, well inside that window.
 *
 * The tests of the first describe share one deployment and build on each other (workers w1..w3, a
 * replacement after the kill, a fourth that joins, one stopped with SIGTERM).
 */

const TIMEOUT = 30_000;
const SERVICES = Array.from({ length: 24 }, (_, i) => `s${i}`);
const TASK = 'ab';

const numeric = (xs: number[] | undefined) => (xs === undefined ? undefined : [...xs].sort((x, y) => x - y));

/** The worker leading most shards (ties: the smallest id). */
function busiest(snapshot: ClusterSnapshot, live: string[]): { id: string; leads: number[] } {
  const leadsOf = (id: string) => [...snapshot.leaders].filter(([, leader]) => leader === id).map(([shard]) => shard).sort((a, b) => a - b);
  const ranked = live.map((id) => ({ id, leads: leadsOf(id) })).sort((a, b) => b.leads.length - a.leads.length || (a.id < b.id ? -1 : 1));
  const top = ranked[0];
  if (!top || top.leads.length === 0) throw new Error(`no worker leads anything: ${JSON.stringify([...snapshot.leaders])}`);
  return top;
}

describe('sharded deployment: one api process, several worker processes', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let cluster: RegsyncCluster;
  let tap: BeatTap;
  const natives: NativeInstance[] = [];
  let nextWorker = 1;
  const newWorkerId = () => `w${nextWorker++}`;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b', { beatIntervalMs: 1_000, expiry: { unhealthyAfterMs: 8_000, expireAfterMs: 16_000 } });
    cluster = new RegsyncCluster(fx.redis.url, ['--shards', '8', '--replicas', '2', '--lease-ttl-ms', '2000']);
    // regsync reaches B through the tap, which tells which worker sent each heartbeat
    tap = await startBeatTap(b, cluster);
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await cluster?.close();
    await tap?.close();
    if (fx) await stopFixture(fx);
  });

  /** Heartbeats from `mark` on: every one from a known worker, and no copy beaten by two workers in turn. */
  const expectOneHeartbeater = (mark: number) => {
    const beats = tap.beats.slice(mark);
    expect(beats.length).toBeGreaterThan(0);
    expect(beats.filter((x) => !/^w\d+$/.test(x.by))).toEqual([]);
    expect(interleavedBeats(beats)).toEqual([]);
  };

  const showLogsOnFailure = () => onTestFailed(() => console.log(cluster.logs()));

  it('gives every shard one leader among its two replicas, all live workers, as /workers says too', async () => {
    showLogsOnFailure();
    await cluster.startApi();
    await Promise.all([newWorkerId(), newWorkerId(), newWorkerId()].map((id) => cluster.startWorker(id)));

    const snap = await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment of 3 workers' });
    expect(snap.shards.shards).toBe(8);
    expect(snap.shards.replicas).toBe(2);
    expect(snap.shards.items.map((s) => s.shard)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    const live = new Set(cluster.liveIds());
    const listed = new Set(snap.workers.map((w) => w.id));
    for (const item of snap.shards.items) {
      expect(new Set(item.replicas).size).toBe(2);
      for (const r of item.replicas) {
        expect(live.has(r)).toBe(true);
        expect(listed.has(r)).toBe(true);
      }
      expect(item.leader).not.toBeNull();
      expect(item.replicas).toContain(item.leader);
      expect(item.token).toEqual(expect.any(Number));
      expect(item.leaseTtlLeftMs).toEqual(expect.any(Number));
      expect(item.leaseAgeMs).toBeGreaterThanOrEqual(0);
    }
    for (const id of live) {
      const w = snap.workers.find((x) => x.id === id);
      expect(numeric(w?.leads)).toEqual(snap.shards.items.filter((s) => s.leader === id).map((s) => s.shard));
      expect(numeric(w?.serves)).toEqual(snap.shards.items.filter((s) => s.replicas.includes(id)).map((s) => s.shard));
    }
  });

  it('kill -9 of the busiest leader: other replicas take its shards, copies stay healthy, a change made meanwhile lands', async () => {
    showLogsOnFailure();
    for (const [id, endpoint] of [['a', a.endpoint], ['b', tap.endpoint]]) {
      expect((await api(cluster.url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint] })).status).toBe(201);
    }
    for (const [i, s] of SERVICES.entries()) natives.push(await registerNative(() => a, s, `10.60.0.${i + 1}`, 8080, {}, 1_000));
    await defineTask(cluster.url, TASK, 'a', 'b', '*');
    // Steady state: past the first beats (sent at the adapter's default 5 s interval until B's answer
    // of clientBeatInterval 1 s is taken up), every copy beaten at B's pace.
    await waitUntil(() => SERVICES.every((s) => copiesIn(b, s).length === 1 && (copiesIn(b, s)[0]?.beats ?? 0) >= 4), {
      timeoutMs: TIMEOUT,
      message: 'one copy of each of the 24 services in B, beaten 4 times',
    });

    const before = await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment before the kill' });
    const victim = busiest(before, cluster.liveIds());
    const moved = SERVICES.find((s) => victim.leads.includes(shardOfService(TASK, s, 8)));
    if (moved === undefined) throw new Error(`no service hashes onto a shard ${victim.id} leads (${victim.leads.join(',')})`);

    const watch = watchCopies(b, SERVICES);
    const mark = tap.beats.length;
    const claims = sampleLeaders(cluster);
    try {
      const beatsAtKill = beatsOf(b, SERVICES);
      expect(beatsAtKill.size).toBe(24);
      await cluster.kill(victim.id);
      natives.push(await registerNative(() => a, moved, '10.60.1.1', 8080, {}, 1_000));

      // (a) another replica leads each of the victim's shards
      await waitUntil(
        async () => {
          const shards = await cluster.shards();
          return victim.leads.every((n) => {
            const item = shards.items[n];
            return item?.leader != null && item.leader !== victim.id && cluster.liveIds().includes(item.leader) && item.replicas.includes(item.leader);
          });
        },
        { timeoutMs: TIMEOUT, message: `new leaders for shards ${victim.leads.join(',')} of the killed ${victim.id}` },
      );
      // (c) the instance registered during the takeover is copied
      await waitUntil(() => copiesIn(b, moved).some((c) => c.ip === '10.60.1.1' && c.healthy && c.beats >= 1), {
        timeoutMs: TIMEOUT,
        message: `a beaten copy of 10.60.1.1 (${moved}) in B`,
      });
      // every copy is beaten again by the survivors (so a gap long enough to expire it would have shown by now)
      await waitUntil(() => beatenSince(b, SERVICES, beatsAtKill, 3), { timeoutMs: TIMEOUT, message: '3 more beats on every copy in B' });
      await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment of the 2 survivors' });
    } finally {
      watch.stop();
      await claims.stop();
    }
    // (b) nothing in B turned unhealthy or vanished
    expect(watch.violations).toEqual([]);
    // (d) once a survivor led one of its shards, the killed worker never showed as leader again (one
    // beater per copy is checked below, from the beats themselves)
    expect(claims.samples()).toBeGreaterThan(0);
    expect(claims.reclaimedBy(victim.id)).toEqual([]);
    expectOneHeartbeater(mark);
    expect(copiesIn(b, moved).map((c) => c.ip).sort()).toEqual(['10.60.0.' + (SERVICES.indexOf(moved) + 1), '10.60.1.1'].sort());
  }, 120_000);

  it('a fourth worker joining takes the shards rendezvous hashing gives it; the others keep their leaders', async () => {
    showLogsOnFailure();
    while (cluster.liveIds().length < 3) await cluster.startWorker(newWorkerId());
    const before = await waitUntil(settledProbe(cluster, { preferred: true }), {
      timeoutMs: TIMEOUT,
      message: '3 workers settled, each shard led by its preferred replica',
    });
    const oldIds = cluster.liveIds();
    const joiner = newWorkerId();
    const newIds = [...oldIds, joiner];
    const r = before.shards.replicas;
    const all = before.shards.items.map((s) => s.shard);
    const sameSet = (n: number) => replicasFor(n, oldIds, r).sort().join(',') === replicasFor(n, newIds, r).sort().join(',');
    const unchanged = all.filter(sameSet);
    const gained = all.filter((n) => replicasFor(n, newIds, r).includes(joiner));
    expect(gained.length).toBeGreaterThan(0); // holds for these ids; otherwise the test proves nothing

    const watch = watchCopies(b, SERVICES);
    const mark = tap.beats.length;
    const claims = sampleLeaders(cluster);
    let after: ClusterSnapshot;
    try {
      await cluster.startWorker(joiner);
      after = await waitUntil(settledProbe(cluster, { preferred: true }), {
        timeoutMs: TIMEOUT,
        message: `4 workers settled after ${joiner} joined`,
      });
      const settledBeats = beatsOf(b, SERVICES);
      await waitUntil(() => beatenSince(b, SERVICES, settledBeats, 2), { timeoutMs: TIMEOUT, message: '2 more beats on every copy in B' });
    } finally {
      watch.stop();
      await claims.stop();
    }
    expect(watch.violations).toEqual([]);
    for (const n of unchanged) {
      expect({ shard: n, leader: after.leaders.get(n) }).toEqual({ shard: n, leader: before.leaders.get(n) });
      // and it never changed hands in between (consecutive samples of /shards, repeats collapsed)
      expect({ shard: n, leaders: claims.leaderHistory.get(n) }).toEqual({ shard: n, leaders: [before.leaders.get(n)] });
    }
    const joined = after.workers.find((w) => w.id === joiner);
    expect(numeric(joined?.serves)).toEqual(gained);
    const prefers = all.filter((n) => replicasFor(n, newIds, r)[0] === joiner);
    expect(numeric(joined?.leads)).toEqual(prefers);
    // Handovers go one way: no old worker takes back a shard it handed to the new one.
    for (const id of oldIds) expect({ id, reclaimed: claims.reclaimedBy(id) }).toEqual({ id, reclaimed: [] });
    expectOneHeartbeater(mark);
  }, 90_000);

  it('SIGTERM of a leader: its shards get new leaders at once and no copy in B turns unhealthy', async () => {
    showLogsOnFailure();
    await waitUntil(() => SERVICES.every((s) => copiesIn(b, s).length >= 1), { timeoutMs: TIMEOUT, message: 'the copies of the earlier test in B' });
    const before = await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment before SIGTERM' });
    const victim = busiest(before, cluster.liveIds());
    const watch = watchCopies(b, SERVICES);
    const mark = tap.beats.length;
    const claims = sampleLeaders(cluster);
    try {
      const beatsAtStop = beatsOf(b, SERVICES);
      expect(await cluster.stop(victim.id)).toBe(0);
      await waitUntil(
        async () => {
          const shards = await cluster.shards();
          return victim.leads.every((n) => {
            const leader = shards.items[n]?.leader;
            return leader != null && leader !== victim.id && cluster.liveIds().includes(leader);
          });
        },
        { timeoutMs: TIMEOUT, message: `new leaders for shards ${victim.leads.join(',')} of the stopped ${victim.id}` },
      );
      await waitUntil(async () => !(await cluster.workerViews()).some((w) => w.id === victim.id), {
        timeoutMs: TIMEOUT,
        message: `${victim.id} gone from /workers`,
      });
      await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment after SIGTERM' });
      await waitUntil(() => beatenSince(b, SERVICES, beatsAtStop, 3), { timeoutMs: TIMEOUT, message: '3 more beats on every copy in B' });
    } finally {
      watch.stop();
      await claims.stop();
    }
    expect(watch.violations).toEqual([]);
    expect(claims.reclaimedBy(victim.id)).toEqual([]);
    expectOneHeartbeater(mark);
  }, 90_000);

  it('pause stops the beats in every worker, resume starts them again; delete removes the copies and no worker writes them again', async () => {
    showLogsOnFailure();
    await waitUntil(() => SERVICES.every((s) => copiesIn(b, s).some((c) => c.healthy)), { timeoutMs: TIMEOUT, message: 'healthy copies of the earlier tests in B' });
    expect((await api(cluster.url, 'POST', `/api/v1/tasks/${TASK}/pause`)).status).toBe(200);
    // Without beats B marks the copies unhealthy (after 8 s here): every worker stopped beating them.
    await waitUntil(() => SERVICES.every((s) => copiesIn(b, s).every((c) => !c.healthy)), { timeoutMs: TIMEOUT, message: 'every copy in B unhealthy after the pause' });

    expect((await api(cluster.url, 'POST', `/api/v1/tasks/${TASK}/resume`)).status).toBe(200);
    await waitUntil(() => SERVICES.every((s) => copiesIn(b, s).length >= 1 && copiesIn(b, s).every((c) => c.healthy)), {
      timeoutMs: TIMEOUT,
      message: 'every copy in B healthy again after the resume',
    });

    // The API waits for every worker to stop the task before it removes the copies.
    expect((await api(cluster.url, 'DELETE', `/api/v1/tasks/${TASK}`)).status).toBe(204);
    expect(SERVICES.flatMap((s) => copiesIn(b, s))).toEqual([]);
    // A few beats of the natives in A later (a reconcile under way would have written by then), still none.
    const nativeBeats = () => SERVICES.reduce((n, s) => n + nativesIn(a, s).reduce((m, i) => m + i.beats, 0), 0);
    const clock = nativeBeats();
    await waitUntil(() => nativeBeats() >= clock + 3 * SERVICES.length, { timeoutMs: TIMEOUT, message: '3 more beats of each native in A' });
    expect(SERVICES.flatMap((s) => copiesIn(b, s))).toEqual([]);
  }, 90_000);

  it('a worker asking for other shards or replicas than the stored ones exits with code 2', async () => {
    showLogsOnFailure();
    const shards = await runRegsyncWithin(['worker', '--redis', fx.redis.url, '--shards', '4'], 20_000);
    expect({ code: shards.code, timedOut: shards.timedOut }).toEqual({ code: 2, timedOut: false });
    expect(shards.output).toMatch(/stored/);
    const replicas = await runRegsyncWithin(['worker', '--redis', fx.redis.url, '--shards', '8', '--replicas', '3'], 20_000);
    expect({ code: replicas.code, timedOut: replicas.timedOut }).toEqual({ code: 2, timedOut: false });
    expect(replicas.output).toMatch(/stored/);
    const view = await cluster.shards();
    expect([view.shards, view.replicas]).toEqual([8, 2]);
  });
});

describe('sharded deployment across a Redis restart (append-only file)', () => {
  let redis: RedisServer;
  let fx: SyncFixture;
  let cluster: RegsyncCluster;
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    redis = await startRedis({ appendonly: true });
    // The fixture's own (non-AOF) Redis stays unused; clusters, tasks and queues live in `redis`.
    fx = await startFixture();
    await addRegistry(fx, 'a');
    await addRegistry(fx, 'b', { beatIntervalMs: 1_000 });
    cluster = new RegsyncCluster(redis.url, ['--shards', '4', '--replicas', '2', '--lease-ttl-ms', '2000']);
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await cluster?.close();
    if (fx) await stopFixture(fx);
    await redis?.cleanup();
  });

  it('comes back with tasks and status, syncs a change made after the restart, one leader per shard again', async () => {
    onTestFailed(() => console.log(cluster.logs()));
    const a = fx.registries.get('a') as RunningRegistry;
    const b = fx.registries.get('b') as RunningRegistry;
    await cluster.startApi();
    await Promise.all([cluster.startWorker('r1'), cluster.startWorker('r2')]);
    await defineClusters(cluster.url, fx);
    await defineTask(cluster.url, TASK, 'a', 'b', 'orders');
    natives.push(await registerNative(() => a, 'orders', '10.70.0.1', 8080, {}, 1_000));
    await waitUntil(() => copiesIn(b, 'orders').some((c) => c.ip === '10.70.0.1' && c.beats >= 1), { timeoutMs: TIMEOUT, message: 'a beaten copy in B' });
    await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'a settled deployment before the Redis restart' });
    const statusOf = async () => {
      const res = await api(cluster.url, 'GET', `/api/v1/tasks/${TASK}`);
      const services = (res.body?.status?.services ?? []) as Array<{ service: string; sourceInstances: number; destinationInstances: number }>;
      return services.map((s) => [s.service, s.sourceInstances, s.destinationInstances]);
    };
    await waitUntil(async () => (await statusOf()).some(([, src, dst]) => src === 1 && dst === 1), { timeoutMs: TIMEOUT, message: 'status 1 -> 1 before the restart' });
    const statusBefore = await statusOf();

    await redis.restart();

    const tasks = await waitUntil(
      async () => {
        const res = await api(cluster.url, 'GET', '/api/v1/tasks');
        return res.status === 200 ? (res.body.items as Array<{ id: string; state: string }>) : false;
      },
      { timeoutMs: TIMEOUT, message: 'the task list after the Redis restart' },
    );
    expect(tasks.map((t) => [t.id, t.state])).toEqual([[TASK, 'running']]);
    expect(await statusOf()).toEqual(statusBefore);

    natives.push(await registerNative(() => a, 'orders', '10.70.0.2', 8080, {}, 1_000));
    await waitUntil(() => copiesIn(b, 'orders').some((c) => c.ip === '10.70.0.2' && c.healthy), {
      timeoutMs: TIMEOUT,
      message: 'the instance registered after the restart copied into B',
    });
    await waitUntil(async () => (await statusOf()).some(([, src, dst]) => src === 2 && dst === 2), { timeoutMs: TIMEOUT, message: 'status 2 -> 2 after the restart' });
    const snap = await waitUntil(settledProbe(cluster), { timeoutMs: TIMEOUT, message: 'one leader per shard after the Redis restart' });
    expect(snap.shards.items.every((s) => s.leader !== null && s.replicas.includes(s.leader))).toBe(true);
    expect(copiesIn(b, 'orders').map((c) => [c.ip, c.healthy]).sort()).toEqual([
      ['10.70.0.1', true],
      ['10.70.0.2', true],
    ]);
  }, 90_000);
});
