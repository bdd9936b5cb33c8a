import * as grpc from '@grpc/grpc-js';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { MARK_TASK, type Instance } from '../../../src/model/index.js';
import { waitUntil } from '../../../test/support/wait-until.js';
import { createNacosAdapter, type NacosAdapter } from '../nacos-adapter.js';
import { readServiceInfo } from './messages.js';
import { nacosGrpcServices, readPayload, toPayload, type Payload, type ReadPayload } from './payload.js';

/*
 * What regsync writes on the wire, frame by frame, against the examples of the reference
 * (`../shared/reference/nacos-grpc.md`, sections 3, 6 and 7): a recording server built from the
 * same interface definition answers like Nacos and keeps every payload it receives, decoded by
 * @grpc/grpc-js from the bytes the adapter sent.
 */

const silent = pino({ level: 'silent' });

interface Recorder {
  port: number;
  unary: ReadPayload[];
  stream: ReadPayload[];
  /** Writes a server request on the adapter's stream. */
  send(type: string, body: Record<string, unknown>): void;
  /** While set, `ServiceQueryRequest`s are answered only by {@link releaseHeld}. */
  holdQueries: boolean;
  held: Array<() => void>;
  releaseHeld(): void;
  close(): Promise<void>;
}

async function recordingServer(abilities: Record<string, boolean> = { supportPersistentInstanceByGrpc: true }): Promise<Recorder> {
  const { Request, BiRequestStream } = nacosGrpcServices();
  const server = new grpc.Server();
  const unary: ReadPayload[] = [];
  const stream: ReadPayload[] = [];
  const streams: Array<grpc.ServerDuplexStream<Payload, Payload>> = [];
  const recorder = { holdQueries: false, held: [] as Array<() => void> } as Recorder;
  const answers: Record<string, [string, Record<string, unknown>]> = {
    ServerCheckRequest: ['ServerCheckResponse', { connectionId: '1_127.0.0.1_1', supportAbilityNegotiation: true }],
    SubscribeServiceRequest: ['SubscribeServiceResponse', { serviceInfo: { name: 'orders', groupName: 'DEFAULT_GROUP', clusters: '', hosts: [], allIPs: false } }],
    ServiceQueryRequest: ['QueryServiceResponse', { serviceInfo: { name: 'orders', groupName: 'DEFAULT_GROUP', clusters: '', hosts: [], allIps: false } }],
    ServiceListRequest: ['ServiceListResponse', { count: 1, serviceNames: ['orders'] }],
    BatchInstanceRequest: ['BatchInstanceResponse', { type: 'batchRegisterInstance' }],
    HealthCheckRequest: ['HealthCheckResponse', {}],
    NamingFuzzyWatchRequest: ['NamingFuzzyWatchResponse', {}],
  };
  server.addService(Request.service, {
    request(call: grpc.ServerUnaryCall<Payload, Payload>, callback: grpc.sendUnaryData<Payload>) {
      const read = readPayload(call.request);
      unary.push(read);
      const [type, fields] = answers[read.type] ?? ['ErrorResponse', { resultCode: 500, errorCode: 302 }];
      const answer = () => callback(null, toPayload(type, { resultCode: 200, errorCode: 0, ...fields, success: true }));
      if (recorder.holdQueries && read.type === 'ServiceQueryRequest') recorder.held.push(answer);
      else answer();
    },
  });
  server.addService(BiRequestStream.service, {
    requestBiStream(call: grpc.ServerDuplexStream<Payload, Payload>) {
      streams.push(call);
      call.on('data', (payload: Payload) => {
        const read = readPayload(payload);
        stream.push(read);
        if (read.type === 'ConnectionSetupRequest') call.write(toPayload('SetupAckRequest', { headers: {}, abilityTable: abilities, module: 'internal' }));
      });
      call.on('error', () => undefined);
    },
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, bound) => (err ? reject(err) : resolve(bound))),
  );
  Object.assign(recorder, {
    port,
    unary,
    stream,
    send: (type: string, body: Record<string, unknown>) => {
      for (const s of streams) s.write(toPayload(type, body));
    },
    releaseHeld: () => {
      for (const answer of recorder.held.splice(0)) answer();
    },
    close: async () => {
      // Calls held unanswered would keep a graceful shutdown waiting.
      server.forceShutdown();
    },
  });
  return recorder;
}

const recorders: Recorder[] = [];
const adapters: NacosAdapter[] = [];
afterEach(async () => {
  await Promise.all(adapters.splice(0).map((a) => a.close()));
  await Promise.all(recorders.splice(0).map((r) => r.close()));
});

