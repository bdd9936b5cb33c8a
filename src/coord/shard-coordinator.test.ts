import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../../test/support/redis.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { readLease, readLeases, replicasFor, createShardCoordinator, type ShardCoordinator } from './index.js';

const SHARDS = 8;
const REPLICAS = 2;

interface Worker {
  coordinator: ShardCoordinator;
  clients: Redis[];
}

interface Event {
  worker: string;
  kind: 'lead' | 'unlead';
  shard: number;
  detail: number | string;
}

let server: RedisServer;
let observer: Redis;
let prefix: string;
let workers: Worker[];
let events: Event[];
/** Every worker started in the test, crashed ones included. */
let everyWorker: Worker[];
/** Leads taken while another worker still held a locally valid lease of the shard: must stay empty. */
let overlaps: string[];

/** A client that reconnects, and queues commands meanwhile, as a worker's would. */
function connect(): Redis {
  const client = new Redis(server.url, { maxRetriesPerRequest: null, retryStrategy: () => 100 });
  client.on('error', () => undefined);
  return client;
}

async function startWorker(id: string, timings: { membershipTtlMs?: number; leaseTtlMs?: number; tickMs?: number; preferredFirstMs?: number } = {}): Promise<Worker> {
  const clients = [connect(), connect()];
  const [redis, subscriber] = clients as [Redis, Redis];
  const coordinator = await createShardCoordinator({
    redis, subscriber, prefix, id, shards: SHARDS, replicas: REPLICAS,
    membershipTtlMs: 1000, leaseTtlMs: 1200, tickMs: 200, ...timings,
  });
  coordinator.on('lead', (shard, token) => {
    events.push({ worker: id, kind: 'lead', shard, detail: token });
    for (const other of everyWorker) {
      if (other.coordinator !== coordinator && other.coordinator.isLeading(shard)) {
        overlaps.push(`${id} took shard ${shard} while ${other.coordinator.id} still led it`);
      }
    }
  });
  coordinator.on('unlead', (shard, reason) => events.push({ worker: id, kind: 'unlead', shard, detail: reason }));
  const worker = { coordinator, clients };
  workers.push(worker);
  everyWorker.push(worker);
  await coordinator.start();
  return worker;
}

/** What a kill -9 leaves behind: no timers, no connections, nothing released. */
function crash(worker: Worker): void {
  worker.coordinator.halt();
  for (const client of worker.clients) client.disconnect();
  workers = workers.filter((w) => w !== worker);
}

interface Leader {
  owner: string;
  token: number;
}

/**
 * The leaders per shard once the workers agree on the live set, every shard is led by its preferred
 * replica and no one else, and every worker serves exactly the shards it is a replica of; else false.
 */
async function converged(): Promise<Map<number, Leader> | false> {
  const ids = workers.map((w) => w.coordinator.id).sort();
  if (workers.some((w) => w.coordinator.membership.liveIds().join() !== ids.join())) return false;
  const leases = await readLeases(observer, prefix, [...Array(SHARDS).keys()]);
  const leaders = new Map<number, Leader>();
  for (let shard = 0; shard < SHARDS; shard += 1) {
    const lease = leases[shard];
    const replicas = replicasFor(shard, ids, REPLICAS);
    if (lease === undefined || lease.owner !== replicas[0]) return false;
    for (const { coordinator: c } of workers) {
      const leads = c.id === lease.owner;
      if (c.ledShards().includes(shard) !== leads || c.isLeading(shard) !== leads) return false;
      if (leads && c.leases.token(shard) !== lease.token) return false;
      if (c.servedShards().includes(shard) !== replicas.includes(c.id)) return false;
      if (c.soleReplica(shard) !== (replicas.length === 1 && replicas[0] === c.id)) return false;
    }
    leaders.set(shard, { owner: lease.owner, token: lease.token });
  }
  return leaders;
}

function waitConverged(message: string, timeoutMs = 15_000): Promise<Map<number, Leader>> {
  return waitUntil(converged, { message, timeoutMs });
}

/** Starts three workers, crashes one that leads shards, and waits until the survivors lead them all. */
async function crashLeaderUntilTaken(timings: Parameters<typeof startWorker>[1]): Promise<{ victimShards: number[]; taken: () => boolean }> {
  // Leases long enough that a loaded machine does not let one lapse while the workers converge:
  // with no tick, nothing but a membership change or a lease running out would start a pass.
  await Promise.all(['worker-a', 'worker-b', 'worker-c'].map((id) => startWorker(id, { leaseTtlMs: 3_000, ...timings })));
  await waitConverged('3 workers to converge');
  // Every worker has read the leases as they are now (the passes of a start may all come before the last lease was taken).
  for (const w of workers) await w.coordinator.evaluate();
  const victim = workers.find((w) => w.coordinator.ledShards().length > 0)!;
  const victimShards = victim.coordinator.ledShards();
  crash(victim);
  const taken = () => victimShards.every((shard) => workers.some((w) => w.coordinator.isLeading(shard)));
  await waitUntil(taken, { message: 'the survivors to lead the crashed worker\'s shards' });
  return { victimShards, taken };
}

