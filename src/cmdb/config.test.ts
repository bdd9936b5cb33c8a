import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NACOS_SCENARIO_YAML } from '../../test/support/cmdb-fixtures.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { silentLogger } from '../log.js';
import {
  CmdbConfigError,
  CmdbFileError,
  FileCmdbProvider,
  HttpCmdbProvider,
  describeCmdbConfig,
  parseCmdbConfig,
  readCmdbConfig,
  startCmdb,
  type RunningCmdb,
} from './index.js';

let dir: string;
const closers: Array<() => Promise<void>> = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'regsync-cmdb-config-'));
});

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await rm(dir, { recursive: true, force: true });
});

describe('parseCmdbConfig', () => {
  it('reads a file provider config, resolving its path against the config file', () => {
    const config = parseCmdbConfig('provider: file\nfile: ./data/cmdb.yaml\npollMs: 500\nrefreshMs: 30000\neventPollMs: 1000\n', '/etc/regsync/cmdb-config.yaml');
    expect(config).toEqual({ provider: 'file', file: '/etc/regsync/data/cmdb.yaml', pollMs: 500, refreshMs: 30000, eventPollMs: 1000 });
    expect(parseCmdbConfig('provider: file\nfile: /srv/cmdb.json\n', '/etc/regsync/c.yaml')).toEqual({ provider: 'file', file: '/srv/cmdb.json' });
    expect(parseCmdbConfig('provider: file\nfile: cmdb.yaml\n', '/etc/regsync/c.yaml')).toEqual({ provider: 'file', file: '/etc/regsync/cmdb.yaml' });
  });

  it('reads an http provider config with headers', () => {
    const config = parseCmdbConfig(
      'provider: http\nurl: https://cmdb.example/api/labels\nheaders: {Authorization: "Bearer abc"}\npollMs: 10000\ntimeoutMs: 3000\n',
      '/etc/regsync/c.yaml',
    );
    expect(config).toEqual({
      provider: 'http',
      url: 'https://cmdb.example/api/labels',
      headers: { authorization: 'Bearer abc' },
      pollMs: 10000,
      timeoutMs: 3000,
    });
  });

  it('reads a plugin config: relative module paths resolved, package names kept, options passed', () => {
    expect(parseCmdbConfig('provider: plugin\nmodule: ../plugins/my-cmdb.mjs\noptions: {table: {a: 1}}\n', '/etc/regsync/c.yaml')).toEqual({
      provider: 'plugin',
      module: '/etc/plugins/my-cmdb.mjs',
      options: { table: { a: 1 } },
      baseDir: '/etc/regsync',
    });
    expect(parseCmdbConfig('provider: plugin\nmodule: "@acme/regsync-cmdb"\noptions: null\n', '/etc/regsync/c.yaml')).toEqual({
      provider: 'plugin',
      module: '@acme/regsync-cmdb',
      baseDir: '/etc/regsync',
    });
  });

  it('reads JSON config files', () => {
    expect(parseCmdbConfig('{"provider": "file", "file": "cmdb.json", "refreshMs": 1000}', '/etc/regsync/c.json')).toEqual({
      provider: 'file',
      file: '/etc/regsync/cmdb.json',
      refreshMs: 1000,
    });
  });

  const cases: Array<[string, string, string]> = [
    ['invalid YAML', 'provider: [file\n', 'invalid YAML'],
    ['duplicate keys', 'provider: file\nprovider: http\n', 'invalid YAML'],
    ['a document that is not a mapping', '- file\n', 'the document must be a mapping with a "provider" key, got a list'],
    ['an empty document', '', 'the document must be a mapping with a "provider" key, got null'],
    ['a missing provider', 'file: cmdb.yaml\n', 'provider: missing (one of: file, http, plugin)'],
    ['an unknown provider', 'provider: ldap\n', 'provider: must be one of file, http, plugin, got string "ldap"'],
    ['a provider that is not a string', 'provider: 1\n', 'provider: must be one of file, http, plugin, got number 1'],
    ['an unknown key', 'provider: file\nfile: a.yaml\nrefresh: 10\n', 'refresh: unknown key (allowed for provider "file": provider, refreshMs, eventPollMs, file, pollMs)'],
    ['a key of another provider', 'provider: file\nfile: a.yaml\nurl: http://x/\n', 'url: not a setting of provider "file" (it belongs to provider "http")'],
    ['options on the http provider', 'provider: http\nurl: http://x/\noptions: {}\n', 'options: not a setting of provider "http" (it belongs to provider "plugin")'],
    ['a missing file', 'provider: file\n', 'file: missing: provider "file" needs the path of the CMDB data file'],
    ['a file that is not a string', 'provider: file\nfile: 7\n', 'file: must be a string, got number 7'],
    ['a blank file', 'provider: file\nfile: " "\n', 'file: must not be blank'],
    ['a missing url', 'provider: http\n', 'url: missing: provider "http" needs the URL of the CMDB document'],
    ['a url that is not a string', 'provider: http\nurl: {a: 1}\n', 'url: must be a string, got object'],
    ['an invalid url', 'provider: http\nurl: "cmdb.example/labels?token=s3cr3t"\n', 'url: not a valid absolute URL'],
    ['a url of another protocol', 'provider: http\nurl: "ftp://cmdb.example/labels"\n', 'url: unsupported protocol "ftp:"'],
    ['headers that are not a mapping', 'provider: http\nurl: http://x/\nheaders: [a]\n', 'headers: must be a mapping of header name to value, got a list'],
    ['a header value that is not a string', 'provider: http\nurl: http://x/\nheaders: {X-Token: 12345}\n', 'headers.X-Token: the value must be a string, got number'],
    ['an invalid header name', 'provider: http\nurl: http://x/\nheaders: {"X Token": s3cr3t}\n', 'headers.X Token: not a valid header name'],
    ['a missing module', 'provider: plugin\n', 'module: missing: provider "plugin" needs the plug-in module (a path or a package name)'],
    ['options that are not a mapping', 'provider: plugin\nmodule: ./p.mjs\noptions: [a]\n', 'options: must be a mapping (passed to the plug-in), got a list'],
    ['a duration that is not a number', 'provider: file\nfile: a.yaml\nrefreshMs: 10s\n', 'refreshMs: must be a positive integer number of milliseconds, got string "10s"'],
    ['a zero duration', 'provider: file\nfile: a.yaml\neventPollMs: 0\n', 'eventPollMs: must be a positive integer number of milliseconds, got number 0'],
    ['a fractional duration', 'provider: http\nurl: http://x/\ntimeoutMs: 1.5\n', 'timeoutMs: must be a positive integer number of milliseconds, got number 1.5'],
    ['a negative poll period', 'provider: file\nfile: a.yaml\npollMs: -1\n', 'pollMs: must be a positive integer number of milliseconds, got number -1'],
  ];
  it.each(cases)('rejects %s', (_name, text, expected) => {
    let error: unknown;
    try {
      parseCmdbConfig(text, '/etc/regsync/c.yaml');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(CmdbConfigError);
    expect((error as Error).message.startsWith(`/etc/regsync/c.yaml: ${expected}`), (error as Error).message).toBe(true);
    expect((error as Error).message).not.toContain('s3cr3t');
    expect((error as CmdbConfigError).code).toBe('invalid_cmdb_config');
  });

  it('rejects invalid JSON', () => {
    expect(() => parseCmdbConfig('{"provider": ', '/etc/regsync/c.json')).toThrow(/^\/etc\/regsync\/c\.json: invalid JSON/);
  });

  it('names a config file that is missing', () => {
    const path = join(dir, 'absent.yaml');
    expect(() => readCmdbConfig(path)).toThrow(new CmdbConfigError(path, '', 'file not found'));
  });
});

describe('describeCmdbConfig', () => {
  it('describes each provider without secrets', () => {
    expect(describeCmdbConfig({ provider: 'file', file: '/srv/cmdb.yaml' })).toBe('file /srv/cmdb.yaml');
    expect(describeCmdbConfig({ provider: 'http', url: 'https://u:p@cmdb.example/l?token=abc#x' })).toBe('http https://cmdb.example/l?token=***');
    expect(describeCmdbConfig({ provider: 'plugin', module: '@acme/cmdb', baseDir: '/etc' })).toBe('plugin @acme/cmdb');
  });
});

describe('startCmdb', () => {
  it('starts a file provider and a cache in front of it; close stops both', async () => {
    await writeFile(join(dir, 'cmdb.yaml'), NACOS_SCENARIO_YAML);
    const configFile = join(dir, 'cmdb-config.yaml');
    await writeFile(configFile, 'provider: file\nfile: cmdb.yaml\npollMs: 50\neventPollMs: 50\n');
    const running = await startCmdb(readCmdbConfig(configFile), silentLogger());
    closers.push(() => running.close());
    expect(running.describe).toBe(`file ${join(dir, 'cmdb.yaml')}`);
    expect(running.provider).toBeInstanceOf(FileCmdbProvider);
    expect(running.cache.eventPollMs).toBe(50);
    expect(running.cache.refreshMs).toBe(60_000);
    expect(running.cache.labelsOf('44.44.44.44')).toEqual({ site: 'x12' });

    await writeFile(join(dir, 'cmdb.yaml'), NACOS_SCENARIO_YAML.replace('44.44.44.44: {site: x12}', '44.44.44.44: {site: x11}'));
    await waitUntil(() => running.cache.labelsOf('44.44.44.44').site === 'x11', { message: 'the change through the cache' });

    await running.close();
    await running.close();
    // Closed: the file is no longer followed.
    await writeFile(join(dir, 'cmdb.yaml'), NACOS_SCENARIO_YAML.replace('44.44.44.44: {site: x12}', '44.44.44.44: {site: x13}'));
    expect(await (running.provider as FileCmdbProvider).reload()).toBe(true);
    expect(running.cache.labelsOf('44.44.44.44').site).toBe('x11');
  });

  it('refuses to start on an invalid first CMDB file', async () => {
    await writeFile(join(dir, 'cmdb.yaml'), 'entities: {ip: {1.1.1.1: {site: x11}}}\n');
    const error = await startCmdb({ provider: 'file', file: join(dir, 'cmdb.yaml') }, silentLogger()).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CmdbFileError);
    expect((error as Error).message).toContain('label "site" is not declared');
  });

  it('starts an http provider even when the CMDB is down, and picks the labels up once it answers', async () => {
    let status = 503;
    const server: Server = createServer((req, res) => {
      if (req.headers.authorization !== 'Bearer abc') res.writeHead(401).end();
      else res.writeHead(status, { 'content-type': 'application/yaml' }).end(status === 200 ? NACOS_SCENARIO_YAML : '');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    closers.push(
      () =>
        new Promise<void>((resolve) => {
          server.closeAllConnections();
          server.close(() => resolve());
        }),
    );
    const port = (server.address() as AddressInfo).port;
    const configFile = join(dir, 'cmdb-config.yaml');
    await writeFile(
      configFile,
      `provider: http\nurl: "http://127.0.0.1:${port}/cmdb?key=s3cr3t"\nheaders: {Authorization: Bearer abc}\npollMs: 50\neventPollMs: 50\nrefreshMs: 3600000\n`,
    );
    const running: RunningCmdb = await startCmdb(readCmdbConfig(configFile), silentLogger());
    closers.push(() => running.close());
    expect(running.provider).toBeInstanceOf(HttpCmdbProvider);
    expect(running.describe).toBe(`http http://127.0.0.1:${port}/cmdb?key=***`);
    expect(running.cache.status()).toMatchObject({ ok: false, entities: 0 });
    expect(running.cache.status().lastError!.message).toContain('HTTP 503');

    status = 200;
    // No full refresh is due for an hour: the labels arrive through the provider's events.
    await waitUntil(() => running.cache.status().ok, { message: 'the CMDB to answer' });
    await waitUntil(() => running.cache.labelsOf('11.11.11.11').site === 'x11', { message: 'labels through events' });
    expect(running.cache.status().entities).toBe(5);
  });
});
