import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import { serviceKeyString, serviceSyncKey, type Instance, type RegistryAdapter, type TaskSpec } from '../model/index.js';
import { MissingServices, RegsyncStore } from '../store/index.js';
import { BoundRegistry, type BeatableBoundAdapter } from '../../test/support/fake-bound-registry.js';
import { FakeAdapter, instance } from '../../test/support/fake-adapter.js';
import { harnessCluster, harnessTask, SERVICE } from '../../test/support/reconciler-harness.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { AdapterPool } from './adapter-pool.js';
import { HeartbeatScheduler } from './heartbeat-scheduler.js';
import { LiveSets } from './live-sets.js';
import { SetPublisher } from './set-publisher.js';
import { SyncEngine } from './sync-engine.js';

const KEY = serviceSyncKey({ taskId: 't', service: SERVICE });
const NAME = serviceKeyString(SERVICE);
const ephemeral = (ip: string): Instance => ({ ...instance(ip), ephemeral: true });
const ips = (n: number) => Array.from({ length: n }, (_, i) => `10.6.0.${i + 1}`);

/** One regsync worker's worth of engine: its own Redis connections, adapters (its own connection to B), engine and publisher. */
interface Replica {
  name: string;
  leading: boolean;
  connection: BeatableBoundAdapter;
  engine: SyncEngine;
  sets: SetPublisher;
  heartbeats: HeartbeatScheduler;
  liveSets: LiveSets;
  reconcile(): ReturnType<SyncEngine['reconciler']['reconcile']>;
}

/**
 * Several replicas of one shard, each a worker of its own (engine, adapters, Redis connections)
 * sharing only a real redis-server and the registries: A (a plain source) and B, connection-bound,
 * where each replica has its own connection. Every replica, leader or follower, must keep every
 * copy published, so that B loses none when any one of them dies.
 */