async function setup(options: Record<string, unknown> = {}, abilities?: Record<string, boolean>): Promise<{ rec: Recorder; adapter: NacosAdapter }> {
  const rec = await recordingServer(abilities);
  recorders.push(rec);
  // HTTP is never asked: the endpoint's HTTP port is closed on purpose (port 1 on loopback).
  const adapter = createNacosAdapter({ id: 'w', kind: 'nacos', endpoints: ['127.0.0.1:1'], labels: {}, options: { apiVersion: 'grpc', grpcPort: rec.port, requestTimeoutMs: 2_000, ...options } }, { logger: silent });
  adapters.push(adapter);
  return { rec, adapter };
}

const body = (frames: ReadPayload[], type: string) => frames.find((f) => f.type === type);

describe('Nacos gRPC frames regsync sends', () => {
  it('opens as the reference says: ServerCheck, then a naming ConnectionSetupRequest on the stream', async () => {
    const { rec, adapter } = await setup();
    await adapter.listInstances({ namespace: '', group: '', name: 'orders' });
    expect(rec.unary[0]?.type).toBe('ServerCheckRequest');
    expect(JSON.stringify(rec.unary[0]?.body)).toBe('{"headers":{},"module":"internal"}');
    const opening = body(rec.stream, 'ConnectionSetupRequest');
    expect(opening?.body).toEqual({ headers: {}, clientVersion: 'regsync', tenant: '', labels: { source: 'sdk', module: 'naming', AppName: 'regsync' }, abilityTable: {}, module: 'internal' });
  });

  it('names the public namespace `public`, never blank, with plain name and group apart', async () => {
    const { rec, adapter } = await setup();
    await adapter.listInstances({ namespace: '', group: '', name: 'orders' });
    expect(body(rec.unary, 'ServiceQueryRequest')?.body).toEqual({
      headers: {},
      namespace: 'public',
      serviceName: 'orders',
      groupName: 'DEFAULT_GROUP',
      cluster: '',
      healthyOnly: false,
      udpPort: 0,
      module: 'naming',
    });
  });

  it('fuzzy-watches a scope with the reference’s fields and answers the sync and change notifies with their requestId', async () => {
    const { rec, adapter } = await setup({}, { supportPersistentInstanceByGrpc: true, fuzzyWatch: true });
    adapter.watchServices({ namespace: '', group: 'DEFAULT_GROUP' }, () => {});
    await waitUntil(() => body(rec.unary, 'NamingFuzzyWatchRequest') !== undefined);
    expect(body(rec.unary, 'NamingFuzzyWatchRequest')?.body).toEqual({
      headers: {},
      namespace: 'public',
      groupKeyPattern: 'public>>DEFAULT_GROUP>>*',
      receivedGroupKeys: [],
      watchType: 'WATCH',
      initializing: true,
      module: 'naming',
    });
    rec.send('NamingFuzzyWatchSyncRequest', {
      headers: {},
      requestId: '21',
      syncType: 'FUZZY_WATCH_INIT_NOTIFY',
      groupKeyPattern: 'public>>DEFAULT_GROUP>>*',
      contexts: [{ serviceKey: 'public@@DEFAULT_GROUP@@orders', changedType: 'ADD_SERVICE' }],
      totalBatch: 1,
      currentBatch: 1,
      module: 'naming',
    });
    rec.send('NamingFuzzyWatchChangeNotifyRequest', {
      headers: {},
      requestId: '22',
      syncType: 'FUZZY_WATCH_RESOURCE_CHANGED',
      serviceKey: 'public@@DEFAULT_GROUP@@orders-v2',
      changedType: 'ADD_SERVICE',
      module: 'naming',
    });
    await waitUntil(() => rec.stream.length >= 3);
    expect(rec.stream.slice(1).map((f) => [f.type, f.body])).toEqual([
      ['NamingFuzzyWatchSyncResponse', { resultCode: 200, errorCode: 0, requestId: '21', success: true }],
      ['NamingFuzzyWatchChangeNotifyResponse', { resultCode: 200, errorCode: 0, requestId: '22', success: true }],
    ]);
  });

  it('subscribes and lists with the reference’s fields', async () => {
    const { rec, adapter } = await setup();
    adapter.watch({ namespace: 'dev', group: 'G', name: 'orders' }, () => {});
    await waitUntil(() => body(rec.unary, 'SubscribeServiceRequest') !== undefined);
    expect(body(rec.unary, 'SubscribeServiceRequest')?.body).toEqual({ headers: {}, namespace: 'dev', serviceName: 'orders', groupName: 'G', subscribe: true, clusters: '', module: 'naming' });
    await adapter.listServices({ namespace: 'dev', group: 'G' });
    expect(body(rec.unary, 'ServiceListRequest')?.body).toEqual({ headers: {}, namespace: 'dev', serviceName: '', groupName: 'G', pageNo: 1, pageSize: 500, module: 'naming' });
  });

  it('publishes a service’s whole set as one batchRegisterInstance with explicit ids and sorted metadata', async () => {
    const { rec, adapter } = await setup();
    const copy: Instance = { ip: '10.0.0.1', port: 8080, weight: 2, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: { zone: 'a', [MARK_TASK]: 't' } };
    await adapter.publish({ namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' }, 'k', [copy]);
    const batch = body(rec.unary, 'BatchInstanceRequest');
    expect(batch?.body).toEqual({
      headers: {},
      namespace: 'public',
      serviceName: 'orders',
      groupName: 'DEFAULT_GROUP',
      type: 'batchRegisterInstance',
      instances: [
        {
          instanceId: '10.0.0.1#8080#DEFAULT#DEFAULT_GROUP@@orders',
          ip: '10.0.0.1',
          port: 8080,
          weight: 2,
          healthy: true,
          enabled: true,
          ephemeral: true,
          clusterName: 'DEFAULT',
          serviceName: 'DEFAULT_GROUP@@orders',
          metadata: { [MARK_TASK]: 't', zone: 'a' },
        },
      ],
      module: 'naming',
    });
    expect(Object.keys((batch?.body.instances as Array<{ metadata: object }>)[0]?.metadata ?? {})).toEqual([MARK_TASK, 'zone']);
  });

  it('answers server requests on the stream with the response class and the same requestId, and never answers SetupAck', async () => {
    const { rec, adapter } = await setup();
    adapter.watch({ namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' }, () => {});
    await waitUntil(() => body(rec.unary, 'SubscribeServiceRequest') !== undefined);
    rec.send('NotifySubscriberRequest', { headers: {}, requestId: '17', serviceInfo: { name: 'orders', groupName: 'DEFAULT_GROUP', clusters: '', hosts: [], allIps: false }, module: 'naming' });
    rec.send('ClientDetectionRequest', { headers: {}, requestId: '18', module: 'internal' });
    await waitUntil(() => rec.stream.length >= 3);
    const answers = rec.stream.filter((f) => f.type !== 'ConnectionSetupRequest');
    expect(answers.map((a) => [a.type, a.body.requestId, a.body.resultCode])).toEqual([
      ['NotifySubscriberResponse', '17', 200],
      ['ClientDetectionResponse', '18', 200],
    ]);
  });

  it('answers a ConnectResetRequest, then connects again and sets up anew', async () => {
    const { rec, adapter } = await setup();
    await adapter.listInstances({ namespace: '', group: '', name: 'orders' });
    rec.send('ConnectResetRequest', { headers: {}, requestId: '5', module: 'internal' });
    await waitUntil(() => rec.stream.filter((f) => f.type === 'ConnectionSetupRequest').length === 2, { message: 'a second setup' });
    expect(rec.stream.find((f) => f.type === 'ConnectResetResponse')?.body).toMatchObject({ resultCode: 200, requestId: '5' });
    expect(rec.unary.filter((f) => f.type === 'ServerCheckRequest')).toHaveLength(2);
    await waitUntil(() => adapter.stats().grpc?.state === 'ready' && adapter.stats().grpc?.reconnects === 1);
  });

  it('keeps at most maxConcurrency requests in flight on the connection; the rest queue', async () => {
    const { rec, adapter } = await setup({ maxConcurrency: 3 });
    await adapter.listServices({ namespace: 'public', group: 'DEFAULT_GROUP' });
    rec.holdQueries = true;
    const reads = Array.from({ length: 10 }, (_, i) => adapter.listInstances({ namespace: 'public', group: 'DEFAULT_GROUP', name: `s${i}` }));
    await waitUntil(() => rec.held.length === 3);
    // Unlimited, the ten go out in one burst; limited, the fourth waits for an answer.
    expect(rec.unary.filter((f) => f.type === 'ServiceQueryRequest')).toHaveLength(3);
    rec.holdQueries = false;
    rec.releaseHeld();
    expect(await Promise.all(reads)).toHaveLength(10);
    expect(rec.unary.filter((f) => f.type === 'ServiceQueryRequest')).toHaveLength(10);
  });

  it('reads both spellings of the all-IPs flag, and the plain name apart from its group', () => {
    expect(readServiceInfo({ name: 'orders', groupName: 'G', hosts: [], allIPs: true }).allIps).toBe(true);
    expect(readServiceInfo({ name: 'orders', groupName: 'G', hosts: [], allIps: true }).allIps).toBe(true);
    expect(readServiceInfo({ name: 'G@@orders', hosts: [] })).toMatchObject({ name: 'orders', groupName: 'G' });
  });
});
