import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiTokensError, loadApiTokens, parseApiTokensEnv, readApiTokensFile } from './auth-config.js';
import { ApiTokenSet } from './auth-tokens.js';

/** Token values of these tests: none may ever show up in an error message. */
const ADMIN = 'adm1n-TOKEN-value-0123456789';
const READ = 'read-TOKEN-value-0123456789ab';
const OTHER = 'other-TOKEN-value-0123456789';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'regsync-tokens-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** The error `fn` throws, checked to be an ApiTokensError that quotes no token value. */
function errorOf(fn: () => unknown): string {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ApiTokensError);
  const message = (caught as Error).message;
  for (const secret of [ADMIN, READ, OTHER, ADMIN.slice(0, 12), READ.slice(0, 12)]) expect(message).not.toContain(secret);
  return message;
}

describe('REGSYNC_API_TOKENS', () => {
  it('takes scope:token and name:scope:token entries, naming unnamed ones after their scope', () => {
    expect(parseApiTokensEnv(` admin:${ADMIN} , read:${READ},ci:read:${OTHER},`)).toEqual([
      { name: 'admin', scope: 'admin', token: ADMIN },
      { name: 'read', scope: 'read', token: READ },
      { name: 'ci', scope: 'read', token: OTHER },
    ]);
    expect(parseApiTokensEnv(`read:${READ},read:${OTHER}`).map((t) => t.name)).toEqual(['read', 'read-2']);
    expect(parseApiTokensEnv('')).toEqual([]);
  });

  it('names the entry and the problem, never the token', () => {
    expect(errorOf(() => parseApiTokensEnv(`admin:${ADMIN},write:${READ}`))).toBe('REGSYNC_API_TOKENS entry 2: the scope must be read or admin (entries are scope:token or name:scope:token)');
    // A name and a scope with the token left out says so, with the form to write.
    expect(errorOf(() => parseApiTokensEnv('ops:admin'))).toBe('REGSYNC_API_TOKENS entry 1: a name and a scope but no token: write name:scope:token (ops:admin:<token>) or scope:token (admin:<token>)');
    // A swapped entry puts the token where the scope goes: it must not be quoted.
    expect(errorOf(() => parseApiTokensEnv(`${ADMIN}:admin`))).toBe('REGSYNC_API_TOKENS entry 1: the scope must be read or admin (entries are scope:token or name:scope:token)');
    expect(errorOf(() => parseApiTokensEnv(ADMIN))).toMatch(/^REGSYNC_API_TOKENS entry 1: expected scope:token or name:scope:token/);
    expect(errorOf(() => parseApiTokensEnv('admin:short'))).toBe('REGSYNC_API_TOKENS entry 1: the token is shorter than 16 characters');
    expect(errorOf(() => parseApiTokensEnv(`a b:admin:${ADMIN}`))).toMatch(/entry 1: the name must be/);
    expect(errorOf(() => parseApiTokensEnv(`admin:${ADMIN}"x`))).toMatch(/entry 1: the token may only contain/);
  });
});

describe('--api-tokens-file', () => {
  it('reads a YAML or JSON list of {name, scope, token}', () => {
    const yaml = file('tokens.yaml', `- {name: ops, scope: admin, token: ${ADMIN}}\n- name: dashboard\n  scope: read\n  token: "${READ}"\n`);
    expect(readApiTokensFile(yaml)).toEqual([
      { name: 'ops', scope: 'admin', token: ADMIN },
      { name: 'dashboard', scope: 'read', token: READ },
    ]);
    const json = file('tokens.json', JSON.stringify([{ name: 'ops', scope: 'admin', token: ADMIN }]));
    expect(readApiTokensFile(json)).toEqual([{ name: 'ops', scope: 'admin', token: ADMIN }]);
  });

  it('refuses what it cannot use, naming the file, the entry and the problem, never a token', () => {
    const cases: [string, string, string][] = [
      ['missing-scope.yaml', `- {name: ops, token: ${ADMIN}}`, 'entry 1 (name "ops"): scope is required'],
      ['bad-scope.yaml', `- {name: ops, scope: admin, token: ${ADMIN}}\n- {name: dash, scope: write, token: ${READ}}`, 'entry 2 (name "dash"): scope must be read or admin'],
      ['unknown-field.yaml', `- {name: ops, scope: admin, token: ${ADMIN}, expires: never}`, 'entry 1 (name "ops"): "expires" is not a known field'],
      ['token-as-key.yaml', `- {name: ops, scope: admin, ${ADMIN}: x}`, 'entry 1 (name "ops"): a field is not a known field'],
      ['short.yaml', '- {name: ops, scope: admin, token: abc}', 'entry 1 (name "ops"): the token is shorter than 16 characters'],
      ['number.yaml', '- {name: ops, scope: admin, token: 12345678901234567890}', 'entry 1 (name "ops"): token must be a string'],
      ['bad-name.yaml', `- {name: "${READ} x", scope: admin, token: ${ADMIN}}`, 'entry 1: the name must be'],
      ['not-a-list.yaml', `ops: {scope: admin, token: ${ADMIN}}`, 'expected a list of {name, scope, token} entries'],
      ['empty.yaml', '[]', 'lists no tokens'],
      ['entry-not-object.yaml', `- ${ADMIN}`, 'entry 1: expected {name, scope, token}'],
      ['broken.yaml', `- {name: ops, scope: admin, token: ${ADMIN}`, 'not valid YAML or JSON at line'],
    ];
    for (const [name, text, problem] of cases) {
      const path = file(name, text);
      const message = errorOf(() => readApiTokensFile(path));
      expect(message, name).toContain(path);
      expect(message, name).toContain(problem);
    }
    expect(errorOf(() => readApiTokensFile(join(dir, 'absent.yaml')))).toBe(`cannot read the API tokens file ${join(dir, 'absent.yaml')}: no such file`);
  });

  it('joins the variable and the file, refusing a name or a value used twice', () => {
    const path = file('ok.yaml', `- {name: ops, scope: admin, token: ${ADMIN}}`);
    expect(loadApiTokens({ file: path, env: `read:${READ}` }).map((t) => t.name)).toEqual(['read', 'ops']);
    expect(loadApiTokens({})).toEqual([]);
    expect(errorOf(() => loadApiTokens({ file: path, env: `ops:read:${READ}` }))).toMatch(/token name "ops" is used twice \(REGSYNC_API_TOKENS and .*ok\.yaml\)/);
    expect(errorOf(() => loadApiTokens({ file: path, env: `read:${ADMIN}` }))).toMatch(/tokens "read" and "ops" .* have the same value/);
  });
});

describe('ApiTokenSet', () => {
  it('finds the principal of a token and nothing else', () => {
    const set = new ApiTokenSet([
      { name: 'ops', scope: 'admin', token: ADMIN },
      { name: 'dash', scope: 'read', token: READ },
    ]);
    expect(set.enabled).toBe(true);
    expect(set.verify(ADMIN)).toEqual({ name: 'ops', scope: 'admin' });
    expect(set.verify(READ)).toEqual({ name: 'dash', scope: 'read' });
    expect(set.verify(OTHER)).toBeUndefined();
    expect(set.verify(`${ADMIN}x`)).toBeUndefined();
    expect(set.verify('')).toBeUndefined();
    expect(set.counts()).toEqual({ read: 1, admin: 1 });
    expect(new ApiTokenSet([]).enabled).toBe(false);
    // Only digests are kept: the values are nowhere in the object.
    expect(JSON.stringify(set)).not.toContain(ADMIN);
  });
});
