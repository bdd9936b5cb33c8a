import { describe, expect, it } from 'vitest';
import { DubboUrlError, decodeNodeName, encodeNodeName, formatDubboUrl, parseDubboUrl } from './dubbo-url.js';

const SAMPLE =
  'dubbo://192.168.43.11:20880/es.EchoService?anyhost=true&application=api-provider&dubbo=2.0.2&dynamic=true&interface=es.EchoService&methods=echo&pid=19728&release=2.7.15&side=provider&timestamp=1650000000000';

describe('parseDubboUrl', () => {
  it('splits a provider URL into protocol, host, port, path and every parameter', () => {
    expect(parseDubboUrl(SAMPLE)).toEqual({
      protocol: 'dubbo',
      host: '192.168.43.11',
      port: 20880,
      path: 'es.EchoService',
      params: {
        anyhost: 'true',
        application: 'api-provider',
        dubbo: '2.0.2',
        dynamic: 'true',
        interface: 'es.EchoService',
        methods: 'echo',
        pid: '19728',
        release: '2.7.15',
        side: 'provider',
        timestamp: '1650000000000',
      },
    });
  });

  it('reads parameters as Dubbo does: first = splits, a bare key is key=key, empty parts vanish', () => {
    const url = parseDubboUrl('tri://10.0.0.1:50051/a.B?x=1=2&flag&&y=&=z');
    expect(url.params).toEqual({ x: '1=2', flag: 'flag', y: '' });
  });

  it('ignores user info and reads bracketed IPv6 hosts', () => {
    expect(parseDubboUrl('dubbo://admin:secret@10.0.0.2:20880/a.B')).toMatchObject({ host: '10.0.0.2', port: 20880, params: {} });
    expect(parseDubboUrl('dubbo://[fe80::1]:20880/a.B?k=v')).toMatchObject({ host: 'fe80::1', port: 20880, params: { k: 'v' } });
  });

  it.each([
    ['not a url at all', 'protocol'],
    ['://10.0.0.1:1/a', 'protocol'],
    ['dubbo://:20880/a', 'host'],
    ['dubbo://10.0.0.1/a.B', 'port'],
    ['dubbo://10.0.0.1:0/a.B', 'outside'],
    ['dubbo://10.0.0.1:70000/a.B', 'outside'],
    ['dubbo://10.0.0.1:http/a.B', 'port'],
    ['dubbo://[fe80::1/a.B', 'unclosed'],
  ])('refuses %s', (text, why) => {
    expect(() => parseDubboUrl(text)).toThrow(DubboUrlError);
    expect(() => parseDubboUrl(text)).toThrow(new RegExp(why));
  });
});

describe('formatDubboUrl', () => {
  it('sorts the parameters, so one instance always gives one node name, and round-trips', () => {
    const url = { protocol: 'dubbo', host: '10.0.0.1', port: 20880, path: 'a.B', params: { z: '1', a: '2', 'regsync.path': 'zk1,nacos' } };
    const text = formatDubboUrl(url);
    expect(text).toBe('dubbo://10.0.0.1:20880/a.B?a=2&regsync.path=zk1,nacos&z=1');
    expect(parseDubboUrl(text)).toEqual(url);
  });

  it('brackets IPv6 hosts and leaves the query out when there are no parameters', () => {
    expect(formatDubboUrl({ protocol: 'dubbo', host: 'fe80::1', port: 1, path: 'a.B', params: {} })).toBe('dubbo://[fe80::1]:1/a.B');
  });

  it.each([
    [{ 'a&b': '1' }, 'parameter name'],
    [{ 'a=b': '1' }, 'parameter name'],
    [{ a: 'x&y' }, 'contains &'],
  ])('refuses parameters a query cannot hold: %j', (params, why) => {
    expect(() => formatDubboUrl({ protocol: 'dubbo', host: '10.0.0.1', port: 1, path: 'a.B', params })).toThrow(new RegExp(why));
  });

  it('refuses a bad protocol or host', () => {
    expect(() => formatDubboUrl({ protocol: '1x', host: '10.0.0.1', port: 1, path: 'a', params: {} })).toThrow(/protocol/);
    expect(() => formatDubboUrl({ protocol: 'dubbo', host: 'a/b', port: 1, path: 'a', params: {} })).toThrow(/host/);
  });
});

describe('node name encoding', () => {
  it('matches java.net.URLEncoder (what Dubbo writes)', () => {
    // URLEncoder.encode("dubbo://10.0.0.1:20880/a.B?x=a b&y=*~!'()", "UTF-8")
    expect(encodeNodeName("dubbo://10.0.0.1:20880/a.B?x=a b&y=*~!'()")).toBe(
      'dubbo%3A%2F%2F10.0.0.1%3A20880%2Fa.B%3Fx%3Da+b%26y%3D*%7E%21%27%28%29',
    );
    expect(encodeNodeName('é')).toBe('%C3%A9');
  });

  it('decodes what it encodes, and Dubbo-written names', () => {
    expect(decodeNodeName(encodeNodeName(SAMPLE))).toBe(SAMPLE);
    expect(decodeNodeName('dubbo%3A%2F%2F10.0.0.1%3A1%2Fa%3Fk%3Dv+w')).toBe('dubbo://10.0.0.1:1/a?k=v w');
  });

  it('refuses a malformed escape', () => {
    expect(() => decodeNodeName('dubbo%3A%2F%2F%ZZ')).toThrow(DubboUrlError);
  });
});
