import { mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitUntil } from '../../test/support/wait-until.js';
import {
  CmdbPluginError,
  PluginCmdbProvider,
  loadCmdbPlugin,
  readCmdbConfig,
  resolvePluginModule,
  startCmdb,
  type CmdbProvider,
  type RunningCmdb,
} from './index.js';
import { silentLogger } from '../log.js';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const FIXTURES = join(REPO, 'test/fixtures/cmdb-plugins');
const EXAMPLE = join(REPO, 'examples/cmdb-plugin');

let dir: string;
const closers: Array<() => Promise<void>> = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'regsync-cmdb-plugin-'));
});

afterEach(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  await rm(dir, { recursive: true, force: true });
});

async function start(configYaml: string): Promise<RunningCmdb> {
  const file = join(dir, 'cmdb-config.yaml');
  await writeFile(file, configYaml);
  const running = await startCmdb(readCmdbConfig(file), silentLogger());
  closers.push(() => running.close());
  return running;
}

async function loadError(module: string, options?: Record<string, unknown>): Promise<CmdbPluginError> {
  const error = await loadCmdbPlugin({ module, baseDir: FIXTURES, ...(options ? { options } : {}) }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(CmdbPluginError);
  return error as CmdbPluginError;
}

describe('the example plug-in', () => {
  it('serves its table through the CmdbCache, configured by its own config file', async () => {
    const running = await startCmdb(readCmdbConfig(join(EXAMPLE, 'cmdb-config.yaml')), silentLogger());
    closers.push(() => running.close());
    expect(running.describe).toBe(`plugin ${join(EXAMPLE, 'static-cmdb.mjs')}`);
    const { cache } = running;
    expect(cache.labelsOf('11.11.11.11')).toEqual({ site: 'x11' });
    expect(cache.labelsOf('44.44.44.44')).toEqual({ site: 'x12' });
    expect(cache.labelsOf('55.55.55.55')).toEqual({ site: 'x13' });
    expect(cache.labelsOf('66.66.66.66')).toEqual({});
    expect(cache.status()).toMatchObject({ ok: true, entities: 5, lastError: undefined });
    expect(await running.provider.label('site')).toEqual({ name: 'site', values: ['x11', 'x12', 'x13'] });
    expect(await running.provider.labelValue('22.22.22.22', 'ip', 'site')).toBe('x12');
    expect(await running.provider.events(0)).toEqual([]);
  });

  it('loads from a path relative to the config file and rejects bad options with its own message', async () => {
    const module = relative(dir, join(EXAMPLE, 'static-cmdb.mjs'));
    const running = await start(`provider: plugin\nmodule: ./${module}\noptions: {ips: {10.1.1.1: {zone: z1}}}\n`);
    expect(running.cache.labelsOf('10.1.1.1')).toEqual({ zone: 'z1' });

    const error = await start(`provider: plugin\nmodule: ./${module}\noptions: {labels: {site: [x11]}, ips: {10.1.1.1: {site: x12}}}\n`).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CmdbPluginError);
    expect((error as CmdbPluginError).code).toBe('factory_failed');
    expect((error as Error).message).toBe(
      `CMDB plug-in ${join(EXAMPLE, 'static-cmdb.mjs')}: createCmdbProvider failed: options.ips["10.1.1.1"].site: "x12" is not one of x11`,
    );
  });
});

