import { describe, expect, it } from 'vitest';
import { ClusterConfigError } from '../../src/model/index.js';
import { ConsulConfigError } from './consul-config-error.js';
import { consulKind } from './consul-kind.js';
import { CONSUL_OPTIONS, DEFAULT_CONSUL_OPTIONS, parseConsulCluster, parseConsulOptions } from './consul-options.js';

const parse = (options: Record<string, unknown>) => parseConsulOptions({ id: 'c', options });

/** The error a bad definition throws. */
const refusal = (run: () => unknown): ConsulConfigError => {
  try {
    run();
  } catch (err) {
    if (err instanceof ConsulConfigError) return err;
    throw err;
  }
  throw new Error('expected a ConsulConfigError');
};

describe('parseConsulOptions', () => {
  it('fills every default', () => {
    expect(parse({})).toEqual(DEFAULT_CONSUL_OPTIONS);
    expect(DEFAULT_CONSUL_OPTIONS).toMatchObject({
      scheme: 'http',
      nodeName: 'regsync',
      nodeAddress: '127.0.0.1',
      group: 'DEFAULT_GROUP',
      includeWarning: false,
      stale: false,
      ignoreServices: ['consul'],
      tlsSkipVerify: false,
      requestTimeoutMs: 10_000,
      blockingWaitMs: 60_000,
      blockingMinIntervalMs: 250,
      backoffMaxMs: 30_000,
      writeConcurrency: 16,
      maxBlockingQueries: 100,
      pollIntervalMs: 5_000,
    });
    for (const name of ['datacenter', 'consulNamespace', 'partition', 'tlsCaFile', 'tlsCertFile', 'tlsKeyFile', 'tlsServerName'] as const) expect(DEFAULT_CONSUL_OPTIONS[name]).toBeUndefined();
  });

  it('describes every option for the kinds API', () => {
    expect(Object.keys(CONSUL_OPTIONS).sort()).toEqual(Object.keys(DEFAULT_CONSUL_OPTIONS).sort());
  });

  it('reads every option, integers also as strings, and ignores unknown keys', () => {
    const o = parse({
      datacenter: 'dc2',
      consulNamespace: 'team-a',
      partition: 'p1',
      nodeName: 'regsync-east',
      nodeAddress: '192.0.2.1',
      group: 'CONSUL',
      includeWarning: true,
      stale: true,
      ignoreServices: ['consul', 'vault'],
      requestTimeoutMs: '2000',
      blockingWaitMs: 5000,
      blockingMinIntervalMs: 0,
      backoffMaxMs: 100,
      writeConcurrency: 4,
      somethingNew: 1,
    });
    expect(o).toEqual({
      ...DEFAULT_CONSUL_OPTIONS,
      datacenter: 'dc2',
      consulNamespace: 'team-a',
      partition: 'p1',
      nodeName: 'regsync-east',
      nodeAddress: '192.0.2.1',
      group: 'CONSUL',
      includeWarning: true,
      stale: true,
      ignoreServices: ['consul', 'vault'],
      requestTimeoutMs: 2000,
      blockingWaitMs: 5000,
      blockingMinIntervalMs: 0,
      backoffMaxMs: 100,
      writeConcurrency: 4,
    });
    expect(parse({ ignoreServices: [] }).ignoreServices).toEqual([]);
    // No blocking query at all: every watch polls.
    expect(parse({ maxBlockingQueries: 0, pollIntervalMs: '1000' })).toMatchObject({ maxBlockingQueries: 0, pollIntervalMs: 1000 });
  });

  it.each([
    ['requestTimeoutMs', 0],
    ['requestTimeoutMs', 1.5],
    ['requestTimeoutMs', 'soon'],
    ['requestTimeoutMs', ''],
    ['blockingWaitMs', 999],
    ['blockingWaitMs', 600_001],
    ['blockingMinIntervalMs', -1],
    ['backoffMaxMs', 99],
    ['writeConcurrency', 0],
    ['writeConcurrency', 257],
    ['includeWarning', 'yes'],
    ['stale', 1],
    ['tlsSkipVerify', 'true'],
    ['datacenter', ''],
    ['datacenter', 'dc 1'],
    ['datacenter', 7],
    ['consulNamespace', 'a/b'],
    ['partition', '-p'],
    ['nodeName', 'x'.repeat(129)],
    ['nodeName', 'my node'],
    ['nodeAddress', ''],
    ['group', ''],
    ['tlsCaFile', ''],
    ['tlsCaFile', 'x'.repeat(4097)],
    ['tlsCertFile', ''],
    ['tlsKeyFile', 5],
    ['tlsServerName', ''],
    ['blockingMinIntervalMs', 3_600_001],
    ['requestTimeoutMs', 600_001],
    ['maxBlockingQueries', -1],
    ['maxBlockingQueries', 10_001],
    ['pollIntervalMs', 99],
    ['scheme', 'ftp'],
    ['ignoreServices', 'consul'],
    ['ignoreServices', ['consul', '']],
    ['ignoreServices', [1]],
  ])('names the bad option %s (%j)', (name, value) => {
    const err = refusal(() => parse({ [name]: value }));
    expect(err.setting).toBe(`options.${name}`);
    expect(err.code).toBe('consul-config-invalid');
    expect(err.clusterId).toBe('c');
    expect(err.message).toContain(`consul cluster c: invalid options.${name}: `);
  });

  it('says what a bad value should be', () => {
    expect(refusal(() => parse({ writeConcurrency: 0 })).detail).toBe('expected an integer from 1 to 256, got 0');
    expect(refusal(() => parse({ stale: 'yes' })).detail).toBe('expected true or false, got "yes"');
    expect(refusal(() => parse({ scheme: 'ftp' })).detail).toBe('expected http or https, got "ftp"');
  });

  it('turns https on with any TLS option, and refuses TLS options over http', () => {
    expect(parse({ tlsCaFile: '/etc/consul/ca.pem' })).toMatchObject({ scheme: 'https', tlsCaFile: '/etc/consul/ca.pem' });
    expect(parse({ tlsServerName: 'consul.example.com' }).scheme).toBe('https');
    expect(parse({ tlsSkipVerify: true }).scheme).toBe('https');
    expect(parse({ tlsSkipVerify: false }).scheme).toBe('http');
    expect(parse({ scheme: 'https' })).toMatchObject({ scheme: 'https', tlsCaFile: undefined });
    const over = refusal(() => parse({ scheme: 'http', tlsCaFile: '/ca.pem' }));
    expect(over.setting).toBe('options.scheme');
    expect(over.detail).toBe('TLS options need scheme https');
  });

  it('takes a client certificate and its key together only', () => {
    expect(parse({ tlsCertFile: '/c.pem', tlsKeyFile: '/k.pem' })).toMatchObject({ scheme: 'https', tlsCertFile: '/c.pem', tlsKeyFile: '/k.pem' });
    const noKey = refusal(() => parse({ tlsCertFile: '/c.pem' }));
    expect(noKey.setting).toBe('options.tlsKeyFile');
    expect(noKey.detail).toBe('tlsCertFile and tlsKeyFile go together');
    expect(refusal(() => parse({ tlsKeyFile: '/k.pem' })).setting).toBe('options.tlsCertFile');
  });
});

