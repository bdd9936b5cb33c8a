import { describe, expect, it } from 'vitest';
import { KINDS } from '../../adapters/kinds.js';
import type { Kind } from '../dashboard/types.js';
import { apiHarnessPerTest, type ApiHarness } from '../../test/support/api-harness.js';

let h: ApiHarness;
apiHarnessPerTest((harness) => {
  h = harness;
});

/** What the dashboard reads of each kind: the route must answer that shape. */
type KindView = Kind;

describe('GET /api/v1/kinds', () => {
  it('lists every kind of the list, in its order, with its options and those every cluster may have', async () => {
    const res = await h.inject({ method: 'GET', url: '/api/v1/kinds' });
    expect(res.statusCode).toBe(200);
    const items = (res.json() as { items: KindView[] }).items;
    expect(items.map((k) => k.name)).toEqual(KINDS.map((k) => k.name));
    for (const [i, k] of KINDS.entries()) {
      const shown = items[i] as KindView;
      expect(shown).toMatchObject({
        label: k.label,
        defaultPort: k.defaultPort,
        endpointsRequired: k.endpointsRequired,
        usesCredentials: k.usesCredentials,
        nacosSyncType: k.nacosSyncType ?? null,
      });
      expect(shown.options.map((o) => o.name)).toEqual(expect.arrayContaining([...k.options.map((o) => o.name), 'aliases', 'nacosSyncName']));
    }
  });

  it('gives every option its type (and the values of a string that takes only some), as the kinds\' parsers read them', async () => {
    const items = ((await h.inject({ method: 'GET', url: '/api/v1/kinds' })).json() as { items: KindView[] }).items;
    const optionOf = (kind: string, name: string) => items.find((k) => k.name === kind)?.options.find((o) => o.name === name);
    for (const k of items) for (const o of k.options) expect(['string', 'integer', 'boolean', 'list', 'object'], `${k.name}.${o.name}`).toContain(o.type);
    expect(optionOf('kubernetes', 'kubeconfig')).toMatchObject({ type: 'string' });
    expect(optionOf('kubernetes', 'allowNamespaces')).toMatchObject({ type: 'list' });
    expect(optionOf('kubernetes', 'namespaceMap')).toMatchObject({ type: 'object' });
    expect(optionOf('kubernetes', 'headless')).toMatchObject({ type: 'boolean' });
    expect(optionOf('kubernetes', 'maxEndpointsPerSlice')).toMatchObject({ type: 'integer' });
    expect(optionOf('nacos', 'apiVersion')).toEqual(expect.objectContaining({ type: 'string', choices: ['auto', 'grpc', 'v1', 'v3'] }));
    expect(optionOf('nacos', 'contextPath')).not.toHaveProperty('choices');
    expect(optionOf('zookeeper', 'layout')).toMatchObject({ type: 'string', choices: ['dubbo', 'curator'] });
    expect(optionOf('zookeeper', 'aliases')).toMatchObject({ type: 'list' });
    expect(optionOf('nacos', 'nacosSyncName')).toMatchObject({ type: 'string' });
    expect(items.map((k) => [k.name, k.usesCredentials])).toEqual([['nacos', true], ['zookeeper', true], ['kubernetes', false], ['consul', true], ['eureka', true]]);
  });

  it('takes every option at a value of the type it shows, and refuses it, naming it, at a value of another type', async () => {
    const items = ((await h.inject({ method: 'GET', url: '/api/v1/kinds' })).json() as { items: KindView[] }).items;
    type OptionType = KindView['options'][number]['type'];
    const right: Record<OptionType, unknown> = { string: 'x', integer: 100, boolean: false, list: ['default'], object: {} };
    // Strings of a format, and an integer bound by another option's default (backoffInitialMs 500).
    const formatted: Record<string, unknown> = { clientIP: '10.0.0.9', contextPath: '/nacos', root: '/dubbo', backoffMaxMs: 30_000, blockingWaitMs: 5_000, renewalIntervalS: 30 };
    // Options that go in pairs.
    const companions: Record<string, Record<string, unknown>> = { tlsCertFile: { tlsKeyFile: 'key.pem' }, tlsKeyFile: { tlsCertFile: 'cert.pem' } };
    const wrong: Record<OptionType, unknown> = { string: 42, integer: true, boolean: 'maybe', list: 'one', object: ['a'] };
    const post = (kind: string, options: Record<string, unknown>) =>
      h.inject({ method: 'POST', url: '/api/v1/clusters', payload: { id: 'typed', kind, endpoints: ['10.0.0.1:1'], options } });
    for (const kind of items) {
      for (const o of kind.options) {
        const good = o.name in formatted ? formatted[o.name] : (o.choices?.[0] ?? right[o.type]);
        const accepted = await post(kind.name, { ...companions[o.name], [o.name]: good });
        expect([accepted.statusCode, accepted.payload], `${kind.name}.${o.name} = ${JSON.stringify(good)}`).toEqual([201, expect.any(String)]);
        await h.inject({ method: 'DELETE', url: '/api/v1/clusters/typed' });
        const refused = await post(kind.name, { [o.name]: wrong[o.type] });
        expect([refused.statusCode, refused.json().error?.message], `${kind.name}.${o.name}`).toEqual([400, expect.stringContaining(`body.options.${o.name}`)]);
      }
    }
  });

  it('accepts a cluster setting options its kind lists', async () => {
    const items = ((await h.inject({ method: 'GET', url: '/api/v1/kinds' })).json() as { items: KindView[] }).items;
    const nacos = items.find((k) => k.nacosSyncType === 'NACOS') as KindView;
    const res = await h.inject({
      method: 'POST',
      url: '/api/v1/clusters',
      payload: { id: 'n', kind: nacos.name, endpoints: ['10.0.0.1:8848'], options: { apiVersion: 'v1', pollIntervalMs: 1000, lightBeats: false, contextPath: '/nacos' } },
    });
    expect(res.statusCode, res.payload).toBe(201);
  });
});
