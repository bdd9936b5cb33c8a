import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DeclarationError, expandString, readDeclarations } from './apply-command.js';

const dir = mkdtempSync(join(tmpdir(), 'regsync-apply-secrets-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

function error(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    if (err instanceof DeclarationError) return err.message;
    throw err;
  }
  throw new Error('expected a DeclarationError');
}

describe('${NAME} in declarations', () => {
  it('replaces ${NAME} from the environment, keeps other dollars, and $${ writes ${', () => {
    const env = { PW: 'p$w${X}', HOST: 'nacos-1', EMPTY: '' };
    expect(expandString('${PW}', env, 'w')).toBe('p$w${X}');
    expect(expandString('${HOST}:8848 and ${HOST}:8849', env, 'w')).toBe('nacos-1:8848 and nacos-1:8849');
    expect(expandString('a$b $ $$ ${EMPTY}|', env, 'w')).toBe('a$b $ $$ |');
    expect(expandString('$${PW} stays', env, 'w')).toBe('${PW} stays');
    // Only `$${` is an escape: a `$` before it stays.
    expect(expandString('$$${PW}', env, 'w')).toBe('$${PW}');
  });

  it('names the file, the entry, the field and the variable when one is not set', () => {
    const path = file('missing.yaml', ['clusters:', '  - id: east', '    kind: nacos', '    endpoints: ["${NACOS_HOST}:8848"]', '    password: ${NACOS_PASSWORD}'].join('\n'));
    expect(error(() => readDeclarations(path, { NACOS_HOST: 'h' }))).toBe(
      `${path} (document 1): clusters[0] (id east), password: environment variable NACOS_PASSWORD is not set`,
    );
    expect(error(() => readDeclarations(path, { NACOS_PASSWORD: 'p' }))).toContain('clusters[0] (id east), endpoints[0]: environment variable NACOS_HOST is not set');
    const bad = file('bad.yaml', 'tasks:\n  - { id: t, source: a, destination: b, service: "${not-a-name}" }\n');
    expect(error(() => readDeclarations(bad, {}))).toContain('tasks[0] (id t), service: ${ must be followed by a variable name and }');
  });

  it('expands clusters and tasks, options included', () => {
    const path = file(
      'ok.yaml',
      ['clusters:', '  - { id: east, kind: nacos, endpoints: ["${H}:8848"], username: nacos, password: "${PW}", options: { contextPath: "${CTX}" } }', 'tasks:', '  - { id: t, source: east, destination: west, service: "${SVC}" }'].join('\n'),
    );
    const decl = readDeclarations(path, { H: '10.0.0.1', PW: 's3cret', CTX: '/nacos', SVC: 'orders' });
    expect(decl.clusters[0]).toEqual({ id: 'east', kind: 'nacos', endpoints: ['10.0.0.1:8848'], username: 'nacos', password: 's3cret', options: { contextPath: '/nacos' } });
    expect(decl.tasks[0]).toMatchObject({ service: 'orders' });
  });
});

describe('passwordFile in declarations', () => {
  it('reads the file (relative to the YAML file) into password, dropping its final newline', () => {
    mkdirSync(join(dir, 'secrets'), { recursive: true });
    file('secrets/nacos', 'from file\n');
    const absolute = file('absolute-pw', 'abs\r\n');
    const path = file('pwfile.yaml', ['clusters:', '  - { id: east, kind: nacos, endpoints: ["h:1"], username: u, passwordFile: secrets/nacos }', `  - { id: west, kind: nacos, endpoints: ["h:2"], username: u, passwordFile: ${absolute} }`].join('\n'));
    const decl = readDeclarations(path, {});
    expect(decl.clusters[0]).toEqual({ id: 'east', kind: 'nacos', endpoints: ['h:1'], username: 'u', password: 'from file' });
    expect(decl.clusters[1]?.password).toBe('abs');
    expect(decl.clusters[1]).not.toHaveProperty('passwordFile');
  });

  it('refuses password and passwordFile together, and a file it cannot read, naming the entry', () => {
    file('pw', 'x');
    const both = file('both.yaml', 'clusters:\n  - { id: east, kind: nacos, endpoints: ["h:1"], password: p, passwordFile: pw }\n');
    expect(error(() => readDeclarations(both, {}))).toBe(`${both} (document 1): clusters[0] (id east): give password or passwordFile, not both`);
    const missing = file('missing-file.yaml', 'clusters:\n  - { id: east, kind: nacos, endpoints: ["h:1"], passwordFile: "${DIR}/none" }\n');
    expect(error(() => readDeclarations(missing, { DIR: dir }))).toBe(`${missing} (document 1): clusters[0] (id east): cannot read passwordFile ${join(dir, 'none')}: no such file`);
    file('empty', '\n');
    const empty = file('empty.yaml', 'clusters:\n  - { id: east, kind: nacos, endpoints: ["h:1"], passwordFile: empty }\n');
    expect(error(() => readDeclarations(empty, {}))).toContain('is empty');
  });
});
