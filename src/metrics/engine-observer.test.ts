import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import type { ApplyPlan, BeatResult, RegistryAdapter } from '../model/adapter.js';
import type { Instance, ServiceKey } from '../model/types.js';
import { NacosHttp } from '../../adapters/nacos/nacos-http.js';
import { parseEndpoint } from '../../adapters/nacos/nacos-options.js';
import { HeartbeatScheduler } from '../engine/heartbeat-scheduler.js';
import type { BeatResultKind } from '../engine/observer.js';
import { waitUntil } from '../../test/support/wait-until.js';

/** A destination answering each instance's beats as scripted: `ok`, `unknown`, or a failure. */
class ScriptedDestination implements RegistryAdapter {
  readonly clusterId = 'dest';
  readonly heartbeatIntervalMs: number = 50;
  constructor(private readonly answer: (ip: string) => BeatResult | 'throw') {}
  async listServices(): Promise<ServiceKey[]> {
    return [];
  }
  async listInstances(): Promise<Instance[]> {
    return [];
  }
  watch() {
    return () => {};
  }
  async apply(_service: ServiceKey, _plan: ApplyPlan): Promise<void> {}
  async heartbeat(_service: ServiceKey, instance: Instance): Promise<BeatResult> {
    const answer = this.answer(instance.ip);
    if (answer === 'throw') throw new Error('connection refused');
    return answer;
  }
  async close(): Promise<void> {}
}

const service: ServiceKey = { namespace: 'public', group: 'DEFAULT_GROUP', name: 's' };
const inst = (ip: string): Instance => ({ ip, port: 1, weight: 1, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: {} });

describe('the heartbeat scheduler as observed', () => {
  it('tells the observer every beat with its cluster and result', async () => {
    const seen = new Map<string, number>();
    const hb = new HeartbeatScheduler({
      tickMs: 10,
      logger: silentLogger(),
      observer: { beat: (cluster: string, result: BeatResultKind) => seen.set(`${cluster}/${result}`, (seen.get(`${cluster}/${result}`) ?? 0) + 1) },
    });
    const dest = new ScriptedDestination((ip) => (ip === '10.0.0.1' ? 'ok' : ip === '10.0.0.2' ? 'unknown' : 'throw'));
    hb.start();
    try {
      hb.set('o', dest, service, [inst('10.0.0.1'), inst('10.0.0.2'), inst('10.0.0.3')]);
      await waitUntil(() => (seen.get('dest/ok') ?? 0) >= 2 && (seen.get('dest/unknown') ?? 0) >= 2 && (seen.get('dest/failed') ?? 0) >= 2, {
        message: 'every kind of result observed twice',
      });
      expect([...seen.keys()].sort()).toEqual(['dest/failed', 'dest/ok', 'dest/unknown']);
      const stats = hb.stats();
      expect(stats.failed).toBeGreaterThanOrEqual(2);
    } finally {
      hb.stop();
    }
  });
});

describe('the Nacos HTTP layer as observed', () => {
  it('reports each failed request once, by error code, and not a closed adapter', async () => {
    const codes: string[] = [];
    const http = new NacosHttp({
      clusterId: 'dead',
      // Nothing listens on port 1 of the loopback: connections are refused at once.
      endpoints: [parseEndpoint('dead', '127.0.0.1:1')],
      contextPath: '/nacos',
      maxConcurrency: 2,
      requestTimeoutMs: 2_000,
      log: silentLogger(),
      onRequestError: (code) => codes.push(code),
    });
    const call = { method: 'GET' as const, path: '/v1/ns/instance/list', params: { serviceName: 's' } };
    await expect(http.request(call)).rejects.toMatchObject({ code: 'nacos-unreachable' });
    // Two attempts on one endpoint, one failed request.
    expect(codes).toEqual(['nacos-unreachable']);
    // An answer the caller cannot accept counts as the caller's error code.
    http.error(call, { status: 500, body: 'boom', endpoint: '127.0.0.1:1' }, 'nacos-http-error', 'boom');
    expect(codes).toEqual(['nacos-unreachable', 'nacos-http-error']);
    await http.close();
    await expect(http.request(call)).rejects.toMatchObject({ code: 'nacos-closed' });
    expect(codes).toHaveLength(2);
  });
});
