import { describe, expect, it } from 'vitest';
import type { Instance } from '../../src/model/index.js';
import { CuratorFormatError, SPRING_PAYLOAD_CLASS, buildCuratorInstance, curatorCopyId, readCuratorInstance, sameCuratorContent } from './curator-instance.js';

/** What Spring Cloud ZooKeeper 4.x registers (Curator's JsonInstanceSerializer). */
const springNode = (over: Record<string, unknown> = {}) =>
  Buffer.from(
    JSON.stringify({
      name: 'orders',
      id: '5c2e0d9b-8a41-4c3e-9d2f-0e4b9f1c7a10',
      address: '10.1.2.3',
      port: 8080,
      sslPort: null,
      payload: { '@class': SPRING_PAYLOAD_CLASS, id: 'orders-1', name: 'orders', metadata: { instance_status: 'UP', zone: 'a' } },
      registrationTimeUTC: 1650000000000,
      serviceType: 'DYNAMIC',
      uriSpec: { parts: [{ value: 'scheme', variable: true }, { value: '://', variable: false }, { value: 'address', variable: true }, { value: ':', variable: false }, { value: 'port', variable: true }] },
      ...over,
    }),
  );
const ID = '5c2e0d9b-8a41-4c3e-9d2f-0e4b9f1c7a10';

const instance = (over: Partial<Instance> = {}): Instance => ({
  ip: '10.1.2.3',
  port: 8080,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: {},
  ...over,
});

describe('readCuratorInstance', () => {
  it('maps a Spring Cloud ZooKeeper registration, payload.metadata becoming the metadata', () => {
    expect(readCuratorInstance(springNode(), 'orders', ID)).toEqual(instance({ metadata: { instance_status: 'UP', zone: 'a' } }));
  });

  it('reads serviceType, enabled, OUT_OF_SERVICE, sslPort, weight and non-string metadata', () => {
    expect(readCuratorInstance(springNode({ serviceType: 'STATIC' }), 'orders', ID).ephemeral).toBe(false);
    expect(readCuratorInstance(springNode({ serviceType: 'PERMANENT' }), 'orders', ID).ephemeral).toBe(false);
    expect(readCuratorInstance(springNode({ enabled: false }), 'orders', ID).enabled).toBe(false);
    const outOfService = springNode({ payload: { metadata: { instance_status: 'OUT_OF_SERVICE' } } });
    expect(readCuratorInstance(outOfService, 'orders', ID).enabled).toBe(false);
    expect(readCuratorInstance(springNode({ port: null, sslPort: 8443 }), 'orders', ID).port).toBe(8443);
    const odd = springNode({ payload: { metadata: { weight: '3', n: 1, on: true, gone: null, nested: { x: 1 } } } });
    expect(readCuratorInstance(odd, 'orders', ID)).toMatchObject({ weight: 3, metadata: { weight: '3', n: '1', on: 'true', nested: '{"x":1}' } });
    // Plain Curator (no Spring payload) is fine too.
    expect(readCuratorInstance(springNode({ payload: null }), 'orders', ID).metadata).toEqual({});
  });

  it.each([
    [Buffer.from('not json'), 'not JSON'],
    [Buffer.from('[1,2]'), 'not a JSON object'],
    [springNode({ name: 'billing' }), 'is not the service'],
    [springNode({ id: 'other' }), 'is not its node name'],
    [springNode({ address: '' }), 'no address'],
    [springNode({ port: null }), 'no port'],
    [springNode({ port: 0 }), 'no port'],
  ])('refuses a malformed node (%#)', (data, why) => {
    expect(() => readCuratorInstance(data, 'orders', ID)).toThrow(CuratorFormatError);
    expect(() => readCuratorInstance(data, 'orders', ID)).toThrow(new RegExp(why));
  });
});

describe('buildCuratorInstance', () => {
  it('writes exactly Curator fields with Spring payload metadata, and reads back the same instance', () => {
    const copy = instance({ weight: 2, cluster: 'SH', metadata: { 'regsync.task': 't1', zone: 'b' } });
    const id = curatorCopyId(copy);
    const data = buildCuratorInstance('orders', id, copy, 1700000000000);
    const json = JSON.parse(data.toString('utf8')) as Record<string, unknown>;
    expect(Object.keys(json)).toEqual(['name', 'id', 'address', 'port', 'sslPort', 'payload', 'registrationTimeUTC', 'serviceType', 'uriSpec']);
    expect(json).toMatchObject({
      name: 'orders',
      id,
      address: '10.1.2.3',
      port: 8080,
      sslPort: null,
      payload: { '@class': SPRING_PAYLOAD_CLASS, id, name: 'orders', metadata: { 'regsync.task': 't1', zone: 'b', weight: '2', 'regsync.derived': 'weight', 'regsync.cluster': 'SH' } },
      registrationTimeUTC: 1700000000000,
      serviceType: 'DYNAMIC',
    });
    expect(readCuratorInstance(data, 'orders', id)).toEqual(copy);
    // A persistent instance is written STATIC, and reads back persistent.
    const persistent = { ...copy, ephemeral: false };
    const stored = buildCuratorInstance('orders', id, persistent, 1700000000000);
    expect(JSON.parse(stored.toString('utf8'))).toMatchObject({ serviceType: 'STATIC' });
    expect(readCuratorInstance(stored, 'orders', id)).toEqual(persistent);
  });

  it('gives one stable id per ip:port#cluster', () => {
    expect(curatorCopyId(instance())).toBe(curatorCopyId(instance({ metadata: { x: 'y' } })));
    expect(curatorCopyId(instance())).not.toBe(curatorCopyId(instance({ port: 8081 })));
    expect(curatorCopyId(instance())).not.toBe(curatorCopyId(instance({ cluster: 'SH' })));
    expect(curatorCopyId(instance())).toMatch(/^regsync-[0-9a-f]{24}$/);
  });

  it('marks a disabled instance with enabled: false only', () => {
    const json = JSON.parse(buildCuratorInstance('orders', 'x', instance({ enabled: false }), 1).toString('utf8')) as Record<string, unknown>;
    expect(json.enabled).toBe(false);
  });
});

describe('sameCuratorContent', () => {
  it('ignores the registration time and key order, nothing else', () => {
    const a = buildCuratorInstance('orders', 'x', instance(), 1);
    const b = buildCuratorInstance('orders', 'x', instance(), 2);
    expect(sameCuratorContent(a, b)).toBe(true);
    const reordered = Buffer.from(JSON.stringify(Object.fromEntries(Object.entries(JSON.parse(a.toString('utf8')) as object).reverse())));
    expect(sameCuratorContent(a, reordered)).toBe(true);
    expect(sameCuratorContent(a, buildCuratorInstance('orders', 'x', instance({ port: 1 }), 1))).toBe(false);
    expect(sameCuratorContent(a, Buffer.from('garbage'))).toBe(false);
  });
});