describe('parseConsulCluster', () => {
  const spec = (over: Record<string, unknown> = {}) => ({ id: 'c', endpoints: ['127.0.0.1:8500'], options: {}, ...over }) as Parameters<typeof parseConsulCluster>[0];

  it('parses endpoints, with 8500 as the default port and IPv6 in brackets', () => {
    const c = parseConsulCluster(spec({ endpoints: ['consul-1.example.com', '10.0.0.2:8501', ' 10.0.0.3 ', '[::1]:8502', '[fd00::1]'] }));
    expect(c.endpoints).toEqual([
      { host: 'consul-1.example.com', port: 8500 },
      { host: '10.0.0.2', port: 8501 },
      { host: '10.0.0.3', port: 8500 },
      { host: '::1', port: 8502 },
      { host: 'fd00::1', port: 8500 },
    ]);
  });

  it.each([[[]], [['']], [['host:0']], [['host:65536']], [['host:port']], [['http://consul:8500']], [['a b:1']], [['::1']], [['host:8500/v1']]])('refuses endpoints %j', (endpoints) => {
    const err = refusal(() => parseConsulCluster(spec({ endpoints })));
    expect(err.setting).toBe('endpoints');
  });

  it('takes the ACL token from password and refuses a user name', () => {
    expect(parseConsulCluster(spec({ password: 'secret-token' })).token).toBe('secret-token');
    expect(parseConsulCluster(spec()).token).toBeUndefined();
    expect(parseConsulCluster(spec({ password: '' })).token).toBeUndefined();
    // An empty user name is no user name (forms send one).
    expect(parseConsulCluster(spec({ username: '', password: 't' })).token).toBe('t');
    const err = refusal(() => parseConsulCluster(spec({ username: 'admin', password: 't' })));
    expect(err.setting).toBe('username');
    expect(err.detail).toContain('put the ACL token in password');
    // The token never appears in a refusal.
    expect(refusal(() => parseConsulCluster(spec({ password: 'secret-token', options: { stale: 'x' } }))).message).not.toContain('secret-token');
  });

  it("keys its services under the cluster's namespace (default public) and options.group", () => {
    expect(parseConsulCluster(spec()).namespace).toBe('public');
    expect(parseConsulCluster(spec({ namespace: 'prod' })).namespace).toBe('prod');
    expect(parseConsulCluster(spec({ options: { group: 'CONSUL' } })).options.group).toBe('CONSUL');
  });
});

describe('consulKind.validate', () => {
  it('checks a definition as the factory does, without reading the TLS files, as a ClusterConfigError', () => {
    const spec = { id: 'c', kind: 'consul', endpoints: ['127.0.0.1:8500'], labels: {}, options: { tlsCaFile: '/on/the/workers/ca.pem' } };
    expect(() => consulKind.validate(spec)).not.toThrow();
    let thrown: unknown;
    try {
      consulKind.validate({ ...spec, options: { writeConcurrency: 0 } });
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(ClusterConfigError);
    expect(thrown).toMatchObject({ setting: 'options.writeConcurrency', detail: 'expected an integer from 1 to 256, got 0' });
    expect((thrown as Error).cause).toBeInstanceOf(ConsulConfigError);
  });
});
