import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest';
import type { RunningRegistry } from '../../src/registry/index.js';
import {
  beatenSince,
  beatsOf,
  interleavedBeats,
  RegsyncCluster,
  settledProbe,
  shardOfService,
  startBeatTap,
  watchCopies,
  type BeatTap,
} from '../support/regsync-cluster.js';
import { addRegistry, api, copiesIn, registerNative, startFixture, stopFixture, type NativeInstance, type SyncFixture } from '../support/sync-fixture.js';
import { startTcpGate, type TcpGate } from '../support/tcp-gate.js';
import { waitUntil } from '../support/wait-until.js';
import { redisKeys } from '../../src/util/redis-keys.js';

/*
 * A partition between one worker and Redis, while that worker still reaches both registries: the
 * dangerous one (hard-parts.md, "Partitions"). Each worker reaches Redis through its own TcpGate;
 * the gate of the busiest leader goes silent (connections stay open, nothing crosses, as a network
 * that drops packets), then heals and delivers what it held, as TCP would.
 *
 * The bounds under test (README, "Leaders" and "During a failover"): a leader's local deadline is
 * the send time of its last successful renew + TTL - TTL/10, so it is never later than the cut +
 * TTL. Past it the cut-off worker writes nothing (no register, update or deregister); it keeps
 * beating what already exists for the grace (`--redis-grace`, default three TTLs), as in a failover
 * it cannot tell apart, and never past deadline + grace. Another replica takes the shards once the
 * lease key expires. Registry B tells which worker sent what (BeatTap: the peer's pid via /proc).
 * A copy B loses while the victim is past its deadline but within its grace is registered again by
 * the new leader alone.
 */

const TTL_MS = 2_000;
const GRACE_MS = 3 * TTL_MS; // the default of --redis-grace
const TIMEOUT = 30_000;
const TASK = 'ab';
const SERVICES = Array.from({ length: 8 }, (_, i) => `p${i}`);

