import { describe, expect, it } from 'vitest';
import { MARK_ORIGIN, MARK_PATH, MARK_TASK, type Instance } from '../../src/model/index.js';
import { metaProblem } from '../../test/support/consul-server.js';
import { EXTERNAL_SOURCE, FIELD_META, MARK_META, TAGS_KEY, copyServiceId, decodeMetaKey, encodeMetaKey, instanceOfEntry, registrationOf, type ConsulHealthEntry, type CopyNode, type ReadEntry } from './consul-meta.js';

/** Consul's own meta key rule (`validateMetaPair`): letters, digits, `_`, `-`; at most 128; no `consul-` prefix. */
const validForConsul = (key: string) => /^[a-zA-Z0-9_-]+$/.test(key) && key.length <= 128 && !key.startsWith('consul-');

const at: CopyNode = { node: 'regsync', nodeAddress: '127.0.0.1' };

const instance = (over: Partial<Instance> = {}): Instance => ({
  ip: '10.1.0.1',
  port: 8080,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: {},
  ...over,
});

const entry = (over: { node?: Partial<NonNullable<ConsulHealthEntry['Node']>>; service?: Partial<NonNullable<ConsulHealthEntry['Service']>>; checks?: ConsulHealthEntry['Checks'] } = {}): ConsulHealthEntry => ({
  Node: { Node: 'node-a', Address: '10.9.0.1', ...over.node },
  Service: { ID: 'orders-1', Service: 'orders', Tags: [], Address: '10.1.0.1', Port: 8080, Meta: {}, Weights: { Passing: 1, Warning: 1 }, ...over.service },
  Checks: over.checks ?? [
    { CheckID: 'serfHealth', Status: 'passing', ServiceID: '' },
    { CheckID: 'service:orders-1', Status: 'passing', ServiceID: 'orders-1' },
  ],
});

const read = (e: ConsulHealthEntry, includeWarning = false): ReadEntry => {
  const r = instanceOfEntry(e, includeWarning);
  if (typeof r === 'string') throw new Error(`entry skipped: ${r}`);
  return r;
};

/** The body of a registration, or the test fails with why it was refused. */
const registration = (name: string, i: Instance, node: CopyNode = at) => {
  const body = registrationOf(name, i, node);
  if (typeof body === 'string') throw new Error(`registration refused: ${body}`);
  return body as { Node: string; Service: { ID: string; Meta: Record<string, string>; Tags: string[]; Weights: { Passing: number; Warning: number } }; Check: { CheckID: string; Status: string; ServiceID: string; Output: string } } & Record<string, unknown>;
};

