import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { ReadPayload } from '../../../adapters/nacos/grpc/payload.js';
import { startRegistry, type RegistryOptions, type RunningRegistry } from '../registry-server.js';
import { TestGrpcClient } from '../../../test/support/grpc-client.js';
import { waitUntil } from '../../../test/support/wait-until.js';

type Context = { serviceKey: string; changedType: string };

const instance = (ip: string) => ({ ip, port: 80, weight: 1, healthy: true, enabled: true, ephemeral: false, clusterName: 'DEFAULT', metadata: {} });

/** Nacos 3.x fuzzy watch against the embedded registry, over the real @grpc/grpc-js client. */
describe('embedded registry gRPC: fuzzy watch', () => {
  const running: RunningRegistry[] = [];
  let clients: TestGrpcClient[] = [];
  let registry: RunningRegistry;

  const start = async (options: RegistryOptions = {}) => {
    const r = await startRegistry({ port: 0, ...options, grpc: { pushMergeWindowMs: 20, ...options.grpc } });
    running.push(r);
    return r;
  };
  const connect = async (r: RunningRegistry = registry) => {
    const c = await TestGrpcClient.connect(r.grpcEndpoint as string);
    clients.push(c);
    return c;
  };
  const watch = (c: TestGrpcClient, pattern: string, fields: { receivedGroupKeys?: string[]; initializing?: boolean; watchType?: string } = {}) =>
    c.call('NamingFuzzyWatchRequest', {
      headers: {},
      namespace: pattern.split('>>')[0],
      groupKeyPattern: pattern,
      receivedGroupKeys: [],
      watchType: 'WATCH',
      initializing: true,
      ...fields,
      module: 'naming',
    });
  const syncs = (c: TestGrpcClient, pattern: string) =>
    c.received.filter((m) => m.type === 'NamingFuzzyWatchSyncRequest' && m.body.groupKeyPattern === pattern);
  const finished = (c: TestGrpcClient, pattern: string) => syncs(c, pattern).filter((m) => m.body.syncType === 'FINISH_FUZZY_WATCH_INIT_NOTIFY');
  const contextsOf = (messages: ReadPayload[], syncType: string) =>
    messages.filter((m) => m.body.syncType === syncType).flatMap((m) => m.body.contexts as Context[]);
  const changes = (c: TestGrpcClient) =>
    c.received.filter((m) => m.type === 'NamingFuzzyWatchChangeNotifyRequest').map((m) => `${String(m.body.changedType)} ${String(m.body.serviceKey)}`);
  const add = (r: RunningRegistry, ns: string, group: string, name: string, ip = '10.0.0.1') => r.store.register(ns, group, name, instance(ip));
  const drop = (r: RunningRegistry, ns: string, group: string, name: string, ip = '10.0.0.1') => r.store.deregister(ns, group, name, ip, 80, 'DEFAULT');

  beforeAll(async () => {
    registry = await start();
  });
  afterEach(() => {
    for (const c of clients) c.close();
    clients = [];
  });
  afterAll(async () => {
    await Promise.all(running.map((r) => r.close()));
  });

  it('advertises fuzzyWatch and answers a WATCH with the matched set in batches of 10, then FINISH once every batch is acked', async () => {
    const expected: string[] = [];
    for (let n = 0; n < 23; n++) {
      add(registry, 'public', 'INIT', `order-${n}`);
      expected.push(`public@@INIT@@order-${n}`);
    }
    add(registry, 'public', 'INIT', 'users');
    add(registry, 'public', 'OTHER', 'order-x');
    add(registry, 'staging', 'INIT', 'order-y');
    const c = await connect();
    expect(c.received.find((m) => m.type === 'SetupAckRequest')?.body.abilityTable).toMatchObject({ fuzzyWatch: true });
    // The first batch goes unanswered once: FINISH waits for its retry to be acked.
    let refused = false;
    c.answer = (request) => {
      const ok = { type: 'NamingFuzzyWatchSyncResponse', body: { resultCode: 200, errorCode: 0, requestId: request.body.requestId, success: true } };
      if (request.body.currentBatch === 1 && request.body.syncType === 'FUZZY_WATCH_INIT_NOTIFY' && !refused) {
        refused = true;
        return { type: 'NamingFuzzyWatchSyncResponse', body: { resultCode: 500, errorCode: 500, requestId: request.body.requestId, success: false } };
      }
      return ok;
    };
    const pattern = 'public>>INIT>>order*';
    const answer = await watch(c, pattern);
    expect(answer).toMatchObject({ type: 'NamingFuzzyWatchResponse', body: { resultCode: 200, success: true } });
    await waitUntil(() => finished(c, pattern).length === 1, { message: 'FINISH' });
    const messages = syncs(c, pattern);
    const inits = messages.filter((m) => m.body.syncType === 'FUZZY_WATCH_INIT_NOTIFY');
    // Three batches, the first sent twice; FINISH comes last.
    expect(new Set(inits.map((m) => m.body.currentBatch))).toEqual(new Set([1, 2, 3]));
    expect(inits.every((m) => m.body.totalBatch === 3 && (m.body.contexts as Context[]).length <= 10)).toBe(true);
    expect(messages.at(-1)?.body).toMatchObject({ syncType: 'FINISH_FUZZY_WATCH_INIT_NOTIFY', contexts: [], totalBatch: 1, currentBatch: 1, module: 'naming' });
    const keys = [...new Set(contextsOf(inits, 'FUZZY_WATCH_INIT_NOTIFY').map((x) => x.serviceKey))].sort();
    expect(keys).toEqual(expected.sort());
    expect(contextsOf(inits, 'FUZZY_WATCH_INIT_NOTIFY').every((x) => x.changedType === 'ADD_SERVICE')).toBe(true);

    // A pattern nothing matches: FINISH alone.
    await watch(c, 'public>>NONE>>*');
    await waitUntil(() => finished(c, 'public>>NONE>>*').length === 1);
    expect(syncs(c, 'public>>NONE>>*')).toHaveLength(1);
  });

  it('notifies ADD_SERVICE on a service’s first instance and DELETE_SERVICE on its last, to every connection whose pattern matches', async () => {
    const a = await connect();
    const b = await connect();
    const bystander = await connect();
    await watch(a, 'public>>CHG>>*');
    await watch(b, 'public>>*>>pay*');
    await watch(bystander, 'staging>>CHG>>*');
    await waitUntil(() => finished(a, 'public>>CHG>>*').length === 1 && finished(b, 'public>>*>>pay*').length === 1);
    add(registry, 'public', 'CHG', 'payments', '10.0.0.1');
    await waitUntil(() => changes(a).length === 1 && changes(b).length === 1);
    expect(changes(a)).toEqual(['ADD_SERVICE public@@CHG@@payments']);
    expect(changes(b)).toEqual(['ADD_SERVICE public@@CHG@@payments']);
    // More instances, and fewer, are no change of the set; the last one going is.
    add(registry, 'public', 'CHG', 'payments', '10.0.0.2');
    drop(registry, 'public', 'CHG', 'payments', '10.0.0.1');
    add(registry, 'public', 'CHG', 'ledger');
    await waitUntil(() => changes(a).length === 2);
    drop(registry, 'public', 'CHG', 'payments', '10.0.0.2');
    await waitUntil(() => changes(a).length === 3 && changes(b).length === 2);
    expect(changes(a)).toEqual(['ADD_SERVICE public@@CHG@@payments', 'ADD_SERVICE public@@CHG@@ledger', 'DELETE_SERVICE public@@CHG@@payments']);
    expect(changes(b)).toEqual(['ADD_SERVICE public@@CHG@@payments', 'DELETE_SERVICE public@@CHG@@payments']);
    const body = a.received.find((m) => m.type === 'NamingFuzzyWatchChangeNotifyRequest')?.body;
    expect(body).toMatchObject({ syncType: 'FUZZY_WATCH_RESOURCE_CHANGED', module: 'naming' });
    expect(typeof body?.requestId).toBe('string');
    expect(changes(bystander)).toEqual([]);

    // CANCEL_WATCH stops the notifies.
    expect((await watch(a, 'public>>CHG>>*', { watchType: 'CANCEL_WATCH' })).body).toMatchObject({ resultCode: 200 });
    add(registry, 'public', 'CHG', 'payments-v2');
    await waitUntil(() => changes(b).length === 3);
    expect(changes(a)).toHaveLength(3);
  });

  it('answers a re-WATCH (initializing false) with the DIFF against receivedGroupKeys, or nothing when equal', async () => {
    add(registry, 'public', 'DIFF', 'kept');
    add(registry, 'public', 'DIFF', 'fresh');
    const c = await connect();
    const pattern = 'public>>DIFF>>*';
    await watch(c, pattern, { initializing: false, receivedGroupKeys: ['public@@DIFF@@kept', 'public@@DIFF@@gone'] });
    await waitUntil(() => syncs(c, pattern).length === 1);
    expect(syncs(c, pattern)[0]?.body).toMatchObject({ syncType: 'FUZZY_WATCH_DIFF_SYNC_NOTIFY', totalBatch: 1, currentBatch: 1 });
    expect(contextsOf(syncs(c, pattern), 'FUZZY_WATCH_DIFF_SYNC_NOTIFY').sort((x, y) => x.serviceKey.localeCompare(y.serviceKey))).toEqual([
      { serviceKey: 'public@@DIFF@@fresh', changedType: 'ADD_SERVICE' },
      { serviceKey: 'public@@DIFF@@gone', changedType: 'DELETE_SERVICE' },
    ]);
    // In sync: nothing is sent (the FINISH of a later watch shows the stream got that far).
    await watch(c, pattern, { initializing: false, receivedGroupKeys: ['public@@DIFF@@kept', 'public@@DIFF@@fresh'] });
    await watch(c, 'public>>DIFF-MARK>>*');
    await waitUntil(() => finished(c, 'public>>DIFF-MARK>>*').length === 1);
    expect(syncs(c, pattern)).toHaveLength(1);
    // An INIT with what the client holds: only the difference, then FINISH.
    await watch(c, pattern, { initializing: true, receivedGroupKeys: ['public@@DIFF@@kept'] });
    await waitUntil(() => finished(c, pattern).length === 1);
    expect(contextsOf(syncs(c, pattern), 'FUZZY_WATCH_INIT_NOTIFY')).toEqual([{ serviceKey: 'public@@DIFF@@fresh', changedType: 'ADD_SERVICE' }]);
  });

  it('refuses bad requests and forgets a connection’s watches when it goes', async () => {
    const r = await start();
    const c = await connect(r);
    expect((await watch(c, 'public>>x>>*', { watchType: 'LISTEN' })).body).toMatchObject({ resultCode: 500, errorCode: 400 });
    expect((await watch(c, 'public>>x')).body).toMatchObject({ resultCode: 500, errorCode: 400 });
    await watch(c, 'public>>x>>*');
    await watch(c, 'public>>y>>*');
    expect(r.grpc?.stats().fuzzyWatch).toMatchObject({ patterns: 2, watches: 2 });
    c.close();
    await waitUntil(() => r.grpc?.stats().fuzzyWatch?.patterns === 0);
  });

  it('holds at most maxPatterns patterns (50310) and maxServices services per pattern (50311, with the capped set synced)', async () => {
    const r = await start({ grpc: { fuzzyWatchMaxPatterns: 2, fuzzyWatchMaxServices: 3 } });
    for (const name of ['s1', 's2', 's3', 's4', 's5']) add(r, 'public', 'CAP', name);
    const c = await connect(r);
    expect((await watch(c, 'public>>A>>*')).body.resultCode).toBe(200);
    const capped = await watch(c, 'public>>CAP>>*');
    expect(capped).toMatchObject({ type: 'NamingFuzzyWatchResponse', body: { resultCode: 500, errorCode: 50311, message: 'fuzzy watch pattern matched count over limit' } });
    await waitUntil(() => finished(c, 'public>>CAP>>*').length === 1);
    const synced = contextsOf(syncs(c, 'public>>CAP>>*'), 'FUZZY_WATCH_INIT_NOTIFY').map((x) => x.serviceKey);
    expect(synced).toHaveLength(3);

    // A third pattern is over the limit; one already held is not.
    expect((await watch(c, 'public>>B>>*')).body).toMatchObject({ resultCode: 500, errorCode: 50310, message: 'fuzzy watch pattern over limit' });
    expect((await watch(c, 'public>>A>>*')).body.resultCode).toBe(200);

    // At the cap a new service is not added; a deleted one is notified and the set refills from the namespace.
    add(r, 'public', 'CAP', 's6');
    const [first] = synced;
    const name = (first as string).split('@@')[2] as string;
    drop(r, 'public', 'CAP', name);
    await waitUntil(() => changes(c).length === 1);
    expect(changes(c)).toEqual([`DELETE_SERVICE public@@CAP@@${name}`]);
    // At the cap a re-WATCH leaves DELETE entries out (the set may be incomplete) and answers 50311 again.
    const again = await watch(c, 'public>>CAP>>*', { initializing: false, receivedGroupKeys: ['public@@CAP@@unknown'] });
    expect(again.body.errorCode).toBe(50311);
    await waitUntil(() => contextsOf(syncs(c, 'public>>CAP>>*'), 'FUZZY_WATCH_DIFF_SYNC_NOTIFY').length === 3);
    expect(contextsOf(syncs(c, 'public>>CAP>>*'), 'FUZZY_WATCH_DIFF_SYNC_NOTIFY').every((x) => x.changedType === 'ADD_SERVICE')).toBe(true);

    // A pattern nobody watches frees its slot.
    await watch(c, 'public>>A>>*', { watchType: 'CANCEL_WATCH' });
    expect((await watch(c, 'public>>B>>*')).body.resultCode).toBe(200);
  });

  it('builds the matched set of a namespace larger than one scan slice, complete, and syncs it whole', async () => {
    const r = await start({ grpc: { fuzzyWatchMaxServices: 100_000 } });
    for (let n = 0; n < 12_000; n++) add(r, 'big', 'G', `svc-${n}`);
    const c = await connect(r);
    const pattern = 'big>>G>>*';
    expect((await watch(c, pattern)).body.resultCode).toBe(200);
    await waitUntil(() => finished(c, pattern).length === 1, { timeoutMs: 30_000 });
    const inits = syncs(c, pattern).filter((m) => m.body.syncType === 'FUZZY_WATCH_INIT_NOTIFY');
    expect(inits).toHaveLength(1_200);
    expect(new Set(contextsOf(inits, 'FUZZY_WATCH_INIT_NOTIFY').map((x) => x.serviceKey)).size).toBe(12_000);
  });

  it('without fuzzy watch answers as Nacos 2.x: no ability, no handler (302)', async () => {
    const r = await start({ grpc: { fuzzyWatch: false } });
    const c = await connect(r);
    expect(c.received.find((m) => m.type === 'SetupAckRequest')?.body.abilityTable).toEqual({ supportPersistentInstanceByGrpc: true });
    expect(await watch(c, 'public>>*>>*')).toMatchObject({ type: 'ErrorResponse', body: { resultCode: 500, errorCode: 302 } });
  });
});