function shardsWhere(test: (shard: number) => boolean): number[] {
  return Array.from({ length: SHARDS }, (_, shard) => shard).filter(test);
}

beforeAll(async () => {
  server = await startRedis({ appendonly: true });
  observer = connect();
});

afterAll(async () => {
  observer?.disconnect();
  await server?.cleanup();
});

beforeEach(() => {
  prefix = `t-${randomUUID()}`;
  workers = [];
  events = [];
  everyWorker = [];
  overlaps = [];
});

afterEach(async () => {
  if (!server.running) await server.restart();
  for (const w of workers) {
    await w.coordinator.stop().catch(() => undefined);
    for (const client of w.clients) client.disconnect();
  }
  expect(overlaps).toEqual([]);
});

describe('ShardCoordinator', () => {
  it('gives every shard exactly one leader, its preferred replica, and two replicas', async () => {
    await Promise.all(['worker-a', 'worker-b', 'worker-c'].map((id) => startWorker(id)));
    const leaders = await waitConverged('3 workers to converge');
    const snapshot = await workers[0]!.coordinator.snapshot();
    expect(snapshot).toHaveLength(SHARDS);
    for (const s of snapshot) {
      expect(s.replicas).toHaveLength(REPLICAS);
      expect(s.leader).toBe(s.replicas[0]);
      expect(s.token).toBe(leaders.get(s.shard)?.token);
      expect(s.ttlLeftMs).toBeGreaterThan(0);
    }
    const led = workers.flatMap((w) => w.coordinator.ledShards()).sort();
    expect(led).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    for (const w of workers) expect(w.coordinator.servedShards().length).toBeGreaterThan(0);
  });

  it('knows when it is the only replica of a shard: alone, and no longer once a second worker serves it', async () => {
    await startWorker('worker-a');
    await waitConverged('one worker to lead every shard');
    expect(shardsWhere((s) => workers[0]!.coordinator.soleReplica(s))).toEqual(shardsWhere(() => true));
    await startWorker('worker-b');
    await waitConverged('2 workers to converge');
    for (const w of workers) expect(shardsWhere((s) => w.coordinator.soleReplica(s))).toEqual([]);
  });

  it('replaces a crashed leader with another replica once its lease expires, with a higher token', async () => {
    await Promise.all(['worker-a', 'worker-b', 'worker-c'].map((id) => startWorker(id)));
    const before = await waitConverged('3 workers to converge');
    const victim = [...workers].sort((x, y) => y.coordinator.ledShards().length - x.coordinator.ledShards().length)[0]!;
    const victimShards = victim.coordinator.ledShards();
    expect(victimShards.length).toBeGreaterThan(0);
    // Whenever another worker takes one of the victim's shards, the victim must already have stopped.
    const victimValidAtTakeover: boolean[] = [];
    for (const w of workers.filter((w) => w !== victim)) {
      w.coordinator.on('lead', (shard) => {
        if (victimShards.includes(shard)) victimValidAtTakeover.push(victim.coordinator.leases.isValid(shard));
      });
    }
    crash(victim);
    const after = await waitConverged('the 2 survivors to take over');
    for (const shard of victimShards) {
      expect(after.get(shard)?.owner).not.toBe(victim.coordinator.id);
      expect(after.get(shard)!.token).toBeGreaterThan(before.get(shard)!.token);
      expect(victim.coordinator.leases.isValid(shard)).toBe(false);
      expect(victim.coordinator.isLeading(shard)).toBe(false);
    }
    expect(victimValidAtTakeover.length).toBeGreaterThanOrEqual(victimShards.length);
    expect(victimValidAtTakeover.every((valid) => !valid)).toBe(true);
  });

  it('takes a crashed leader\'s shards as their leases run out, without waiting for the next tick', async () => {
    // No tick and no membership change within the test: only the leases running out can start a pass.
    await crashLeaderUntilTaken({ tickMs: 600_000, membershipTtlMs: 600_000 });
  });

  it('does not leave a shard to a preferred replica that let its own lease run out', async () => {
    // The crashed leader stays in the membership (its record outlives the test) and so stays the
    // preferred replica of its shards; a survivor waiting for it to take a free shard back would
    // wait preferredFirstMs (here longer than the test) on top of the lease's TTL.
    const { victimShards, taken } = await crashLeaderUntilTaken({ tickMs: 600_000, membershipTtlMs: 600_000, preferredFirstMs: 600_000 });
    // Nor hands them back to it while it is still listed: the shards would be leaderless until it dropped out.
    const takenAt = events.length;
    for (const w of workers) await w.coordinator.evaluate();
    for (const w of workers) await w.coordinator.evaluate();
    // (A lease lost to a late renewal on a loaded machine is not a hand-back: only releases count.)
    expect(events.slice(takenAt).filter((e) => victimShards.includes(e.shard) && e.detail === 'released')).toEqual([]);
    expect(taken()).toBe(true);
  });

  it('moves only the shards a joining worker becomes preferred for; the others keep leader and token', async () => {
    const three = ['worker-a', 'worker-b', 'worker-c'];
    await Promise.all(three.map((id) => startWorker(id)));
    const before = await waitConverged('3 workers to converge');
    const eventsBefore = events.length;
    await startWorker('worker-d');
    const after = await waitConverged('4 workers to converge');

    const four = [...three, 'worker-d'];
    const changedSets = shardsWhere((s) => replicasFor(s, four, REPLICAS).includes('worker-d'));
    const preferred = shardsWhere((s) => replicasFor(s, four, REPLICAS)[0] === 'worker-d');
    // The scenario means something only if the join changes some shards and not others.
    expect(preferred.length).toBeGreaterThan(0);
    expect(changedSets.length).toBeLessThan(SHARDS);
    for (let shard = 0; shard < SHARDS; shard += 1) {
      if (preferred.includes(shard)) {
        expect(after.get(shard)?.owner).toBe('worker-d');
        expect(after.get(shard)!.token).toBeGreaterThan(before.get(shard)!.token);
      } else {
        expect(after.get(shard)).toEqual(before.get(shard));
      }
    }
    expect(workers.at(-1)?.coordinator.servedShards()).toEqual(changedSets);
    // No churn: the only lead changes are the handovers to worker-d.
    const moved = events.slice(eventsBefore);
    expect([...new Set(moved.map((e) => e.shard))].sort()).toEqual(preferred);
    expect(moved.filter((e) => e.kind === 'lead').map((e) => [e.worker, e.shard])).toEqual(preferred.map((s) => ['worker-d', s]));
    expect(moved.filter((e) => e.kind === 'unlead').every((e) => e.detail === 'released')).toBe(true);
  });

  it('on a graceful stop releases its leases and leaves at once, and the others take over', async () => {
    await Promise.all(['worker-a', 'worker-b', 'worker-c'].map((id) => startWorker(id)));
    const before = await waitConverged('3 workers to converge');
    const leaving = workers.find((w) => w.coordinator.ledShards().length > 0)!;
    const id = leaving.coordinator.id;
    const shards = leaving.coordinator.ledShards();
    const mark = events.length;
    await leaving.coordinator.stop();
    workers = workers.filter((w) => w !== leaving);
    for (const client of leaving.clients) client.disconnect();

    // Right after stop(): nothing of it is left in Redis, so no one waits for a TTL.
    expect(await observer.zscore(`${prefix}:workers`, id)).toBeNull();
    expect(await observer.exists(`${prefix}:worker:${id}`)).toBe(0);
    for (const shard of shards) expect((await readLease(observer, prefix, shard))?.owner).not.toBe(id);
    expect(events.slice(mark).filter((e) => e.worker === id)).toEqual(
      shards.map((shard) => ({ worker: id, kind: 'unlead', shard, detail: 'released' })),
    );

    const after = await waitConverged('the 2 others to take over');
    for (const shard of shards) expect(after.get(shard)!.token).toBeGreaterThan(before.get(shard)!.token);
    expect(leaving.coordinator.ledShards()).toEqual([]);
  });

  it('recovers after a Redis restart: one leader per shard again', async () => {
    await Promise.all(['worker-a', 'worker-b', 'worker-c'].map((id) => startWorker(id)));
    const before = await waitConverged('3 workers to converge');
    // Down for longer than a lease: every leader must give up by its local deadline.
    const mark = events.length;
    await server.stop();
    await waitUntil(() => workers.every((w) => w.coordinator.ledShards().length === 0), { message: 'every lease to be lost' });
    expect(events.slice(mark).map((e) => [e.kind, e.detail])).toEqual(Array(SHARDS).fill(['unlead', 'lost']));
    expect(workers.some((w) => [...Array(SHARDS).keys()].some((shard) => w.coordinator.isLeading(shard)))).toBe(false);
    await server.restart();
    const after = await waitConverged('the workers to recover after the restart', 30_000);
    for (let shard = 0; shard < SHARDS; shard += 1) {
      expect(after.get(shard)!.token).toBeGreaterThan(before.get(shard)!.token);
    }
  });
});
