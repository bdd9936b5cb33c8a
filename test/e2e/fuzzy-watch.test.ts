import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../../src/registry/index.js';
import { addRegistry, copiesIn, defineGrpcClusters, defineTask, persistent, startFixture, startSync, stopFixture, type SyncFixture } from '../support/sync-fixture.js';
import { waitUntil } from '../support/wait-until.js';

const fastPush = { grpc: { pushMergeWindowMs: 50 } };

/**
 * A `*` task over gRPC whose source serves Nacos 3.x fuzzy watch: new and removed services are
 * pushed, and the task's lists come from the pushed set. The service-list poll is set to 10 min,
 * so that only a push can tell the task of a new service within the test.
 */
describe('a * task learns services by fuzzy watch', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;
  const listRequests = () => a.grpc?.stats().requests.ServiceListRequest ?? 0;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', fastPush);
    b = await addRegistry(fx, 'b', fastPush);
    a.store.register('public', 'DEFAULT_GROUP', 'orders', persistent('10.81.0.1'));
    a.store.register('public', 'DEFAULT_GROUP', 'users', persistent('10.81.0.2'));
    const url = (await startSync(fx)).url as string;
    await defineGrpcClusters(url, fx, {}, { serviceListPollIntervalMs: 600_000, warmupSeconds: 1 });
    await defineTask(url, 'all', 'a', 'b', '*');
  }, 60_000);
  afterAll(async () => {
    await stopFixture(fx);
  });

  it('copies a service registered after the task started, and removes the copies of a removed one, with no ServiceListRequest', async () => {
    await waitUntil(() => copiesIn(b, 'orders').length === 1 && copiesIn(b, 'users').length === 1, { message: 'first copies' });
    await waitUntil(() => a.grpc?.stats().fuzzyWatch?.watches === 1, { message: 'the task watches its scope' });
    // Found by push only: the poll would take 10 min.
    a.store.register('public', 'DEFAULT_GROUP', 'probe', persistent('10.81.0.3'));
    await waitUntil(() => copiesIn(b, 'probe').length === 1, { message: 'probe copied' });
    const listed = listRequests();

    a.store.register('public', 'DEFAULT_GROUP', 'fresh', persistent('10.81.0.4'));
    await waitUntil(() => copiesIn(b, 'fresh').length === 1, { message: 'fresh copied' });
    a.store.deregister('public', 'DEFAULT_GROUP', 'users', '10.81.0.2', 8080, 'DEFAULT');
    await waitUntil(() => copiesIn(b, 'users').length === 0, { timeoutMs: 20_000, message: 'copies of users removed' });
    expect(copiesIn(b, 'orders')).toHaveLength(1);
    expect(listRequests()).toBe(listed);
  });

  it('after the source restarts on the same ports (a new connection), still picks up a new service', async () => {
    const { port, grpcPort } = a;
    await a.close();
    a = await startRegistry({ port, grpcPort: grpcPort as number, ...fastPush });
    fx.registries.set('a', a);
    // The restarted source has its services back (re-registered), and one more.
    for (const [name, ip] of [['orders', '10.81.0.1'], ['probe', '10.81.0.3'], ['fresh', '10.81.0.4'], ['after-restart', '10.81.0.5']] as const) {
      a.store.register('public', 'DEFAULT_GROUP', name, persistent(ip));
    }
    await waitUntil(() => a.grpc?.stats().fuzzyWatch?.watches === 1, { timeoutMs: 15_000, message: 'watching the restarted source' });
    await waitUntil(() => copiesIn(b, 'after-restart').length === 1, { timeoutMs: 15_000, message: 'after-restart copied' });
    a.store.register('public', 'DEFAULT_GROUP', 'later', persistent('10.81.0.6'));
    await waitUntil(() => copiesIn(b, 'later').length === 1, { message: 'later copied' });
    expect(copiesIn(b, 'orders')).toHaveLength(1);
  });
});

describe('a * task against a source without fuzzy watch (Nacos 2.x)', () => {
  let fx: SyncFixture;
  let a: RunningRegistry;
  let b: RunningRegistry;

  beforeAll(async () => {
    fx = await startFixture();
    a = await addRegistry(fx, 'a', { grpc: { ...fastPush.grpc, fuzzyWatch: false } });
    b = await addRegistry(fx, 'b', fastPush);
    a.store.register('public', 'DEFAULT_GROUP', 'orders', persistent('10.82.0.1'));
    const url = (await startSync(fx)).url as string;
    await defineGrpcClusters(url, fx, {}, { serviceListPollIntervalMs: 300 });
    await defineTask(url, 'all', 'a', 'b', '*');
  }, 60_000);
  afterAll(async () => {
    await stopFixture(fx);
  });

  it('lists the scope by polling, and copies a new service at a poll', async () => {
    await waitUntil(() => copiesIn(b, 'orders').length === 1, { message: 'first copy' });
    const listed = a.grpc?.stats().requests.ServiceListRequest ?? 0;
    a.store.register('public', 'DEFAULT_GROUP', 'fresh', persistent('10.82.0.2'));
    await waitUntil(() => copiesIn(b, 'fresh').length === 1, { message: 'fresh copied' });
    expect(a.grpc?.stats().requests.ServiceListRequest ?? 0).toBeGreaterThan(listed);
    expect(a.grpc?.stats().requests.NamingFuzzyWatchRequest ?? 0).toBe(0);
  });
});
