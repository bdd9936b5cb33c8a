import { mkdtemp, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NACOS_SCENARIO_YAML, replaceFile } from '../../test/support/cmdb-fixtures.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { CmdbFileError, FileCmdbProvider, parseCmdbFile } from './index.js';


let dir: string;
const providers: FileCmdbProvider[] = [];

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'regsync-cmdb-'));
});

afterEach(async () => {
  for (const p of providers.splice(0)) await p.close();
  await rm(dir, { recursive: true, force: true });
});

async function open(name: string, text: string): Promise<FileCmdbProvider> {
  const path = join(dir, name);
  await writeFile(path, text);
  const provider = new FileCmdbProvider({ path, pollMs: 50, debounceMs: 20 });
  providers.push(provider);
  await provider.start();
  return provider;
}

describe('FileCmdbProvider', () => {
  it('answers the SPI for the Nacos scenario', async () => {
    const p = await open('cmdb.yaml', NACOS_SCENARIO_YAML);
    expect(await p.labelNames()).toEqual(['site']);
    expect(await p.entityTypes()).toEqual(['ip']);
    expect(await p.label('site')).toEqual({ name: 'site', values: ['x11', 'x12', 'x13'] });
    expect(await p.label('rack')).toBeUndefined();
    expect(await p.labelValue('33.33.33.33', 'ip', 'site')).toBe('x11');
    expect(await p.labelValue('33.33.33.33', 'ip', 'rack')).toBeUndefined();
    expect(await p.labelValue('66.66.66.66', 'ip', 'site')).toBeUndefined();
    expect(await p.labelValues('55.55.55.55', 'ip')).toEqual({ site: 'x13' });
    expect(await p.labelValues('66.66.66.66', 'ip')).toEqual({});
    expect(await p.entity('22.22.22.22', 'ip')).toEqual({ type: 'ip', name: '22.22.22.22', labels: { site: 'x12' } });
    expect(await p.entity('22.22.22.22', 'host')).toBeUndefined();
    const all = await p.allEntities();
    expect([...all.keys()]).toEqual(['ip']);
    expect(Object.fromEntries([...all.get('ip')!].map(([ip, e]) => [ip, e.labels.site]))).toEqual({
      '11.11.11.11': 'x11',
      '22.22.22.22': 'x12',
      '33.33.33.33': 'x11',
      '44.44.44.44': 'x12',
      '55.55.55.55': 'x13',
    });
    expect(await p.events(0)).toEqual([]);
    expect(p.lastError()).toBeUndefined();
  });

  it('reads JSON by extension and by sniffing, and labels that allow any value', async () => {
    const doc = {
      labels: { site: null, rack: [], zone: { values: ['z1'], description: 'Availability zone' } },
      entities: { ip: { '10.0.0.1': { site: 'anything', rack: 'r7', zone: 'z1' } }, host: null },
    };
    const byExt = await open('cmdb.json', JSON.stringify(doc));
    const sniffed = await open('cmdb.conf', JSON.stringify(doc, null, 2));
    for (const p of [byExt, sniffed]) {
      expect(await p.labelValues('10.0.0.1', 'ip')).toEqual({ site: 'anything', rack: 'r7', zone: 'z1' });
      expect(await p.label('zone')).toEqual({ name: 'zone', values: ['z1'], description: 'Availability zone' });
      expect(await p.label('site')).toEqual({ name: 'site', values: [] });
      expect(await p.entityTypes()).toEqual(['ip', 'host']);
    }
  });

  it('reloads a changed file and records events for added, changed and removed entities', async () => {
    const p = await open('cmdb.yaml', NACOS_SCENARIO_YAML);
    const before = Date.now();
    await replaceFile(
      p.path,
      NACOS_SCENARIO_YAML.replace('22.22.22.22: {site: x12}', '22.22.22.22: {site: x11}')
        .replace('    55.55.55.55: {site: x13}\n', '    66.66.66.66: {site: x13}\n'),
    );
    await waitUntil(async () => (await p.labelValue('22.22.22.22', 'ip', 'site')) === 'x11', { message: 'reload' });
    const events = await p.events(before);
    expect(events).toHaveLength(3);
    expect(events).toEqual(
      expect.arrayContaining([
        { entityName: '22.22.22.22', entityType: 'ip', type: 'ENTITY_ADD_OR_UPDATE' },
        { entityName: '66.66.66.66', entityType: 'ip', type: 'ENTITY_ADD_OR_UPDATE' },
        { entityName: '55.55.55.55', entityType: 'ip', type: 'ENTITY_REMOVE' },
      ]),
    );
    expect(await p.entity('55.55.55.55', 'ip')).toBeUndefined();
    // Events are filtered by time: none were recorded after "now".
    expect(await p.events(Date.now() + 1000)).toEqual([]);
  });

  it('keeps the last good content while the file is invalid or missing, and recovers', async () => {
    const p = await open('cmdb.yaml', NACOS_SCENARIO_YAML);
    await writeFile(p.path, 'labels: [unclosed\n');
    await waitUntil(() => p.lastError()?.message.includes('invalid YAML'), { message: 'parse error reported' });
    expect(await p.labelValue('11.11.11.11', 'ip', 'site')).toBe('x11');

    await unlink(p.path);
    await waitUntil(() => p.lastError()?.message.includes('file not found'), { message: 'missing file reported' });
    expect(p.lastError()!.message).toContain(p.path);
    expect(await p.labelValue('11.11.11.11', 'ip', 'site')).toBe('x11');
    expect(await p.reload()).toBe(false);

    await replaceFile(p.path, NACOS_SCENARIO_YAML.replace('11.11.11.11: {site: x11}', '11.11.11.11: {site: x13}'));
    await waitUntil(() => p.lastError() === undefined, { message: 'recovery' });
    expect(await p.labelValue('11.11.11.11', 'ip', 'site')).toBe('x13');
  });

  it('reloads when the stat poll is faster than the debounce', async () => {
    // Same size, in place: only the stat poll may notice, and it must not keep postponing the reload.
    const path = join(dir, 'cmdb.yaml');
    await writeFile(path, NACOS_SCENARIO_YAML);
    const p = new FileCmdbProvider({ path, pollMs: 10, debounceMs: 100 });
    providers.push(p);
    await p.start();
    await writeFile(path, NACOS_SCENARIO_YAML.replace('44.44.44.44: {site: x12}', '44.44.44.44: {site: x11}'));
    await waitUntil(async () => (await p.labelValue('44.44.44.44', 'ip', 'site')) === 'x11', { message: 'reload', timeoutMs: 3000 });
  });

  it('refuses to start on an unusable file, naming the file and the field', async () => {
    const path = join(dir, 'bad.yaml');
    await writeFile(path, NACOS_SCENARIO_YAML.replace('55.55.55.55: {site: x13}', '55.55.55.55: {site: x99}'));
    const p = new FileCmdbProvider({ path });
    providers.push(p);
    const error = await p.start().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CmdbFileError);
    expect((error as CmdbFileError).file).toBe(path);
    expect((error as CmdbFileError).path).toBe('entities.ip["55.55.55.55"].site');
    expect((error as Error).message).toBe(
      `${path}: entities.ip["55.55.55.55"].site: value "x99" is not allowed for label "site" (allowed: x11, x12, x13)`,
    );
  });
});