describe('Consul meta key encoding', () => {
  const awkward = [
    'spring.boot.version',
    'management.port',
    'dubbo:application',
    'path/to/thing',
    'a b',
    '版本',
    'émoji-😀',
    'under_score',
    '_leading',
    '__double',
    '__',
    '___5F',
    'consul-reserved',
    'consul-',
    'regsync-origin',
    'regsync-path',
    'regsync-task',
    'regsync-weight',
    'regsync-ephemeral',
    'regsync-enabled',
    'regsync-cluster',
    'external-source',
    'x'.repeat(40),
    'MiXeD.Case-09',
  ];

  it.each(awkward)('round trips %j through a key Consul accepts', (key) => {
    const encoded = encodeMetaKey(key);
    expect(validForConsul(encoded), `${encoded} must pass Consul's rule`).toBe(true);
    expect(metaProblem({ [encoded]: 'v' })).toBeUndefined();
    expect(decodeMetaKey(encoded)).toBe(key);
  });

  it('writes keys Consul accepts as they are, and reads them back the same', () => {
    for (const key of ['version', 'zone', 'app-name', 'APP_ID', '_x', 'a-b_c', '9lives']) {
      expect(encodeMetaKey(key)).toBe(key);
      expect(decodeMetaKey(key)).toBe(key);
    }
  });

  it('spells the escapes as documented: `__` then `_XX` per UTF-8 byte of anything not a letter or digit', () => {
    expect(encodeMetaKey('spring.boot.version')).toBe('__spring_2Eboot_2Eversion');
    expect(encodeMetaKey('dubbo:app')).toBe('__dubbo_3Aapp');
    expect(encodeMetaKey('a/b')).toBe('__a_2Fb');
    expect(encodeMetaKey('__meta')).toBe('___5F_5Fmeta');
    expect(encodeMetaKey('consul-x')).toBe('__consul_2Dx');
    expect(encodeMetaKey('é')).toBe('___C3_A9');
  });

  it("gives regsync's marks readable keys of their own, and keeps the reserved keys for them", () => {
    expect(encodeMetaKey(MARK_ORIGIN)).toBe('regsync-origin');
    expect(encodeMetaKey(MARK_PATH)).toBe('regsync-path');
    expect(encodeMetaKey(MARK_TASK)).toBe('regsync-task');
    expect(decodeMetaKey('regsync-origin')).toBe(MARK_ORIGIN);
    expect(decodeMetaKey('regsync-path')).toBe(MARK_PATH);
    expect(decodeMetaKey('regsync-task')).toBe(MARK_TASK);
    // A metadata key that merely spells a reserved key is written encoded, so that it is never read as the mark or the field.
    for (const reserved of [...Object.values(MARK_META), ...Object.values(FIELD_META), EXTERNAL_SOURCE]) {
      expect(encodeMetaKey(reserved)).not.toBe(reserved);
      expect(encodeMetaKey(reserved).startsWith('__')).toBe(true);
    }
  });

  it('reads a native key that starts with `__` as it is when it holds no well-formed escape', () => {
    for (const key of ['__meta', '__', '___', '__a_b', '__a_2', '__a_2g', '__x_zz', '__lower_2e']) expect(decodeMetaKey(key)).toBe(key);
    // Escapes that spell no UTF-8 were not written by the encoder.
    expect(decodeMetaKey('__a_FF')).toBe('__a_FF');
    expect(decodeMetaKey('___C3')).toBe('___C3');
  });

  it('encodes every key it may be given into a key valid for Consul (or one the registration refuses as too long)', () => {
    // Every byte value once, as keys of one to three characters.
    const samples: string[] = [];
    for (let c = 1; c < 0x3000; c += 7) samples.push(String.fromCodePoint(c), `k${String.fromCodePoint(c)}`, `${String.fromCodePoint(c)}.v`);
    for (const key of samples) {
      const encoded = encodeMetaKey(key);
      expect(/^[a-zA-Z0-9_-]+$/.test(encoded), JSON.stringify(key)).toBe(true);
      expect(encoded.startsWith('consul-')).toBe(false);
      expect(decodeMetaKey(encoded)).toBe(key);
    }
  });
});

