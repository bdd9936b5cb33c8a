import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { ClusterSpec } from '../../src/model/index.js';
import { createNacosAdapter } from './nacos-adapter.js';
import { NacosConfigError } from './nacos-config-error.js';
import { DEFAULT_NACOS_OPTIONS, parseEndpoint, parseNacosOptions } from './nacos-options.js';

const spec = (over: Partial<ClusterSpec> = {}): ClusterSpec => ({
  id: 'c1',
  kind: 'nacos',
  endpoints: ['127.0.0.1:8848'],
  labels: {},
  options: {},
  ...over,
});

describe('Nacos options', () => {
  it('defaults every option', () => {
    expect(parseNacosOptions(spec())).toEqual(DEFAULT_NACOS_OPTIONS);
    expect(DEFAULT_NACOS_OPTIONS).toMatchObject({ apiVersion: 'auto', pollIntervalMs: 5000, maxConcurrency: 64, requestTimeoutMs: 5000, serviceListPollIntervalMs: 10000 });
  });

  it('reads given options, numbers also as strings (YAML, env)', () => {
    const options = parseNacosOptions(
      spec({ options: { apiVersion: 'v3', clientIP: '10.0.0.9', pollIntervalMs: '250', maxConcurrency: 4, contextPath: '/naming/' } }),
    );
    expect(options).toMatchObject({ apiVersion: 'v3', clientIP: '10.0.0.9', pollIntervalMs: 250, maxConcurrency: 4, contextPath: '/naming' });
  });

  it.each([
    [{ apiVersion: 'v2' }, 'options.apiVersion'],
    [{ pollIntervalMs: 0 }, 'options.pollIntervalMs'],
    [{ serviceListPollIntervalMs: -1 }, 'options.serviceListPollIntervalMs'],
    [{ maxConcurrency: 1.5 }, 'options.maxConcurrency'],
    [{ requestTimeoutMs: 'soon' }, 'options.requestTimeoutMs'],
    [{ clientIP: 'my-host' }, 'options.clientIP'],
    [{ lightBeats: 'yes' }, 'options.lightBeats'],
    [{ contextPath: 'nacos?x' }, 'options.contextPath'],
  ])('refuses %j', (options, setting) => {
    expect(() => parseNacosOptions(spec({ options }))).toThrow(expect.objectContaining({ name: 'NacosConfigError', code: 'nacos-config-invalid', setting }));
  });

  it('parses endpoints in the forms operators write them', () => {
    expect(parseEndpoint('c', '10.0.0.1:8848')).toEqual({ origin: 'http://10.0.0.1:8848', host: '10.0.0.1', port: 8848, label: '10.0.0.1:8848' });
    expect(parseEndpoint('c', 'nacos.local')).toMatchObject({ origin: 'http://nacos.local:8848', port: 8848 });
    expect(parseEndpoint('c', '[::1]:9000')).toEqual({ origin: 'http://[::1]:9000', host: '::1', port: 9000, label: '[::1]:9000' });
    expect(parseEndpoint('c', 'https://nacos.example.com')).toMatchObject({ origin: 'https://nacos.example.com:443', port: 443 });
    expect(() => parseEndpoint('c', 'http://h:1/nacos')).toThrow(NacosConfigError);
    expect(() => parseEndpoint('c', 'ftp://h:1')).toThrow(NacosConfigError);
  });

  it('refuses a cluster it cannot work with, before connecting', () => {
    const deps = { logger: pino({ level: 'silent' }) };
    expect(() => createNacosAdapter(spec({ endpoints: [] }), deps)).toThrow(NacosConfigError);
    expect(() => createNacosAdapter(spec({ username: 'nacos' }), deps)).toThrow(/give both or neither/);
    expect(() => createNacosAdapter(spec({ kind: 'zookeeper' }), deps)).toThrow(NacosConfigError);
  });
});
