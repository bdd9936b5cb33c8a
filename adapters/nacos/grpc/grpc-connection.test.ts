import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { startRegistry, type RegistryOptions, type RunningRegistry } from '../../../src/registry/index.js';
import { freePort } from '../../../test/support/ports.js';
import { waitUntil } from '../../../test/support/wait-until.js';
import { NacosRequestError } from '../nacos-request-error.js';
import { answersGrpc, GrpcConnection, type GrpcConnectionOptions, type GrpcEndpoint } from './grpc-connection.js';
import { internalRequest, REQUEST } from './messages.js';

const log = pino({ level: 'silent' });
const registries: RunningRegistry[] = [];
const connections: GrpcConnection[] = [];

afterEach(async () => {
  for (const c of connections.splice(0)) c.close();
  await Promise.all(registries.splice(0).map((r) => r.close()));
});

async function registry(options: RegistryOptions = {}): Promise<RunningRegistry> {
  const r = await startRegistry({ port: 0, ...options });
  registries.push(r);
  return r;
}

const endpointOf = (port: number): GrpcEndpoint => ({ host: '127.0.0.1', port, label: `127.0.0.1:${port}` });

function connection(endpoints: GrpcEndpoint[], over: Partial<GrpcConnectionOptions> = {}): { conn: GrpcConnection; connected: number[] } {
  const connected: number[] = [];
  const conn = new GrpcConnection({
    clusterId: 'c',
    endpoints,
    log,
    clientIp: '127.0.0.1',
    requestTimeoutMs: 2_000,
    onPush: () => {},
    onConnected: (generation) => connected.push(generation),
    timings: { reconnectStepMs: 20 },
    ...over,
  });
  connections.push(conn);
  return { conn, connected };
}

describe('GrpcConnection', () => {
  it('sets up as a naming SDK connection: ServerCheck, setup with module naming, the setup ack, then requests', async () => {
    const r = await registry();
    const { conn, connected } = connection([endpointOf(r.grpcPort as number)]);
    await conn.ready();
    expect(connected).toEqual([1]);
    expect(conn.stats()).toMatchObject({ state: 'ready', reconnects: 0, abilities: { supportPersistentInstanceByGrpc: true } });
    const [server] = r.grpc?.connections() ?? [];
    expect(server?.setup.labels).toMatchObject({ module: 'naming', source: 'sdk' });
    expect(server?.setup.clientIp).toBe('127.0.0.1');
    expect(server?.id).toBe(conn.stats().connectionId);
    const answer = await conn.request(REQUEST.healthCheck, internalRequest());
    expect(answer.resultCode).toBe(200);
  });

  it('answers the server’s ClientDetectionRequest, so an idle connection is kept', async () => {
    const r = await registry({ grpc: { staleAfterMs: 100, detectionIntervalMs: 50, detectionTimeoutMs: 1_000 } });
    // No health checks of its own: only answering the detection keeps the connection.
    const { conn } = connection([endpointOf(r.grpcPort as number)], { timings: { keepAliveMs: 600_000 } });
    await conn.ready();
    const id = conn.stats().connectionId;
    const detected = () => (r.grpc?.connections()[0]?.lastActiveAt ?? 0);
    const first = detected();
    await waitUntil(() => detected() > first + 200, { message: 'several detections answered' });
    expect(r.grpc?.stats().connections).toBe(1);
    expect(conn.stats()).toMatchObject({ state: 'ready', connectionId: id, reconnects: 0 });
  });

  it('fails over to the next endpoint when one does not answer', async () => {
    const dead = await freePort();
    const r = await registry();
    const { conn } = connection([endpointOf(dead), endpointOf(r.grpcPort as number)]);
    await conn.ready();
    expect(conn.stats().endpoint).toBe(`127.0.0.1:${r.grpcPort}`);
  });

  it('connects again, with a new connection id, after the server went away and came back', async () => {
    const r = await registry();
    const { port, grpcPort } = r;
    const { conn, connected } = connection([endpointOf(grpcPort as number)], { timings: { keepAliveMs: 100, reconnectStepMs: 20 } });
    await conn.ready();
    const before = conn.stats().connectionId;
    await r.close();
    registries.splice(0);
    await waitUntil(() => !conn.isReady, { message: 'the loss noticed' });
    await registry({ port, grpcPort });
    await conn.ready(10_000);
    expect(connected).toEqual([1, 2]);
    expect(conn.stats().reconnects).toBe(1);
    expect(conn.stats().connectionId).not.toBe(before);
  });

  it('rejects a request with the endpoints named when no connection comes within the timeout', async () => {
    const dead = await freePort();
    const { conn } = connection([endpointOf(dead)], { requestTimeoutMs: 300 });
    const error = await conn.request(REQUEST.healthCheck, internalRequest()).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(NacosRequestError);
    expect((error as NacosRequestError).code).toBe('nacos-unreachable');
    expect((error as NacosRequestError).message).toContain(`127.0.0.1:${dead}`);
  });

  it('answersGrpc tells a Nacos gRPC port from a closed port and from a plain HTTP port', async () => {
    const r = await registry();
    expect(await answersGrpc(endpointOf(r.grpcPort as number), 2_000)).toBe(true);
    expect(await answersGrpc(endpointOf(await freePort()), 2_000)).toBe(false);
    expect(await answersGrpc(endpointOf(r.port), 2_000)).toBe(false);
  });

  it('answersGrpc does not take another registry’s gRPC port for this one’s (the embedded registry names its HTTP port)', async () => {
    const r = await registry();
    expect(await answersGrpc(endpointOf(r.grpcPort as number), 2_000, r.port)).toBe(true);
    expect(await answersGrpc(endpointOf(r.grpcPort as number), 2_000, r.port + 1)).toBe(false);
  });
});
