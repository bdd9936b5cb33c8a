import { describe, expect, it } from 'vitest';
import type { Instance } from '../../src/model/index.js';
import { providerNodeName, readProvider } from './dubbo-provider.js';
import { formatDubboServiceName, parseDubboServiceName, selectsProvider } from './dubbo-service-name.js';
import { DubboUrlError, decodeNodeName, encodeNodeName } from './dubbo-url.js';

const node = (url: string) => encodeNodeName(url);

const instance = (over: Partial<Instance> = {}): Instance => ({
  ip: '10.0.0.1',
  port: 20880,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata: { protocol: 'dubbo', interface: 'com.acme.Echo' },
  ...over,
});

describe('Dubbo service names', () => {
  it('reads providers:{interface}:{version}:{group} as exactly that version and group', () => {
    expect(parseDubboServiceName('providers:com.acme.Echo:1.0.0:blue')).toEqual({ interface: 'com.acme.Echo', version: '1.0.0', group: 'blue' });
    expect(parseDubboServiceName('providers:com.acme.Echo::')).toEqual({ interface: 'com.acme.Echo', version: '', group: '' });
  });

  it('reads the shorter forms of older Dubbo and nacos-sync with missing parts empty', () => {
    expect(parseDubboServiceName('providers:com.acme.Echo')).toEqual({ interface: 'com.acme.Echo', version: '', group: '' });
    expect(parseDubboServiceName('providers:com.acme.Echo:1.0.0')).toEqual({ interface: 'com.acme.Echo', version: '1.0.0', group: '' });
    expect(parseDubboServiceName('providers:com.acme.Echo:1.0.0:')).toEqual({ interface: 'com.acme.Echo', version: '1.0.0', group: '' });
  });

  it('reads a bare interface name as every version and group', () => {
    const all = parseDubboServiceName('com.acme.Echo');
    expect(all).toEqual({ interface: 'com.acme.Echo', version: undefined, group: undefined });
    expect(selectsProvider(all, '2.0.0', 'green')).toBe(true);
    expect(selectsProvider(parseDubboServiceName('providers:com.acme.Echo:1.0.0:'), '1.0.0', 'green')).toBe(false);
    expect(selectsProvider(parseDubboServiceName('providers:com.acme.Echo:1.0.0:'), '1.0.0', '')).toBe(true);
  });

  it.each(['consumers:com.acme.Echo::', 'providers::1.0.0:', 'providers:a:b:c:d', '', ' com.acme.Echo'])('refuses %j', (name) => {
    expect(() => parseDubboServiceName(name)).toThrow();
  });

  it('names services of * tasks as Dubbo >= 2.7.3 does in Nacos', () => {
    expect(formatDubboServiceName('com.acme.Echo', '', '')).toBe('providers:com.acme.Echo::');
    expect(formatDubboServiceName('com.acme.Echo', '1.0.0', 'blue')).toBe('providers:com.acme.Echo:1.0.0:blue');
  });
});

describe('readProvider', () => {
  it('maps like nacos-sync: every parameter to metadata plus protocol, weight from weight', () => {
    const p = readProvider(node('dubbo://10.0.0.1:20880/com.acme.Echo?interface=com.acme.Echo&version=1.0.0&group=blue&weight=7&side=provider'), 'com.acme.Echo');
    expect(p).toEqual({
      version: '1.0.0',
      group: 'blue',
      instance: instance({
        weight: 7,
        metadata: { protocol: 'dubbo', interface: 'com.acme.Echo', version: '1.0.0', group: 'blue', weight: '7', side: 'provider' },
      }),
    });
  });

  it('falls back to default.version / default.group, as Dubbo URLs do', () => {
    const p = readProvider(node('dubbo://10.0.0.1:1/com.acme.Echo?interface=com.acme.Echo&default.version=2&default.group=g'), 'com.acme.Echo');
    expect([p.version, p.group]).toEqual(['2', 'g']);
  });

  it('reads dynamic=false as persistent, disabled/enabled as Dubbo consumers do, and an unusable weight as 1', () => {
    const read = (q: string) => readProvider(node(`dubbo://10.0.0.1:1/com.acme.Echo?interface=com.acme.Echo&${q}`), 'com.acme.Echo').instance;
    expect(read('dynamic=false').ephemeral).toBe(false);
    expect(read('enabled=false').enabled).toBe(false);
    expect(read('disabled=true&enabled=true').enabled).toBe(false);
    expect(read('disabled=false&enabled=false').enabled).toBe(true);
    expect(read('weight=heavy').weight).toBe(1);
  });

  it('takes the Nacos cluster out of regsync.cluster', () => {
    const i = readProvider(node('dubbo://10.0.0.1:1/com.acme.Echo?interface=com.acme.Echo&regsync.cluster=SH'), 'com.acme.Echo').instance;
    expect(i.cluster).toBe('SH');
    expect(i.metadata).toEqual({ protocol: 'dubbo', interface: 'com.acme.Echo' });
  });

  it('refuses garbage and a URL of another interface than its directory', () => {
    expect(() => readProvider('garbage', 'com.acme.Echo')).toThrow(DubboUrlError);
    expect(() => readProvider(node('dubbo://10.0.0.1:1/com.acme.Other?interface=com.acme.Other'), 'com.acme.Echo')).toThrow(/interface "com.acme.Other"/);
  });
});

