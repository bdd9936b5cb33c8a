import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ClusterConfigError, type ClusterSpec } from '../src/model/index.js';
import { KIND_NAMES, KINDS, kindNamed, validateCluster } from './kinds.js';
import { nacosKind } from './nacos/index.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Non-test TypeScript files under `dir`, recursively. */
function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts') ? [path] : [];
  });
}

/**
 * Where code names a kind: a string literal that is exactly a kind's name (module specifiers such as
 * `require('nacos')`, the npm package, excepted), or an object key that is one (`{ nacos: 8848 }`,
 * `{ nacos, zookeeper }`). Prose in comments and longer strings ("Nacos server") do not count.
 */
function kindMentions(root: string, names: readonly string[]): string[] {
  const alternatives = names.join('|');
  const literal = new RegExp(`(?<!(?:require\\(|import\\(|from )\\s*)(['"\`])(?:${alternatives})\\1`, 'g');
  const key = new RegExp(`(?<=[{,]\\s*)(?:${alternatives})(?=\\s*[:,}])`, 'g');
  const found: string[] = [];
  const files = [...sourceFiles(join(root, 'src')), ...sourceFiles(join(root, 'adapters'))];
  for (const file of files) {
    const rel = relative(root, file).split(sep).join('/');
    // A kind's own folder may name that kind (and only that one).
    const folder = /^adapters\/([^/]+)\//.exec(rel)?.[1];
    const lines = readFileSync(file, 'utf8').split('\n');
    lines.forEach((line, i) => {
      const code = line.replace(/\/\/.*$/, '').replace(/^\s*\*.*$/, '');
      for (const match of [...code.matchAll(literal), ...code.matchAll(key)]) {
        const name = names.find((n) => match[0].includes(n)) as string;
        if (name !== folder) found.push(`${rel}:${i + 1}: ${match[0].trim()}`);
      }
    });
  }
  return found;
}

describe('the list of kinds', () => {
  it('is the only place kinds are named: no kind name in code outside the list and the kind\'s own folder', () => {
    expect(kindMentions(ROOT, KIND_NAMES)).toEqual([]);
  });

  it('finds a kind named in code elsewhere (the check can fail)', () => {
    const root = mkdtempSync(join(tmpdir(), 'kind-mentions-'));
    try {
      const write = (path: string, text: string) => {
        mkdirSync(dirname(join(root, path)), { recursive: true });
        writeFileSync(join(root, path), text);
      };
      write(
        'src/wiring.ts',
        [
          "const sdk = require('nacos');",
          "if (kind === 'nacos') connect();",
          'const ports = { nacos: 8848 };',
          'const factories = { nacos, other };',
          "// A comment may say 'nacos'.",
          "const text = 'a nacos cluster';",
        ].join('\n'),
      );
      write('adapters/zookeeper/x.ts', "export const other = 'nacos';\nexport const own = 'zookeeper';\n");
      write('adapters/nacos/y.ts', "export const own = { kind: 'nacos' };\n");
      expect(kindMentions(root, ['nacos', 'zookeeper']).sort()).toEqual([
        "adapters/zookeeper/x.ts:1: 'nacos'",
        "src/wiring.ts:2: 'nacos'",
        'src/wiring.ts:3: nacos',
        'src/wiring.ts:4: nacos',
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('has one descriptor per folder with a distinct name, label and nacos-sync type', () => {
    const folders = readdirSync(join(ROOT, 'adapters'), { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name);
    expect([...KIND_NAMES].sort()).toEqual(folders.sort());
    expect(new Set(KINDS.map((k) => k.label)).size).toBe(KINDS.length);
    const types = KINDS.flatMap((k) => (k.nacosSyncType === undefined ? [] : [k.nacosSyncType]));
    expect(new Set(types).size).toBe(types.length);
    for (const k of KINDS) {
      expect(k.name).toMatch(/^[a-z][a-z0-9-]*$/);
      expect(k.defaultPort).toBeGreaterThan(0);
      expect(k.options.length).toBeGreaterThan(0);
      for (const o of k.options) expect(o.description.length, `${k.name} ${o.name}`).toBeGreaterThan(10);
    }
    expect(kindNamed('constructor')).toBeUndefined();
  });
});

describe('validateCluster', () => {
  const spec = (kind: string, extra: Partial<ClusterSpec> = {}): ClusterSpec => ({
    id: 'c',
    kind,
    endpoints: ['10.0.0.1:1234'],
    labels: {},
    options: {},
    ...extra,
  });
  const problem = (s: ClusterSpec): string | undefined => {
    try {
      validateCluster(s);
      return undefined;
    } catch (err) {
      if (err instanceof ClusterConfigError) return err.setting;
      throw err;
    }
  };

  it('accepts every kind with empty options, and the options every cluster may have', () => {
    for (const name of KIND_NAMES) {
      expect(problem(spec(name)), name).toBeUndefined();
      expect(problem(spec(name, { options: { aliases: ['old-id'], nacosSyncName: 'x' } })), name).toBeUndefined();
    }
  });

  it('names the setting: unknown kind, unknown option, a value the kind refuses, shared options of the wrong type', () => {
    expect(problem(spec('etcd'))).toBe('kind');
    for (const name of KIND_NAMES) expect(problem(spec(name, { options: { bogusOption: 1 } })), name).toBe('options.bogusOption');
    expect(problem(spec(nacosKind.name, { options: { apiVersion: 'v9' } }))).toBe('options.apiVersion');
    for (const name of KIND_NAMES) {
      expect(problem(spec(name, { options: { aliases: 'old-id' } })), name).toBe('options.aliases');
      expect(problem(spec(name, { options: { nacosSyncName: 5 } })), name).toBe('options.nacosSyncName');
    }
  });

  it('checks endpoints where the kind needs them', () => {
    for (const k of KINDS) expect(problem(spec(k.name, { endpoints: [] })), k.name).toBe(k.endpointsRequired ? 'endpoints' : undefined);
  });
});
