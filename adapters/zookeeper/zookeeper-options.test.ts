import { describe, expect, it } from 'vitest';
import { ZooKeeperConfigError } from './zookeeper-config-error.js';
import { DEFAULT_ZOOKEEPER_OPTIONS, parseZooKeeperEndpoint, parseZooKeeperOptions } from './zookeeper-options.js';

const parse = (options: Record<string, unknown>) => parseZooKeeperOptions({ id: 'zk', options });

describe('parseZooKeeperOptions', () => {
  it('defaults to the Dubbo layout under /dubbo, and Curator under /services', () => {
    expect(parse({})).toEqual({ ...DEFAULT_ZOOKEEPER_OPTIONS, layout: 'dubbo', root: '/dubbo' });
    expect(parse({ layout: 'curator' }).root).toBe('/services');
  });

  it('normalises the root and reads numbers given as strings', () => {
    expect(parse({ root: 'dubbo/' }).root).toBe('/dubbo');
    expect(parse({ root: '/a/b' }).root).toBe('/a/b');
    expect(parse({ sessionTimeoutMs: '4000' }).sessionTimeoutMs).toBe(4000);
  });

  it('ignores unknown keys (the engine reads aliases from the same options)', () => {
    expect(parse({ aliases: ['old'], future: 1 }).layout).toBe('dubbo');
  });

  it.each([
    [{ layout: 'eureka' }, 'options.layout'],
    [{ root: '/' }, 'options.root'],
    [{ root: '/a//b' }, 'options.root'],
    [{ root: '/a/../b' }, 'options.root'],
    [{ root: 7 }, 'options.root'],
    [{ sessionTimeoutMs: 0 }, 'options.sessionTimeoutMs'],
    [{ connectTimeoutMs: 1.5 }, 'options.connectTimeoutMs'],
    [{ operationTimeoutMs: 'soon' }, 'options.operationTimeoutMs'],
  ])('refuses %j', (options, setting) => {
    expect(() => parse(options)).toThrow(ZooKeeperConfigError);
    expect(() => parse(options)).toThrow(setting);
  });
});

describe('parseZooKeeperEndpoint', () => {
  it('reads host:port and host (port 2181)', () => {
    expect(parseZooKeeperEndpoint('zk', '127.0.0.1:2182')).toEqual({ host: '127.0.0.1', port: 2182, label: '127.0.0.1:2182' });
    expect(parseZooKeeperEndpoint('zk', ' zk-1.internal ')).toEqual({ host: 'zk-1.internal', port: 2181, label: 'zk-1.internal:2181' });
  });

  it.each([
    ['127.0.0.1:2181/chroot', 'options.root'],
    ['[::1]:2181', 'IPv6'],
    ['a:b:c', 'not host:port'],
    ['host:0', 'outside'],
    ['a,b', 'not host:port'],
  ])('refuses %s', (text, why) => {
    expect(() => parseZooKeeperEndpoint('zk', text)).toThrow(ZooKeeperConfigError);
    expect(() => parseZooKeeperEndpoint('zk', text)).toThrow(why);
  });
});