describe('providerNodeName', () => {
  const all = parseDubboServiceName('com.acme.Echo');

  it('rebuilds a URL Dubbo consumers accept, with the marks as parameters, and reads back the same instance', () => {
    const copy = instance({ metadata: { protocol: 'dubbo', interface: 'com.acme.Echo', version: '1.0.0', 'regsync.origin': 'nacos', 'regsync.path': 'nacos', 'regsync.task': 't1' } });
    const name = providerNodeName(all, copy);
    expect(decodeNodeName(name)).toBe(
      'dubbo://10.0.0.1:20880/com.acme.Echo?interface=com.acme.Echo&regsync.origin=nacos&regsync.path=nacos&regsync.task=t1&version=1.0.0',
    );
    expect(readProvider(name, 'com.acme.Echo').instance).toEqual(copy);
  });

  it('carries weight, a non-default cluster, disabled and persistent so that the same instance reads back', () => {
    const copy = instance({ weight: 5, cluster: 'BJ', enabled: false, ephemeral: false });
    const url = decodeNodeName(providerNodeName(all, copy));
    for (const param of ['weight=5', 'enabled=false', 'dynamic=false', 'regsync.cluster=BJ', 'regsync.derived=dynamic,enabled,weight']) expect(url).toContain(param);
    expect(readProvider(providerNodeName(all, copy), 'com.acme.Echo').instance).toEqual(copy);
    // A weight the metadata already says is its own, and stays.
    const own = instance({ weight: 7, metadata: { ...copy.metadata, weight: '7' } });
    expect(decodeNodeName(providerNodeName(all, own))).not.toContain('regsync.derived');
    expect(readProvider(providerNodeName(all, own), 'com.acme.Echo').instance).toEqual(own);
  });

  it('uses the metadata path when there is one', () => {
    expect(decodeNodeName(providerNodeName(all, instance({ metadata: { protocol: 'tri', interface: 'com.acme.Echo', path: 'ctx/com.acme.Echo' } })))).toBe(
      'tri://10.0.0.1:20880/ctx/com.acme.Echo?interface=com.acme.Echo&path=ctx/com.acme.Echo',
    );
  });

  it('says clearly what is missing or does not match', () => {
    expect(() => providerNodeName(all, instance({ metadata: { interface: 'com.acme.Echo' } }))).toThrow(/no protocol/);
    expect(() => providerNodeName(all, instance({ metadata: { protocol: 'dubbo' } }))).toThrow(/no interface/);
    expect(() => providerNodeName(all, instance({ metadata: { protocol: 'dubbo', interface: 'x.Y' } }))).toThrow(/interface x.Y/);
    const v1 = parseDubboServiceName('providers:com.acme.Echo:1.0.0:');
    expect(() => providerNodeName(v1, instance())).toThrow(/version ""/);
    expect(() => providerNodeName(all, instance({ metadata: { protocol: 'dubbo', interface: 'com.acme.Echo', note: 'a&b' } }))).toThrow(/contains &/);
  });
});