describe('SetPublisher: every replica publishes the sets of its shards', () => {
  const r = redisPerTest();
  let store: RegsyncStore;
  let a: FakeAdapter;
  let b: BoundRegistry;
  let task: TaskSpec;
  const replicas: Replica[] = [];
  const logger = silentLogger();

  const held = (replica: Replica) => replica.connection.held(NAME).map((i) => i.ip).sort();
  const visible = () => b.addresses(SERVICE);
  const source = (list: readonly string[]) => a.put(SERVICE, list.map(ephemeral));

  const replica = async (name: string, leading = false): Promise<Replica> => {
    const redis = r.connect();
    const connection = b.connect(name, true) as BeatableBoundAdapter;
    const adapters = new AdapterPool((id) => store.getCluster(id), { nacos: (spec): RegistryAdapter => (spec.id === 'a' ? a : connection) }, logger);
    const liveSets = new LiveSets(redis, r.prefix);
    const heartbeats = new HeartbeatScheduler({ logger, tickMs: 20 });
    const sets: SetPublisher = new SetPublisher({ liveSets, adapters, shardOf: () => 0, logger, activeTask: (id) => engine.activeTask(id), retryMs: 20, maxRetryMs: 100, handoverGraceMs: 200 });
    const self: Replica = {
      name,
      leading,
      connection,
      sets,
      heartbeats,
      liveSets,
      engine: undefined as unknown as SyncEngine,
      reconcile: () => engine.reconciler.reconcile(KEY),
    };
    const engine = new SyncEngine({
      store,
      adapters,
      queue: { enqueue: async () => undefined },
      heartbeats,
      logger,
      shardOf: () => 0,
      leads: () => self.leading,
      liveSets,
      sets,
      missing: new MissingServices(redis, r.prefix),
    });
    self.engine = engine;
    // As the worker role wires it: every replica's publisher hears every change, the leader also restores beats.
    await liveSets.listen(
      r.connect(),
      (shard, key) => {
        sets.changed(shard, key);
        if (self.leading) void liveSets.get(key, shard).then((instances) => engine.restoreBeats(key, instances)).catch(() => undefined);
      },
      logger,
    );
    await engine.start();
    await sets.serve([0]);
    replicas.push(self);
    return self;
  };

  beforeEach(async () => {
    store = new RegsyncStore(r.redis, r.prefix);
    a = new FakeAdapter('a');
    b = new BoundRegistry('b');
    await store.putCluster(harnessCluster('a'));
    await store.putCluster(harnessCluster('b'));
    task = harnessTask();
    await store.putTask(task);
  });
  afterEach(async () => {
    for (const replica of replicas.splice(0)) {
      await replica.engine.stop();
      replica.sets.stop();
    }
  });

  /** Three replicas, the first leading, with three copies reconciled by a follower and published by all. */
  const threeReplicas = async (): Promise<Replica[]> => {
    const all = [await replica('w1', true), await replica('w2'), await replica('w3')];
    source(ips(3));
    expect(await all[1]?.reconcile()).toMatchObject({ kind: 'synced', upserts: 3 });
    await waitUntil(() => all.every((x) => held(x).join() === ips(3).join()), { message: 'every replica publishes the set' });
    return all;
  };

  it('publishes, from every replica, the set any replica reconciled, shown once; no replica beats', async () => {
    const all = await threeReplicas();
    expect(visible()).toEqual(ips(3).map((ip) => `${ip}:8080#DEFAULT`));
    for (const x of all) {
      expect(x.connection.owners(SERVICE)).toEqual([KEY]);
      expect(x.heartbeats.stats().entries).toBe(0);
      expect(x.connection.beats).toBe(0);
    }
  });

  it('loses no copy when the leader is killed, and the new leader’s change reaches every remaining replica', async () => {
    const [w1, w2, w3] = (await threeReplicas()) as [Replica, Replica, Replica];
    w1.connection.kill();
    w1.sets.stop();
    await w1.engine.stop();
    expect(visible()).toEqual(ips(3).map((ip) => `${ip}:8080#DEFAULT`));

    w2.leading = true;
    source([...ips(3).slice(1), '10.6.1.1']);
    expect(await w2.reconcile()).toMatchObject({ kind: 'synced', upserts: 1, removes: 1 });
    const want = [...ips(3).slice(1), '10.6.1.1'].sort();
    await waitUntil(() => held(w3).join() === want.join(), { message: 'the remaining follower publishes the new set' });
    expect(held(w2)).toEqual(want);
    expect(visible()).toEqual(want.map((ip) => `${ip}:8080#DEFAULT`));
  });

  it('sends nothing more at rest: reconciles that change nothing, by any replica, cost no request', async () => {
    const all = await threeReplicas();
    await Promise.all(all.map((x) => x.sets.idle()));
    const requests = all.map((x) => x.connection.requests);
    for (const x of all) expect(await x.reconcile()).toMatchObject({ kind: 'synced', upserts: 0, removes: 0 });
    await Promise.all(all.map((x) => x.sets.idle()));
    expect(all.map((x) => x.connection.requests)).toEqual(requests);
  });

  it('writes the record back when a replica reconciles a set another replica replaced meanwhile', async () => {
    const [w1, w2, w3] = (await threeReplicas()) as [Replica, Replica, Replica];
    // At rest on w2: the record it keeps is the set as read back (the copies unchanged).
    await w2.reconcile();
    source(ips(4));
    await w1.reconcile();
    await waitUntil(() => held(w3).join() === ips(4).join(), { message: 'the grown set reaches w3' });
    // Back to the set w2 recorded at rest, reconciled by w2: the record must follow, or w1 and w3 keep 10.6.0.4.
    source(ips(3));
    expect(await w2.reconcile()).toMatchObject({ kind: 'synced', removes: 1 });
    await waitUntil(() => [w1, w3].every((x) => held(x).join() === ips(3).join()), { message: 'the first set again everywhere', timeoutMs: 3_000 });
    expect(visible()).toHaveLength(3);
  });

  it('withdraws from every replica when the task is paused, and publishes again from the records when it resumes', async () => {
    const all = await threeReplicas();
    await store.putTask({ ...task, state: 'paused' });
    await Promise.all(all.map((x) => x.engine.taskChanged('t')));
    expect(visible()).toEqual([]);
    for (const x of all) expect(x.connection.owners(SERVICE)).toEqual([]);

    await store.putTask({ ...task, state: 'running' });
    await Promise.all(all.map((x) => x.engine.taskChanged('t')));
    for (const x of all) expect(held(x)).toEqual(ips(3));
    // The leader took the copies over as a resumed task does, and beats none of them.
    for (const x of all) expect(x.heartbeats.stats().entries).toBe(0);
    expect(all.map((x) => x.connection.beats)).toEqual([0, 0, 0]);
  });

  it('withdraws from every replica when the task is removed', async () => {
    const [w1, w2, w3] = (await threeReplicas()) as [Replica, Replica, Replica];
    // As the control bus does it: the others stop the task, one process removes its copies.
    await Promise.all([w2.engine.stopTask('t'), w3.engine.stopTask('t')]);
    await w1.engine.removeTask('t');
    expect(visible()).toEqual([]);
    for (const x of [w1, w2, w3]) expect(x.connection.owners(SERVICE)).toEqual([]);
    expect(await w1.liveSets.load(0)).toEqual(new Map());
    await Promise.all([w1, w2, w3].map((x) => x.sets.idle()));
    expect([w1, w2, w3].map((x) => x.sets.known())).toEqual([0, 0, 0]);
  });

  it('withdraws a shard’s sets when the replica loses the shard, and publishes them when one gains it', async () => {
    const [w1, w2, w3] = (await threeReplicas()) as [Replica, Replica, Replica];
    await w3.sets.serve([]);
    await w3.sets.idle();
    // Within the hand-over grace the lost shard's sets stay published, and follow changes.
    expect(held(w3)).toEqual(ips(3));
    await waitUntil(() => held(w3).length === 0, { message: 'w3 withdraws once the grace is over' });
    expect(held(w1)).toEqual(ips(3));
    expect(visible()).toHaveLength(3);

    const w4 = await replica('w4');
    await w4.sets.idle();
    expect(held(w4)).toEqual(ips(3));
    // Whoever else may die, the copies stay.
    for (const x of [w1, w2]) x.connection.kill();
    expect(visible()).toEqual(ips(3).map((ip) => `${ip}:8080#DEFAULT`));
  });

  it('retries a publish the registry rejected', async () => {
    const [w1, w2] = (await threeReplicas()) as [Replica, Replica, Replica];
    w2.connection.failWrites = new Error('stream reset');
    source(ips(4));
    await w1.reconcile();
    await waitUntil(() => w2.connection.calls.filter((c) => c.startsWith('publish')).length >= 3, { message: 'w2 retries' });
    expect(held(w2)).toEqual(ips(3));
    w2.connection.failWrites = undefined;
    await waitUntil(() => held(w2).join() === ips(4).join(), { message: 'w2 publishes once the registry accepts' });
  });
});
