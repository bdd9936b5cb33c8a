import { setTimeout as delay } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { shardOf } from '../src/coord/rendezvous.js';
import { AdapterPool } from '../src/engine/adapter-pool.js';
import { HeartbeatScheduler } from '../src/engine/heartbeat-scheduler.js';
import { SyncEngine } from '../src/engine/sync-engine.js';
import { silentLogger } from '../src/log.js';
import type { ServiceKey } from '../src/model/index.js';
import { ShardQueues } from '../src/queue/shard-queue.js';
import { MissingServices } from '../src/store/missing-services.js';
import { RegsyncStore } from '../src/store/regsync-store.js';
import { FakeAdapter, instance } from '../test/support/fake-adapter.js';
import { harnessCluster, harnessTask } from '../test/support/reconciler-harness.js';
import { startRedis } from '../test/support/redis.js';
import { RedisCommandMeter } from './redis-commands.js';

/*
 * The Redis commands of the engine's side of a periodic full sync (listing, missing marks, status
 * reads, jobs queued; not the reconciles they ask for): the real store, marks and shard queues on a
 * redis-server of their own, a fake pushed source (`cachedDigest`) and a connection-bound fake
 * destination, `services` service syncs whose last statuses match the feed but for every 10th.
 * Nobody else uses the redis-server, so `INFO commandstats` deltas are the full syncs' own. The
 * queues' depth is answered as 0 (no workers run here), so slices follow each other at once.
 *
 *   node dist/bench/full-sync-redis.js [services=10000] [shards=8] [fullSyncs=3]
 */

const services = Number(process.argv[2] ?? 10_000);
const shards = Number(process.argv[3] ?? 8);
const rounds = Number(process.argv[4] ?? 3);

const svc = (i: number): ServiceKey => ({ namespace: 'public', group: 'DEFAULT_GROUP', name: `svc-${String(i).padStart(6, '0')}` });

class CountingSource extends FakeAdapter {
  lists = 0;
  override async listServices(scope: { namespace: string; group: string }): Promise<ServiceKey[]> {
    this.lists += 1;
    return super.listServices(scope);
  }
}

async function main(): Promise<void> {
  const redis = await startRedis();
  const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  const queueConnection = new Redis(redis.url, { maxRetriesPerRequest: null });
  const store = new RegsyncStore(client, 'regsync');
  const changed = (i: number) => i % 10 === 0;
  const source = Object.assign(new CountingSource('a'), {
    cachedDigest: (s: ServiceKey) => (changed(Number(s.name.slice(4))) ? 'digest-now' : `digest-${s.name}`),
  });
  const destination = Object.assign(new FakeAdapter('b'), { connectionBound: async () => true });
  for (let i = 0; i < services; i += 1) source.put(svc(i), [instance('10.7.0.1')]);
  await store.putCluster(harnessCluster('a'));
  await store.putCluster(harnessCluster('b'));
  const base = harnessTask();
  const intervalMs = 4_000;
  await store.createTask({ ...base, service: '*', options: { ...base.options, fullSyncIntervalMs: intervalMs, maxServices: services * 2 } });
  for (let i = 0; i < services; i += 1) {
    await store.putServiceStatus(base.id, { service: svc(i), sourceInstances: 1, destinationInstances: 1, lastSyncAt: null, lagMs: null, lastError: null, problems: [], sourceDigest: `digest-${svc(i).name}`, held: null });
  }
  const logger = silentLogger();
  const registries = new Map<string, FakeAdapter>([
    ['a', source],
    ['b', destination],
  ]);
  const adapters = new AdapterPool((id) => store.getCluster(id), { nacos: (spec) => registries.get(spec.id) as FakeAdapter }, logger);
  const queues = new ShardQueues({ connection: queueConnection, prefix: 'regsync:bull' }, (key) => shardOf(key, shards));
  let full = 0;
  const engine = new SyncEngine({
    store,
    adapters,
    heartbeats: new HeartbeatScheduler({ logger }),
    logger,
    shardOf: (key) => shardOf(key, shards),
    queue: {
      enqueue: (k, reason, d) => queues.enqueue(k, reason, d),
      enqueueMany: async (keys, reason) => {
        if (reason === 'full') full += keys.length;
        await queues.enqueueMany(keys, reason);
      },
      depth: async () => 0,
    },
    missing: new MissingServices(client, 'regsync'),
  });
  const meter = new RedisCommandMeter(client);
  try {
    await engine.start();
    // Start jobs queued; let the first periodic full sync pass before counting.
    const firstLists = source.lists;
    while (source.lists < firstLists + 1) await delay(50);
    await delay(intervalMs / 2);
    const lists0 = source.lists;
    full = 0;
    await meter.start();
    while (source.lists < lists0 + rounds) await delay(50);
    await delay(intervalMs / 2);
    const got = await meter.stop();
    const n = source.lists - lists0;
    if (!got) throw new Error('no commandstats');
    const top = got.calls.slice(0, 10).map((c) => `${c.command} ${(c.calls / n).toFixed(0)}`).join(', ');
    console.log(`${n} periodic full syncs of ${services} service syncs over ${shards} shards (every 10th changed): ${(got.total / n).toFixed(0)} commands per full sync (${((got.total / n / services) * 1000).toFixed(0)} per 1,000 services), ${(full / n).toFixed(0)} jobs queued per full sync`);
    console.log(`  per full sync: ${top}`);
  } finally {
    await engine.stop();
    await queues.close();
    queueConnection.disconnect();
    client.disconnect();
    await redis.cleanup();
  }
}

await main();