describe('registrationOf', () => {
  it('writes the copy on the catalog node with its meta encoded, its marks, a check and a stable id', () => {
    const i = instance({ metadata: { [MARK_ORIGIN]: 'east', [MARK_PATH]: 'east,west', [MARK_TASK]: 't1', 'spring.boot.version': '3.2', zone: 'a', [TAGS_KEY]: 'v1,blue' } });
    const body = registration('orders', i);
    const id = copyServiceId('orders', i);
    expect(body).toMatchObject({ Node: 'regsync', Address: '127.0.0.1', SkipNodeUpdate: true, NodeMeta: { 'external-source': 'regsync' } });
    expect(body.Service).toMatchObject({ ID: id, Service: 'orders', Address: '10.1.0.1', Port: 8080, Tags: ['v1', 'blue'], Weights: { Passing: 1, Warning: 1 } });
    expect(body.Service.Meta).toEqual({
      'external-source': 'regsync',
      'regsync-origin': 'east',
      'regsync-path': 'east,west',
      'regsync-task': 't1',
      __spring_2Eboot_2Eversion: '3.2',
      zone: 'a',
    });
    expect(metaProblem(body.Service.Meta)).toBeUndefined();
    expect(body.Check).toMatchObject({ CheckID: `regsync:${id}`, Status: 'passing', ServiceID: id, Output: 'copied by regsync from east' });
    // No Enterprise field, no datacenter unless configured.
    expect(body).not.toHaveProperty('Datacenter');
    expect(body).not.toHaveProperty('Namespace');
    expect(body).not.toHaveProperty('Partition');
  });

  it('keeps the fields Consul has no place for in meta, only when not the default', () => {
    expect(Object.keys(registration('s', instance()).Service.Meta)).toEqual(['external-source']);
    const body = registration('s', instance({ weight: 2.5, ephemeral: false, enabled: false, cluster: 'BJ', healthy: false }));
    expect(body.Service.Meta).toMatchObject({ 'regsync-weight': '2.5', 'regsync-ephemeral': 'false', 'regsync-enabled': 'false', 'regsync-cluster': 'BJ' });
    expect(body.Service.Weights).toEqual({ Passing: 1, Warning: 1 });
    expect(body.Check.Status).toBe('critical');
    expect(registration('s', instance({ weight: 100 })).Service.Weights.Passing).toBe(100);
    expect(registration('s', instance({ weight: 100 })).Service.Meta).not.toHaveProperty('regsync-weight');
    // Consul's weights are 1..65535: 0 and more go to meta.
    expect(registration('s', instance({ weight: 0 })).Service.Meta['regsync-weight']).toBe('0');
    expect(registration('s', instance({ weight: 70000 })).Service.Meta['regsync-weight']).toBe('70000');
  });

  it('sends datacenter, namespace and partition only when configured', () => {
    const body = registration('s', instance(), { ...at, datacenter: 'dc2', namespace: 'team-a', partition: 'p1' });
    expect(body).toMatchObject({ Datacenter: 'dc2', Namespace: 'team-a', Partition: 'p1' });
    expect(body.Service).toMatchObject({ Namespace: 'team-a', Partition: 'p1' });
    expect(body.Check).toMatchObject({ Namespace: 'team-a', Partition: 'p1' });
  });

  it("refuses metadata beyond Consul's limits with a message, before Consul would", () => {
    // 64 pairs, external-source included: 63 of the instance's own fit, 64 do not.
    const pairs = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, k) => [`k${k}`, 'v']));
    expect(typeof registrationOf('s', instance({ metadata: pairs(63) }), at)).toBe('object');
    expect(registrationOf('s', instance({ metadata: pairs(64) }), at)).toBe('65 metadata entries: Consul keeps at most 64');
    // Fields kept in meta count too.
    expect(registrationOf('s', instance({ metadata: pairs(63), cluster: 'BJ' }), at)).toMatch(/at most 64/);
    // Values of at most 512.
    expect(typeof registrationOf('s', instance({ metadata: { big: 'x'.repeat(512) } }), at)).toBe('object');
    expect(registrationOf('s', instance({ metadata: { big: 'x'.repeat(513) } }), at)).toMatch(/^metadata "big" has a value longer than Consul's 512 /);
    // Keys of at most 128 once encoded.
    expect(typeof registrationOf('s', instance({ metadata: { ['k'.repeat(128)]: 'v' } }), at)).toBe('object');
    expect(registrationOf('s', instance({ metadata: { ['k'.repeat(129)]: 'v' } }), at)).toMatch(/longer than Consul's 128 characters once encoded/);
    // 42 dots are 2 + 42 x 3 = 128 characters once encoded; 43 are too many.
    expect(typeof registrationOf('s', instance({ metadata: { ['.'.repeat(42)]: 'v' } }), at)).toBe('object');
    expect(registrationOf('s', instance({ metadata: { ['.'.repeat(43)]: 'v' } }), at)).toMatch(/longer than Consul's 128 characters once encoded/);
  });

  it('counts a value as Consul does, in bytes: a value of 200 three-byte characters is too long', () => {
    // Consul checks len(value) in Go, the UTF-8 bytes.
    expect(registrationOf('s', instance({ metadata: { name: '名'.repeat(200) } }), at)).toMatch(/value longer than Consul's 512/);
    expect(typeof registrationOf('s', instance({ metadata: { name: '名'.repeat(170) } }), at)).toBe('object');
  });
});

describe('copyServiceId', () => {
  it('is stable, depends on the service and the instance id only, and is a valid Consul id', () => {
    const a = copyServiceId('orders', instance());
    expect(a).toMatch(/^orders-[0-9a-f]{12}$/);
    expect(copyServiceId('orders', instance({ weight: 5, metadata: { x: 'y' }, healthy: false }))).toBe(a);
    expect(copyServiceId('orders', { ip: '10.1.0.1', port: 8080, cluster: 'DEFAULT' })).toBe(a);
    expect(copyServiceId('orders', instance({ port: 8081 }))).not.toBe(a);
    expect(copyServiceId('orders', instance({ cluster: 'BJ' }))).not.toBe(a);
    expect(copyServiceId('payments', instance())).not.toBe(a.replace('orders', 'payments'));
    // The same as in the registration.
    expect(registration('orders', instance()).Service.ID).toBe(a);
  });
});

describe('instanceOfEntry', () => {
  it("reads an entry's address, port, weight and meta", () => {
    const r = read(entry({ service: { Meta: { version: '2', __spring_2Eboot_2Eversion: '3.2', __meta: 'native' }, Weights: { Passing: 7, Warning: 1 } } }));
    expect(r).toEqual({
      node: 'node-a',
      serviceId: 'orders-1',
      instance: { ip: '10.1.0.1', port: 8080, weight: 7, healthy: true, enabled: true, ephemeral: true, cluster: 'DEFAULT', metadata: { version: '2', 'spring.boot.version': '3.2', __meta: 'native' } },
    });
  });

  it("falls back to the node's address when the service has none", () => {
    expect(read(entry({ service: { Address: '' } })).instance.ip).toBe('10.9.0.1');
    expect(read(entry({ service: { Address: undefined as unknown as string } })).instance.ip).toBe('10.9.0.1');
    expect(instanceOfEntry(entry({ service: { Address: '' }, node: { Address: '' } }), false)).toMatch(/has no address, nor has its node/);
  });

  it('skips entries without a service or a port, saying why', () => {
    expect(instanceOfEntry({ Node: { Node: 'n' }, Service: null, Checks: [] }, false)).toMatch(/has no service/);
    expect(instanceOfEntry(entry({ service: { Port: 0 } }), false)).toMatch(/has no port/);
    expect(instanceOfEntry(entry({ service: { Port: 70000 } }), false)).toMatch(/has no port/);
  });

  it('is healthy when every check passes; warning only with includeWarning; critical never', () => {
    const withStatus = (status: string) => entry({ checks: [{ CheckID: 'serfHealth', Status: 'passing', ServiceID: '' }, { CheckID: 'service:orders-1', Status: status, ServiceID: 'orders-1' }] });
    expect(read(withStatus('passing')).instance.healthy).toBe(true);
    expect(read(withStatus('passing'), true).instance.healthy).toBe(true);
    expect(read(withStatus('warning')).instance.healthy).toBe(false);
    expect(read(withStatus('warning'), true).instance.healthy).toBe(true);
    expect(read(withStatus('critical')).instance.healthy).toBe(false);
    expect(read(withStatus('critical'), true).instance.healthy).toBe(false);
    // An unknown status counts as critical; a failing node check counts as any other.
    expect(read(withStatus('maintenance'), true).instance.healthy).toBe(false);
    expect(read(entry({ checks: [{ CheckID: 'serfHealth', Status: 'critical', ServiceID: '' }] }), true).instance.healthy).toBe(false);
    // No check at all: nothing says it is failing.
    expect(read(entry({ checks: [] })).instance.healthy).toBe(true);
    expect(read(entry({ checks: null })).instance.healthy).toBe(true);
  });

  it('reads maintenance (of the service or of its node) as disabled', () => {
    expect(read(entry()).instance.enabled).toBe(true);
    const service = read(entry({ checks: [{ CheckID: '_service_maintenance:orders-1', Status: 'critical', ServiceID: 'orders-1' }] })).instance;
    expect(service).toMatchObject({ enabled: false, healthy: false });
    expect(read(entry({ checks: [{ CheckID: '_node_maintenance', Status: 'critical', ServiceID: '' }] })).instance.enabled).toBe(false);
  });

  it('turns key=value tags into metadata (nacos-sync writes its marks so), meta winning, and keeps every tag in consul.tags', () => {
    const r = read(entry({ service: { Tags: ['v1', 'sourceClusterId=nacos-a', 'zone=tag', 'a=b=c', '=x', 'k='], Meta: { zone: 'meta' } } }));
    expect(r.instance.metadata).toEqual({ sourceClusterId: 'nacos-a', zone: 'meta', k: '', [TAGS_KEY]: 'v1,sourceClusterId=nacos-a,zone=tag,a=b=c,=x,k=' });
    expect(read(entry()).instance.metadata).not.toHaveProperty(TAGS_KEY);
  });

  it("reads regsync's fields back, drops its own external-source, and keeps anyone else's", () => {
    const r = read(entry({ service: { Meta: { 'external-source': 'regsync', 'regsync-weight': '2.5', 'regsync-ephemeral': 'false', 'regsync-enabled': 'false', 'regsync-cluster': 'BJ', 'regsync-origin': 'east' } } }));
    expect(r.instance).toMatchObject({ weight: 2.5, ephemeral: false, enabled: false, cluster: 'BJ', metadata: { [MARK_ORIGIN]: 'east' } });
    expect(Object.keys(r.instance.metadata)).toEqual([MARK_ORIGIN]);
    // consul-k8s's mark stays: the engine tells its copies apart by it.
    expect(read(entry({ service: { Meta: { 'external-source': 'kubernetes' } } })).instance.metadata).toEqual({ 'external-source': 'kubernetes' });
    // A weight in meta that is no number falls back to the service's weights.
    expect(read(entry({ service: { Meta: { 'regsync-weight': 'heavy' }, Weights: { Passing: 3, Warning: 1 } } })).instance.weight).toBe(3);
  });

  it('reads the tags of its own copies only as consul.tags: their metadata is all in Meta', () => {
    // A Nacos instance that asks for Consul tags, some of them key=value.
    const original = instance({ metadata: { [MARK_ORIGIN]: 'nacos-a', [MARK_TASK]: 't', [TAGS_KEY]: 'env=prod,v1' } });
    const body = registration('orders', original);
    expect(body.Service.Tags).toEqual(['env=prod', 'v1']);
    const back = read({ Node: { Node: body.Node, Address: '127.0.0.1' }, Service: body.Service, Checks: [body.Check] });
    expect(back.instance.metadata).toEqual(original.metadata);
    // Anyone else's key=value tags still become metadata.
    expect(read(entry({ service: { Tags: ['env=prod'], Meta: {} } })).instance.metadata).toMatchObject({ env: 'prod' });
  });

  it('reads back what registrationOf writes', () => {
    const original = instance({
      weight: 0.5,
      healthy: false,
      enabled: false,
      ephemeral: false,
      cluster: 'SH',
      metadata: { [MARK_ORIGIN]: 'east', [MARK_PATH]: 'east', [MARK_TASK]: 't', 'a.b': 'c', 'external-source': 'elsewhere', 'regsync-weight': 'mine', [TAGS_KEY]: 'x,y' },
    });
    const body = registration('orders', original);
    const back = read({ Node: { Node: body.Node, Address: '127.0.0.1' }, Service: body.Service, Checks: [body.Check] });
    // enabled: false needs no maintenance check: the field says it.
    expect(back.instance).toEqual(original);
    expect(back).toMatchObject({ node: 'regsync', serviceId: body.Service.ID });
  });
});