describe('parseCmdbFile validation', () => {
  const cases: Array<[string, string, string]> = [
    ['unknown top-level key', 'labels: {}\nentitys: {}\n', 'entitys: unknown top-level key'],
    ['a document that is not a mapping', '- a\n- b\n', 'the document must be a mapping'],
    ['an empty document', '', 'the document must be a mapping'],
    ['invalid YAML', 'labels: {site: [x11\n', 'invalid YAML'],
    ['duplicate keys', 'labels: {}\nlabels: {}\n', 'invalid YAML'],
    ['labels not a mapping', 'labels: [site]\n', 'labels: must be a mapping'],
    ['allowed values not a list', 'labels: {site: x11}\n', 'labels.site: must be a list'],
    ['a non-string allowed value', 'labels: {rack: [1, 2]}\n', 'labels.rack[0]: allowed values must be strings'],
    ['an unknown key in a long label', 'labels: {site: {values: [], desc: x}}\n', 'labels.site.desc: unknown key'],
    ['an undeclared label', 'entities: {ip: {1.1.1.1: {stie: x11}}}\n', 'entities.ip["1.1.1.1"].stie: label "stie" is not declared'],
    ['a non-string label value', 'labels: {rack: null}\nentities: {ip: {1.1.1.1: {rack: 7}}}\n', 'entities.ip["1.1.1.1"].rack: label values must be strings'],
    ['entities not a mapping', 'entities: [1.1.1.1]\n', 'entities: must be a mapping'],
    ['an entity that is not a mapping', 'entities: {ip: {1.1.1.1: x11}}\n', 'entities.ip["1.1.1.1"]: must be a mapping'],
  ];
  it.each(cases)('rejects %s', (_name, text, expected) => {
    expect(() => parseCmdbFile(text, '/etc/cmdb.yaml')).toThrow(CmdbFileError);
    expect(() => parseCmdbFile(text, '/etc/cmdb.yaml')).toThrow(`/etc/cmdb.yaml: ${expected}`);
  });

  it('rejects invalid JSON with the file named', () => {
    expect(() => parseCmdbFile('{"labels": ', '/etc/cmdb.json')).toThrow(/^\/etc\/cmdb\.json: invalid JSON/);
  });
});