describe('loadCmdbPlugin', () => {
  it('accepts a default export and passes the options', async () => {
    const running = await start(`provider: plugin\nmodule: ${join(FIXTURES, 'default-export.mjs')}\noptions: {ips: {10.0.0.7: {rack: r7}}}\neventPollMs: 50\n`);
    expect(running.cache.labelsOf('10.0.0.7')).toEqual({ rack: 'r7' });
    expect(running.provider).toBeInstanceOf(PluginCmdbProvider);
    expect(await running.provider.labelNames()).toEqual(['rack']);
  });

  it('fails at load when the provider lacks SPI methods, naming the module and the methods', async () => {
    const error = await loadError('./missing-method.mjs');
    expect(error.code).toBe('invalid_provider');
    expect(error.message).toBe(
      'CMDB plug-in ./missing-method.mjs: the provider returned by createCmdbProvider lacks the methods "entity", "events" ' +
        '(required: labelNames, entityTypes, label, labelValue, labelValues, allEntities, entity, events)',
    );
  });

  it('fails at load when the module exports no factory, or the factory throws', async () => {
    const noFactory = await loadError('./no-factory.mjs');
    expect(noFactory.code).toBe('no_factory');
    expect(noFactory.message).toBe(
      'CMDB plug-in ./no-factory.mjs: the module exports no createCmdbProvider function (nor a default export of one); exports: createProvider, version',
    );
    const throws = await loadError('./factory-throws.mjs', { endpoint: 'inventory.example:443' });
    expect(throws.code).toBe('factory_failed');
    expect(throws.message).toBe('CMDB plug-in ./factory-throws.mjs: createCmdbProvider failed: cannot reach inventory.example:443');
    expect((throws.cause as Error).message).toBe('cannot reach inventory.example:443');
  });

  it('fails at load when the module cannot be found, hinting at ./ for a bare file name', async () => {
    const missing = await loadError('./no-such-plugin.mjs');
    expect(missing.code).toBe('load_failed');
    expect(missing.message).toContain(`CMDB plug-in ./no-such-plugin.mjs: cannot import ${resolvePluginModule('./no-such-plugin.mjs', FIXTURES)}`);
    const bare = await loadError('flaky.mjs');
    expect(bare.code).toBe('load_failed');
    expect(bare.message).toContain(`a file of that name exists in ${FIXTURES}: write "./flaky.mjs" to load it as a path`);
  });

  it('resolves paths against the base directory and leaves unknown packages bare', () => {
    expect(resolvePluginModule('./a.mjs', '/etc/regsync')).toBe('file:///etc/regsync/a.mjs');
    expect(resolvePluginModule('../lib/a.mjs', '/etc/regsync')).toBe('file:///etc/lib/a.mjs');
    expect(resolvePluginModule('/opt/cmdb/a.mjs', '/etc/regsync')).toBe('file:///opt/cmdb/a.mjs');
    expect(resolvePluginModule('file:///opt/cmdb/a.mjs', '/etc/regsync')).toBe('file:///opt/cmdb/a.mjs');
    expect(resolvePluginModule('regsync-cmdb-nonexistent', '/etc/regsync')).toBe('regsync-cmdb-nonexistent');
    // A package installed where the config lives is found from there.
    expect(resolvePluginModule('yaml', REPO)).toMatch(/^file:\/\/.*\/node_modules\/yaml\//);
  });
});

describe('a plug-in whose methods throw', () => {
  it('keeps the cache\'s last good labels and shows the error in its status', async () => {
    const failFlag = join(dir, 'fail');
    const running = await start(
      `provider: plugin\nmodule: ${join(FIXTURES, 'flaky.mjs')}\noptions: {failFlag: ${JSON.stringify(failFlag)}, ips: {11.11.11.11: {site: x11}}}\nrefreshMs: 50\neventPollMs: 50\n`,
    );
    const { cache, provider } = running;
    expect(cache.labelsOf('11.11.11.11')).toEqual({ site: 'x11' });

    await writeFile(failFlag, '');
    // The plug-in throws synchronously; the wrapper hands out a rejection instead.
    const pending = provider.labelNames();
    expect(pending).toBeInstanceOf(Promise);
    await expect(pending).rejects.toThrow(`CMDB plug-in ${join(FIXTURES, 'flaky.mjs')}: labelNames() failed: inventory backend unavailable`);

    await waitUntil(() => cache.status().ok === false, { message: 'the failure in the cache status' });
    const status = cache.status();
    expect(status.lastError).toMatchObject({ source: 'cache' });
    expect(status.lastError!.message).toMatch(/^(full refresh|event poll) failed: CMDB plug-in .*flaky\.mjs: (allEntities|events)\(\) failed: inventory backend unavailable$/);
    expect(await cache.refresh()).toBe(false);
    expect(cache.labelsOf('11.11.11.11')).toEqual({ site: 'x11' });
    expect(cache.status().entities).toBe(1);

    await unlink(failFlag);
    await waitUntil(() => cache.status().ok, { message: 'recovery' });
    expect(cache.labelsOf('11.11.11.11')).toEqual({ site: 'x11' });
  });

  it('rejects answers of the wrong shape with a message saying what was due', async () => {
    const running = await start(`provider: plugin\nmodule: ${join(FIXTURES, 'wrong-shape.mjs')}\n`);
    expect(running.cache.status().ok).toBe(false);
    expect(running.cache.status().lastError!.message).toBe(
      `full refresh failed: CMDB plug-in ${join(FIXTURES, 'wrong-shape.mjs')}: allEntities() must resolve to a Map of entity type to a Map of entity name to entity, got object`,
    );
    expect(running.cache.labelsOf('11.11.11.11')).toEqual({});
  });
});

describe('PluginCmdbProvider', () => {
  it('reports the plug-in\'s own problem, and a throwing lastError, without throwing', async () => {
    let mode: 'ok' | 'degraded' | 'broken' = 'ok';
    const inner: CmdbProvider = {
      labelNames: async () => [],
      entityTypes: async () => [],
      label: async () => undefined,
      labelValue: async () => undefined,
      labelValues: async () => ({}),
      allEntities: async () => new Map(),
      entity: async () => undefined,
      events: async () => [],
      lastError() {
        if (mode === 'broken') throw new Error('status unknown');
        return mode === 'degraded' ? { message: 'serving a cached copy', at: 42 } : undefined;
      },
    };
    const provider = new PluginCmdbProvider('inline', inner);
    expect(provider.lastError()).toBeUndefined();
    mode = 'degraded';
    expect(provider.lastError()).toEqual({ message: 'CMDB plug-in inline: serving a cached copy', at: 42 });
    mode = 'broken';
    expect(provider.lastError()!.message).toBe('CMDB plug-in inline: lastError() failed: status unknown');
    await expect(provider.close()).resolves.toBeUndefined();
  });
});
