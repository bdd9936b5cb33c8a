import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestGrpcClient, wireHost } from '../support/grpc-client.js';
import { createSdkClient, type SdkNamingClient } from '../support/nacos-sdk.js';
import { runRegsync, startRegsync, type RegsyncProcess } from '../support/regsync-process.js';
import { waitUntil } from '../support/wait-until.js';

/** `regsync registry` as a process, driven by the official Nacos SDK. */
describe('regsync registry', () => {
  let registry: RegsyncProcess;
  let sdk: SdkNamingClient;

  beforeAll(async () => {
    registry = await startRegsync(['registry', '--port', '0', '--unhealthy-after', '1s', '--expire-after', '2s', '--namespace', 'dev:Development']);
    sdk = await createSdkClient(registry.endpoint);
  });
  afterAll(async () => {
    await sdk?.close();
    await registry?.stop();
  });

  it('serves the SDK: register, list, server status', async () => {
    await sdk.registerInstance('cli-svc', { ip: '10.6.0.1', port: 8080, metadata: { env: 'test' } });
    const hosts = await sdk.getAllInstances('cli-svc', 'DEFAULT_GROUP', '', false);
    expect(hosts).toEqual([expect.objectContaining({ ip: '10.6.0.1', port: 8080, metadata: { env: 'test' } })]);
    expect(await (sdk as unknown as { getServerStatus(): Promise<string> }).getServerStatus()).toBe('UP');
  });

  it('applies the expiry options given on the command line', async () => {
    await sdk.registerInstance('cli-expiry', { ip: '10.6.1.1', port: 1 });
    await waitUntil(async () => {
      const res = await fetch(`${registry.url}/nacos/v1/ns/instance/list?serviceName=cli-expiry`);
      return ((await res.json()) as { hosts: unknown[] }).hosts.length === 0;
    }, { message: 'instance removed after --expire-after' });
  });

  it('creates the namespaces named on the command line', async () => {
    const res = await fetch(`${registry.url}/nacos/v1/console/namespaces`);
    const body = (await res.json()) as { data: Array<{ namespace: string; namespaceShowName: string }> };
    expect(body.data.map((n) => n.namespace)).toEqual(['', 'dev']);
  });

  it('serves the SDK gRPC protocol beside HTTP; --grpc-port off serves none', async () => {
    const grpcEndpoint = / and gRPC (\S+)/.exec(registry.output())?.[1];
    expect(grpcEndpoint).toMatch(/^127\.0\.0\.1:\d+$/);
    const client = await TestGrpcClient.connect(grpcEndpoint as string);
    try {
      await client.naming('InstanceRequest', 'cli-grpc', { type: 'registerInstance', instance: wireHost('10.6.2.1', 80) });
      const res = await fetch(`${registry.url}/nacos/v1/ns/instance/list?serviceName=cli-grpc`);
      expect(((await res.json()) as { hosts: Array<{ ip: string }> }).hosts.map((h) => h.ip)).toEqual(['10.6.2.1']);
    } finally {
      client.close();
    }
    const off = await startRegsync(['registry', '--port', '0', '--grpc-port', 'off']);
    try {
      expect(off.output()).not.toContain('gRPC');
    } finally {
      await off.stop();
    }
  });

  it('exits 0 on SIGTERM', async () => {
    const other = await startRegsync(['registry', '--port', '0']);
    expect(await other.stop()).toBe(0);
  });

  it('refuses bad options with a message and a non-zero exit', async () => {
    const port = await runRegsync(['registry', '--port', 'abc']);
    expect(port.code).not.toBe(0);
    expect(port.output).toContain("option '--port <port>' argument 'abc' is invalid");
    const expiry = await runRegsync(['registry', '--port', '0', '--unhealthy-after', '10s', '--expire-after', '5s']);
    expect(expiry.code).toBe(1);
    expect(expiry.output).toContain('--expire-after must not be shorter than --unhealthy-after');
    const user = await runRegsync(['registry', '--port', '0', '--user', 'nopassword']);
    expect(user.code).toBe(1);
    expect(user.output).toContain('expected name:password');
  });

  it('reports a port already in use', async () => {
    const port = Number(registry.endpoint.split(':')[1]);
    const clash = await runRegsync(['registry', '--port', String(port)]);
    expect(clash.code).toBe(1);
    expect(clash.output).toContain('EADDRINUSE');
  });
});