describe('a worker cut off from Redis alone', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  let tap: BeatTap;
  let cluster: RegsyncCluster;
  let redis: Redis;
  const gates = new Map<string, TcpGate>();
  const natives: NativeInstance[] = [];

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a');
    b = await addRegistry(fx, 'b', { beatIntervalMs: 1_000, expiry: { unhealthyAfterMs: 8_000, expireAfterMs: 16_000 } });
    cluster = new RegsyncCluster(fx.redis.url, ['--shards', '4', '--replicas', '2', '--lease-ttl-ms', String(TTL_MS)]);
    tap = await startBeatTap(b, cluster);
    redis = new Redis(fx.redis.url);
    for (const id of ['w1', 'w2']) gates.set(id, await startTcpGate(`127.0.0.1:${fx.redis.port}`));
  });
  afterAll(async () => {
    for (const n of natives) n.stop();
    await cluster?.close();
    await tap?.close();
    redis?.disconnect();
    for (const g of gates.values()) await g.close();
    if (fx) await stopFixture(fx);
  });

  it('stops writing at its lease deadline and beating at the end of its grace, another replica takes over, no copy lapses, and it rejoins when the link heals', async () => {
    onTestFailed(() => console.log(cluster.logs()));
    await cluster.startApi();
    for (const [id, gate] of gates) await cluster.startWorker(id, [], { redisUrl: `redis://${gate.endpoint}` });
    for (const [id, endpoint] of [['a', a.endpoint], ['b', tap.endpoint]]) {
      expect((await api(cluster.url, 'POST', '/api/v1/clusters', { id, kind: 'nacos', endpoints: [endpoint], options: { requestTimeoutMs: 2_000 } })).status).toBe(201);
    }
    for (const [i, s] of SERVICES.entries()) natives.push(await registerNative(() => a, s, `10.91.0.${i + 1}`, 8080, {}, 1_000));
    expect((await api(cluster.url, 'POST', '/api/v1/tasks', { id: TASK, source: 'a', destination: 'b', service: '*' })).status).toBe(201);
    await waitUntil(() => SERVICES.every((s) => copiesIn(b, s).length === 1 && (copiesIn(b, s)[0]?.beats ?? 0) >= 3), {
      timeoutMs: TIMEOUT,
      message: 'one copy of each service in B, beaten 3 times',
    });
    const before = await waitUntil(settledProbe(cluster, { preferred: true }), { timeoutMs: TIMEOUT, message: 'a settled deployment of w1, w2' });
    const leadsOf = (id: string) => [...before.leaders].filter(([, l]) => l === id).map(([s]) => s);
    const victim = leadsOf('w1').length >= leadsOf('w2').length ? 'w1' : 'w2';
    const survivor = victim === 'w1' ? 'w2' : 'w1';
    const victimShards = leadsOf(victim);
    expect(victimShards.length).toBeGreaterThan(0);
    // A service of the victim's shards that gains an instance during the partition.
    const moved = SERVICES.find((s) => victimShards.includes(shardOfService(TASK, s, 4)));
    if (moved === undefined) throw new Error(`no service hashes onto a shard ${victim} leads (${victimShards.join(',')})`);

    const watch = watchCopies(b, SERVICES);
    const [beatMark, writeMark] = [tap.beats.length, tap.writes.length];
    const lostBefore = countLeaseLost(cluster, victim);
    const cutAt = Date.now();
    // Filled in as the phases pass; printed at the end.
    const seen = { firstTakeoverMs: 0, takeoverMs: 0, changeMs: 0, lostBackMs: 0, victimBeatsInGrace: 0, rejoinMs: 0, rejoinMark: 0 };
    // A service of the victim's shards whose copy B loses during the victim's grace.
    const lost = SERVICES.find((s) => s !== moved && victimShards.includes(shardOfService(TASK, s, 4))) ?? moved;
    const lostCopy = `${lost}/10.91.0.${SERVICES.indexOf(lost) + 1}:8080`;
    let lostAt = Number.POSITIVE_INFINITY;
    try {
      (gates.get(victim) as TcpGate).partition();
      natives.push(await registerNative(() => a, moved, '10.91.1.1', 8080, {}, 1_000));

      // Another replica leads every shard the victim led (the API reads Redis directly).
      await waitUntil(
        async () => {
          const shards = await cluster.shards();
          return victimShards.every((n) => shards.items[n]?.leader === survivor);
        },
        { timeoutMs: TIMEOUT, message: `${survivor} leading shards ${victimShards.join(',')} of the cut-off ${victim}` },
      );
      // When each was taken: the acquisition time Redis recorded (`<token>:<ms>`, this host's clock), not when a poll saw it.
      const takenAt = await Promise.all(victimShards.map(async (n) => Number((await redis.get(redisKeys.leaseSince('regsync', n)))?.split(':')[1]) - cutAt));
      [seen.firstTakeoverMs, seen.takeoverMs] = [Math.min(...takenAt), Math.max(...takenAt)];
      await waitUntil(() => copiesIn(b, moved).some((c) => c.ip === '10.91.1.1' && c.healthy), {
        timeoutMs: TIMEOUT,
        message: `the instance registered during the partition copied into B (${moved})`,
      });
      seen.changeMs = Date.now() - cutAt;
      // Past the victim's deadline, within its grace (it still beats), B loses a copy of one of its shards: only the
      // shard's new leader may register it again (the victim cannot know it was not removed on purpose).
      await waitUntil(() => Date.now() > cutAt + TTL_MS, { timeoutMs: TIMEOUT, message: "the victim's lease deadline" });
      const ip = `10.91.0.${SERVICES.indexOf(lost) + 1}`;
      lostAt = Date.now();
      expect(b.store.deregister('public', 'DEFAULT_GROUP', lost, ip, 8080, 'DEFAULT')).toBe(true);
      await waitUntil(() => copiesIn(b, lost).some((c) => c.ip === ip && c.healthy), { timeoutMs: TIMEOUT, message: `the copy of ${lost} B lost registered again` });
      seen.lostBackMs = Date.now() - lostAt;
      seen.victimBeatsInGrace = tap.beats.filter((x) => x.by === victim && x.at > lostAt).length;
      // The victim gives its leases up by itself, without Redis: its local deadline, then the grace.
      await waitUntil(() => countLeaseLost(cluster, victim) >= lostBefore + victimShards.length, {
        timeoutMs: TIMEOUT,
        message: `${victim} logging "lease lost" for shards ${victimShards.join(',')}`,
      });
      // Past deadline + grace, a few beats of the survivor on every copy: a late beat of the victim would show among them.
      await waitUntil(() => Date.now() > cutAt + TTL_MS + GRACE_MS, { timeoutMs: TIMEOUT, message: 'the end of the grace' });
      const pastGrace = beatsOf(b, SERVICES);
      await waitUntil(() => beatenSince(b, SERVICES, pastGrace, 3), { timeoutMs: TIMEOUT, message: '3 more beats on every copy past the grace' });
    } finally {
      (gates.get(victim) as TcpGate).open();
    }
    const healedAt = Date.now();
    const partitionBeats = tap.beats.slice(beatMark);
    const partitionWrites = tap.writes.slice(writeMark);
    try {
      // Rejoins without a restart: back in /workers, and leading its preferred shards again.
      await waitUntil(settledProbe(cluster, { preferred: true }), { timeoutMs: TIMEOUT, message: `${victim} back, each shard led by its preferred replica` });
      seen.rejoinMs = Date.now() - healedAt;
      seen.rejoinMark = tap.beats.length;
      const settledBeats = beatsOf(b, SERVICES);
      await waitUntil(() => beatenSince(b, SERVICES, settledBeats, 2), { timeoutMs: TIMEOUT, message: '2 more beats on every copy after the rejoin' });
    } finally {
      watch.stop();
    }

    const writeBound = cutAt + TTL_MS;
    const beatBound = cutAt + TTL_MS + GRACE_MS;
    const byVictim = partitionBeats.filter((x) => x.by === victim);
    const lateWrites = partitionWrites.filter((x) => x.by === victim && x.at > writeBound);
    const lateBeats = byVictim.filter((x) => x.at > beatBound);
    const lapses = watch.violations.filter((v) => !v.includes(` ${lostCopy} `));
    const lastVictimBeat = Math.max(cutAt, ...byVictim.map((x) => x.at)) - cutAt;
    const firstSurvivorBeat = Math.min(...partitionBeats.filter((x) => x.by === survivor && victimShards.includes(shardOfService(TASK, x.copy.split('/')[0] ?? '', 4))).map((x) => x.at)) - cutAt;
    console.log(
      `partition worker-redis: ${victimShards.length} shards taken over after ${seen.firstTakeoverMs}-${seen.takeoverMs} ms, change copied ${seen.changeMs} ms, ` +
        `copy lost in B during the victim's grace registered again after ${seen.lostBackMs} ms (victim beats meanwhile ${seen.victimBeatsInGrace}), victim's last beat +${lastVictimBeat} ms ` +
        `(beat bound +${TTL_MS + GRACE_MS} ms), survivor's first beat of its new copies +${firstSurvivorBeat} ms, ` +
        `double-beaten window ${Math.max(0, lastVictimBeat - firstSurvivorBeat)} ms, victim writes past +${TTL_MS} ms: ${lateWrites.length}, ` +
        `victim beats past +${TTL_MS + GRACE_MS} ms: ${lateBeats.length}, lapses ${lapses.length}, rejoin ${seen.rejoinMs} ms`,
    );

    // Unknown senders would hide a double leader.
    expect(partitionBeats.filter((x) => !/^w\d$/.test(x.by)).map((x) => x.by)).toEqual([]);
    expect(lateWrites).toEqual([]);
    // The copy B lost was registered again by the new leader alone.
    expect(partitionWrites.filter((x) => x.copy === lostCopy && x.at >= lostAt).map((x) => `${x.kind} by ${x.by}`)).toEqual([`register by ${survivor}`]);
    expect(lateBeats).toEqual([]);
    // Past the bound, each copy had one heartbeater (the survivor), until the victim was back.
    expect(interleavedBeats(partitionBeats.filter((x) => x.at > beatBound))).toEqual([]);
    // Nothing in B turned unhealthy or vanished (but the copy removed on purpose), and nothing is there twice.
    expect(lapses).toEqual([]);
    for (const s of SERVICES) {
      const ips = copiesIn(b, s).map((c) => c.ip).sort();
      expect({ s, ips }).toEqual({ s, ips: s === moved ? [`10.91.0.${SERVICES.indexOf(s) + 1}`, '10.91.1.1'].sort() : [`10.91.0.${SERVICES.indexOf(s) + 1}`] });
    }
    // Back as the leader of its shards, the victim beats their copies again, alone.
    const rejoined = tap.beats.slice(seen.rejoinMark);
    expect(rejoined.some((x) => x.by === victim)).toBe(true);
    expect(interleavedBeats(rejoined)).toEqual([]);
    // No copy was ever removed from B by either worker.
    expect(tap.writes.filter((x) => x.kind === 'deregister')).toEqual([]);
  }, 120_000);
});

/** How many times the worker logged that it lost a lease. */
function countLeaseLost(cluster: RegsyncCluster, id: string): number {
  const output = cluster.workers.get(id)?.output() ?? '';
  return output.split('\n').filter((line) => line.includes('"lease lost"')).length;
}
