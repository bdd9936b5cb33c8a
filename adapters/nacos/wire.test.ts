import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import type { Instance } from '../../src/model/index.js';
import {
  beatBody,
  decodePushPacket,
  deregisterParams,
  groupedServiceOf,
  hostToInstance,
  namespaceIds,
  pushAck,
  pushedService,
  registerForm,
  registerParams,
  toServiceRef,
} from './wire.js';
import { WireFormatError } from './wire-format-error.js';

const instance = (over: Partial<Instance> = {}): Instance => ({
  ip: '10.0.0.1',
  port: 80,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: {},
  ...over,
});

describe('wire conversions', () => {
  it('maps a Nacos host to the model with every field, metadata as strings', () => {
    expect(
      hostToInstance({
        instanceId: '10.1.0.1#8080#BJ#G@@s',
        ip: '10.1.0.1',
        port: 8080,
        weight: 2.5,
        healthy: false,
        enabled: false,
        ephemeral: false,
        clusterName: 'BJ',
        serviceName: 'G@@s',
        metadata: { zone: 'a', n: 1, ok: true, nested: { x: 1 }, gone: null },
      }),
    ).toEqual({
      ip: '10.1.0.1',
      port: 8080,
      weight: 2.5,
      healthy: false,
      enabled: false,
      ephemeral: false,
      cluster: 'BJ',
      metadata: { zone: 'a', n: '1', ok: 'true', nested: '{"x":1}' },
    });
  });

  it('takes Nacos defaults for absent fields and reads string flags', () => {
    expect(hostToInstance({ ip: '10.1.0.2', port: '81', enable: 'false' })).toEqual(
      instance({ ip: '10.1.0.2', port: 81, enabled: false }),
    );
  });

  it('refuses a host without an address rather than dropping it', () => {
    expect(() => hostToInstance({ port: 1 })).toThrow(WireFormatError);
    expect(() => hostToInstance({ ip: '10.0.0.1', port: 70000 })).toThrow(WireFormatError);
    expect(() => hostToInstance('10.0.0.1:80')).toThrow(WireFormatError);
  });

  it('maps empty namespace and group to Nacos defaults', () => {
    expect(toServiceRef({ namespace: '', group: '', name: 's' })).toEqual({ namespaceId: 'public', group: 'DEFAULT_GROUP', name: 's' });
    expect(toServiceRef({ namespace: 'dev', group: 'G', name: 's' })).toEqual({ namespaceId: 'dev', group: 'G', name: 's' });
  });

  it('sends every field on register, grouped names for v1 only', () => {
    const ref = { namespaceId: 'dev', group: 'G', name: 's' };
    const i = instance({ weight: 3, enabled: false, healthy: false, ephemeral: false, cluster: 'BJ', metadata: { a: 'b' } });
    expect(registerParams(ref, i, 'v1')).toEqual({
      namespaceId: 'dev',
      groupName: 'G',
      serviceName: 'G@@s',
      ip: '10.0.0.1',
      port: '80',
      weight: '3',
      enabled: 'false',
      healthy: 'false',
      ephemeral: 'false',
      clusterName: 'BJ',
      metadata: '{"a":"b"}',
    });
    expect(registerParams(ref, i, 'v3').serviceName).toBe('s');
    // The form text says the same, in the order a form decoder reads it (either dialect, the ref's part cached).
    for (const dialect of ['v1', 'v3', 'v1'] as const) {
      expect(Object.fromEntries(new URLSearchParams(registerForm(ref, i, dialect)))).toEqual(registerParams(ref, i, dialect));
    }
    // Characters a form must escape, in every field that can hold them.
    const odd = { namespaceId: 'n s&=', group: 'G+%', name: 'a/b?c' };
    const v6 = instance({ ip: 'fe80::1', weight: 0.5, cluster: 'c&d', metadata: { 'k=1': 'v&2 ü', 'j': '%20' } });
    for (const dialect of ['v1', 'v3'] as const) {
      expect(Object.fromEntries(new URLSearchParams(registerForm(odd, v6, dialect)))).toEqual(registerParams(odd, v6, dialect));
    }
    expect(deregisterParams(ref, i, 'v1')).toEqual({
      namespaceId: 'dev',
      groupName: 'G',
      serviceName: 'G@@s',
      ip: '10.0.0.1',
      port: '80',
      clusterName: 'BJ',
      ephemeral: 'false',
    });
    expect(JSON.parse(beatBody(ref, i))).toEqual({
      serviceName: 'G@@s',
      ip: '10.0.0.1',
      port: 80,
      cluster: 'BJ',
      weight: 3,
      metadata: { a: 'b' },
      scheduled: false,
    });
  });

  it('decodes plain and gzipped push packets and answers them as the SDKs do', () => {
    const json = JSON.stringify({ type: 'dom', data: '{"name":"G@@s","hosts":[]}', lastRefTime: 42 });
    for (const raw of [Buffer.from(json), gzipSync(json)]) {
      const packet = decodePushPacket(raw);
      expect(packet).toEqual({ type: 'dom', data: '{"name":"G@@s","hosts":[]}', lastRefTime: 42 });
      expect(JSON.parse(pushAck(packet as NonNullable<typeof packet>).toString())).toEqual({ type: 'push-ack', lastRefTime: 42, data: '' });
    }
    expect(JSON.parse(pushAck({ type: 'dump', data: '', lastRefTime: 1 }).toString())).toMatchObject({ type: 'dump-ack' });
    expect(JSON.parse(pushAck({ type: 'other', data: '', lastRefTime: 1 }).toString())).toMatchObject({ type: 'unknown-ack' });
    expect(decodePushPacket(Buffer.from('not json'))).toBeUndefined();
    expect(decodePushPacket(Buffer.from([0x1f, 0x8b, 0, 1]))).toBeUndefined();
  });

  it('reads the service of a push, grouped (1.x) or with groupName beside it (2.x)', () => {
    const hosts = [{ ip: '10.0.0.1', port: 80, clusterName: 'C' }];
    expect(pushedService(JSON.stringify({ name: 'G@@s', hosts }))).toEqual({
      groupedName: 'G@@s',
      instances: [instance({ cluster: 'C' })],
    });
    expect(pushedService(JSON.stringify({ name: 's', groupName: 'G', hosts: [] })).groupedName).toBe('G@@s');
    expect(pushedService(JSON.stringify({ name: 's' })).groupedName).toBe('DEFAULT_GROUP@@s');
    expect(() => pushedService('{}')).toThrow(WireFormatError);
  });

  it('reads namespace lists of v1 (public is "") and v3 (public is public) as the same ids', () => {
    const v1 = [
      { namespace: '', namespaceShowName: 'public', quota: 200, configCount: 0, type: 0 },
      { namespace: 'dev', namespaceShowName: 'Development', quota: 200, configCount: 3, type: 2 },
    ];
    expect(namespaceIds(v1)).toEqual(['public', 'dev']);
    expect(namespaceIds([{ namespace: 'public' }, { namespace: 'dev' }])).toEqual(['public', 'dev']);
    expect(namespaceIds([{ namespace: '' }, { namespace: 'public' }])).toEqual(['public']);
    expect(() => namespaceIds({ namespace: 'dev' })).toThrow(WireFormatError);
    expect(() => namespaceIds([{ namespaceShowName: 'no id' }])).toThrow(/namespace entry without a namespace id/);
  });

  it('reads service entries of lists across groups, grouped or not', () => {
    expect(groupedServiceOf({ name: 'orders', groupName: 'G', clusterCount: 1, ipCount: 2, healthyInstanceCount: 2, triggerFlag: 'false' })).toEqual({
      group: 'G',
      name: 'orders',
    });
    expect(groupedServiceOf({ name: 'G@@orders', groupName: 'G' })).toEqual({ group: 'G', name: 'orders' });
    expect(groupedServiceOf({ name: 'G@@orders' })).toEqual({ group: 'G', name: 'orders' });
    expect(groupedServiceOf({ name: 'orders' })).toEqual({ group: 'DEFAULT_GROUP', name: 'orders' });
    expect(() => groupedServiceOf({ groupName: 'G' })).toThrow(WireFormatError);
    expect(() => groupedServiceOf('orders')).toThrow(/service entry without a name/);
  });
});
