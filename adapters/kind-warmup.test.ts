import { describe, expect, it } from 'vitest';
import { ClusterConfigError, WARMUP_OPTION, type ClusterSpec } from '../src/model/index.js';
import { KINDS, kindNamed, validateCluster } from './kinds.js';

const spec = (kind: string, options: Record<string, unknown> = {}): ClusterSpec => ({
  id: 'c',
  kind,
  endpoints: kind === 'kubernetes' ? [] : ['127.0.0.1:1'],
  labels: {},
  options: kind === 'kubernetes' ? { kubeconfig: '/nonexistent/kubeconfig', ...options } : options,
});

/** Every kind's `warmupSeconds`: declared with its type, a default from the registry's own timing, 0 turning it off. */
describe('the source warm-up of each kind', () => {
  it('is an integer option of every kind, so that GET /api/v1/kinds and the dashboard form offer it', () => {
    for (const kind of KINDS) expect(kind.options.find((o) => o.name === WARMUP_OPTION), kind.name).toMatchObject({ type: 'integer', description: expect.stringContaining('Default') });
  });

  it('defaults to the registry timing of each kind', () => {
    const defaults = Object.fromEntries(KINDS.map((k) => [k.name, k.warmupMs(spec(k.name)) / 1000]));
    // Eureka: two client renew intervals; Nacos: the deletion timeout of ephemeral instances; ZooKeeper: two
    // session timeouts; Consul: the agents' anti-entropy (a minute, staggered); Kubernetes: the node monitor grace period.
    expect(defaults).toEqual({ eureka: 60, nacos: 30, zookeeper: 60, consul: 90, kubernetes: 40 });
    expect(kindNamed('zookeeper')?.warmupMs(spec('zookeeper', { sessionTimeoutMs: 4_000 }))).toBe(8_000);
  });

  it('takes 0 (off) and a number of seconds, also as a string, and refuses anything else', () => {
    for (const kind of KINDS) {
      expect(kind.warmupMs(spec(kind.name, { warmupSeconds: 0 })), kind.name).toBe(0);
      expect(kind.warmupMs(spec(kind.name, { warmupSeconds: '5' })), kind.name).toBe(5_000);
      for (const bad of [-1, 1.5, 'soon', true, 86_401]) {
        expect(() => validateCluster(spec(kind.name, { warmupSeconds: bad })), `${kind.name} ${String(bad)}`).toThrow(ClusterConfigError);
      }
    }
  });
});
