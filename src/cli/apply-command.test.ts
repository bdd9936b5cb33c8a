import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { DeclarationError, dryRunSummary, formatResult, readDeclarations } from './apply-command.js';

const dir = mkdtempSync(join(tmpdir(), 'regsync-apply-read-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

describe('readDeclarations', () => {
  it('skips CMDB data files with a note, but not a file with a misspelt key', () => {
    const sub = join(dir, 'mixed');
    mkdirSafe(sub);
    file('mixed/a.yaml', 'clusters:\n  - { id: east, kind: nacos, endpoints: ["h:1"] }\n');
    file('mixed/cmdb.yaml', 'labels: { site: [a] }\nentities: { ip: { 10.0.0.1: { site: a } } }\n');
    const decl = readDeclarations(sub, {});
    expect(decl.clusters.map((c) => c.id)).toEqual(['east']);
    expect(decl.skipped).toEqual([`skipped ${join(sub, 'cmdb.yaml')}: a CMDB data file, not clusters or tasks`]);
    expect(decl.where?.clusters).toEqual([`${join(sub, 'a.yaml')} (document 1): clusters[0] (id east)`]);

    const typo = file('typo.yaml', 'cluster:\n  - { id: east, kind: nacos, endpoints: ["h:1"] }\n');
    expect(() => readDeclarations(typo, {})).toThrow(new DeclarationError(`${typo} (document 1): unknown key(s) cluster; expected clusters: and/or tasks:`));
    // CMDB keys beside declarations are no CMDB file: the unknown keys are named.
    const both = file('both.yaml', 'labels: {}\ntasks: []\n');
    expect(() => readDeclarations(both, {})).toThrow(/unknown key\(s\) labels/);
  });

  it('refuses an id declared twice, naming both places', () => {
    const path = file('twice.yaml', 'tasks:\n  - { id: t, source: a, destination: b, service: s }\n---\ntasks:\n  - { id: t, source: b, destination: a, service: s }\n');
    expect(() => readDeclarations(path, {})).toThrow(
      new DeclarationError(`${path} (document 2): tasks[0] (id t): task id t is declared twice (also at ${path} (document 1): tasks[0] (id t))`),
    );
  });
});

describe('apply output', () => {
  it('names changed fields, marks dry-run lines, and sums up', () => {
    expect(formatResult({ kind: 'cluster', id: 'c', action: 'updated', fields: ['endpoints', 'password'] }, false)).toBe('cluster c updated: endpoints, password');
    expect(formatResult({ kind: 'task', id: 't', action: 'deleted' }, true)).toBe('task t deleted (dry run)');
    expect(formatResult({ kind: 'task', id: 't', action: 'unchanged' }, true)).toBe('task t unchanged');
    expect(dryRunSummary([{ kind: 'task', id: 't', action: 'unchanged' }])).toBe('dry run: no changes (1 unchanged); nothing written');
  });
});

function mkdirSafe(path: string): void {
  rmSync(path, { recursive: true, force: true });
  mkdirSync(path);
}
