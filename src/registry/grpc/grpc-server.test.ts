import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRegistry, type RunningRegistry } from '../registry-server.js';
import { TestGrpcClient, wireHost } from '../../../test/support/grpc-client.js';
import { freePort } from '../../../test/support/ports.js';
import { waitUntil } from '../../../test/support/wait-until.js';

/** The connection protocol of the embedded registry's gRPC, with the real @grpc/grpc-js client. */
describe('embedded registry gRPC: connections', () => {
  let registry: RunningRegistry;
  let address: string;
  const clients: TestGrpcClient[] = [];
  const connect = async (options: Parameters<typeof TestGrpcClient.connect>[1] = {}) => {
    const c = await TestGrpcClient.connect(address, options);
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    // Stale detection soon after 300 ms idle; a generous answer time keeps answering clients safe on a busy machine.
    registry = await startRegistry({ port: 0, grpc: { staleAfterMs: 300, detectionTimeoutMs: 1_500, detectionIntervalMs: 50 } });
    address = registry.grpcEndpoint as string;
  });
  afterAll(async () => {
    for (const c of clients) c.close();
    await registry.close();
  });

  it('listens on its own port beside HTTP and answers ServerCheck without a setup', async () => {
    expect(registry.grpcPort).toBeGreaterThan(0);
    expect(registry.grpcPort).not.toBe(registry.port);
    const c = await connect({ setup: false });
    const check = await c.call('ServerCheckRequest', { headers: {}, module: 'internal' });
    expect(check.type).toBe('ServerCheckResponse');
    expect(check.body).toMatchObject({ resultCode: 200, errorCode: 0, supportAbilityNegotiation: true, success: true });
    expect(check.body.connectionId).toMatch(/^\d+_127\.0\.0\.1_\d+$/);
  });

  it('answers 301 before the setup, then registers the connection on ConnectionSetupRequest with a SetupAck', async () => {
    const c = await connect({ setup: false });
    const before = await c.call('HealthCheckRequest', { headers: {}, module: 'internal' });
    expect(before.type).toBe('ErrorResponse');
    expect(before.body).toMatchObject({ resultCode: 500, errorCode: 301 });
    const register = await c.naming('InstanceRequest', 'orders', { type: 'registerInstance', instance: wireHost('10.0.0.1', 80) });
    expect(register.body.errorCode).toBe(301);

    await c.setup();
    const ack = c.received.find((m) => m.type === 'SetupAckRequest');
    expect(ack?.body.abilityTable).toEqual({ supportPersistentInstanceByGrpc: true, fuzzyWatch: true });
    expect(ack?.body.requestId).toBeUndefined();
    const health = await c.call('HealthCheckRequest', { headers: {}, module: 'internal' });
    expect(health).toMatchObject({ type: 'HealthCheckResponse', body: { resultCode: 200, errorCode: 0, success: true } });
    expect(registry.grpc?.connections().map((x) => x.id)).toContain(c.connectionId);
  });

  it('sends no SetupAck to a client that sent no abilityTable', async () => {
    const c = await connect({ abilityTable: false });
    expect(c.received.filter((m) => m.type === 'SetupAckRequest')).toEqual([]);
  });

  it('answers 302 for an unknown type and for a setup sent as a unary call, 502 for a body that is not JSON', async () => {
    const c = await connect();
    const unknown = await c.call('NoSuchRequest', { headers: {} });
    expect(unknown).toMatchObject({ type: 'ErrorResponse', body: { errorCode: 302 } });
    const setup = await c.call('ConnectionSetupRequest', { headers: {}, labels: {} });
    expect(setup.body.errorCode).toBe(302);
    const bad = await c.callRaw({ metadata: { type: 'InstanceRequest' }, body: { value: Buffer.from('{not json') } });
    expect(bad).toMatchObject({ type: 'ErrorResponse', body: { errorCode: 502 } });
  });

  it('answers -401 to naming writes on a connection set up without module=naming', async () => {
    const c = await connect({ labels: { source: 'sdk', module: 'config' } });
    const register = await c.naming('InstanceRequest', 'orders', { type: 'registerInstance', instance: wireHost('10.0.0.1', 80) });
    expect(register).toMatchObject({ type: 'ErrorResponse', body: { resultCode: -401, errorCode: -401 } });
    const subscribe = await c.naming('SubscribeServiceRequest', 'orders', { subscribe: true, clusters: '' });
    expect(subscribe.body.resultCode).toBe(-401);
  });

  it('unregisters a connection when its stream ends, with its publish sets', async () => {
    const c = await connect();
    await c.naming('InstanceRequest', 'closing', { type: 'registerInstance', instance: wireHost('10.0.0.2', 80) });
    expect(registry.store.getService('public', 'DEFAULT_GROUP', 'closing')?.instances.size).toBe(1);
    c.close();
    await waitUntil(() => registry.store.getService('public', 'DEFAULT_GROUP', 'closing')?.instances.size === 0, { message: 'instance gone' });
    expect(registry.grpc?.connections().map((x) => x.id)).not.toContain(c.connectionId);
  });

  it('sends ClientDetectionRequest to an idle connection and unregisters it when it does not answer', async () => {
    const live = await connect();
    const silent = await connect();
    silent.answer = () => undefined;
    await silent.naming('InstanceRequest', 'detected', { type: 'registerInstance', instance: wireHost('10.0.0.3', 80) });
    await live.naming('InstanceRequest', 'detected', { type: 'registerInstance', instance: wireHost('10.0.0.4', 80) });
    await waitUntil(() => silent.streamEnded, { message: 'silent connection dropped' });
    expect(silent.received.some((m) => m.type === 'ClientDetectionRequest' && /^\d+$/.test(String(m.body.requestId)))).toBe(true);
    const ids = registry.grpc?.connections().map((x) => x.id);
    expect(ids).not.toContain(silent.connectionId);
    // The answering connection was asked too, stays, and keeps its instance.
    await waitUntil(() => live.received.some((m) => m.type === 'ClientDetectionRequest'), { message: 'live connection detected' });
    expect(ids).toContain(live.connectionId);
    const hosts = [...(registry.store.getService('public', 'DEFAULT_GROUP', 'detected')?.instances.values() ?? [])].map((i) => i.ip);
    expect(hosts).toEqual(['10.0.0.4']);
    const after = await silent.call('HealthCheckRequest', { headers: {}, module: 'internal' }).catch(() => undefined);
    if (after) expect(after.body.errorCode).toBe(301);
  });
});

describe('embedded registry gRPC: ports', () => {
  it('takes HTTP + 1000 by default, an explicit port, or none', async () => {
    const http = await freePort();
    const fixed = await startRegistry({ port: http, grpcPort: false });
    try {
      expect(fixed.grpcPort).toBeUndefined();
      expect(fixed.grpc).toBeUndefined();
    } finally {
      await fixed.close();
    }
    const grpcPort = await freePort();
    const explicit = await startRegistry({ port: 0, grpcPort });
    try {
      expect(explicit.grpcPort).toBe(grpcPort);
      expect(explicit.grpcEndpoint).toBe(`127.0.0.1:${grpcPort}`);
    } finally {
      await explicit.close();
    }
  });
});

