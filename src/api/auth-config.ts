import { readFileSync } from 'node:fs';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { API_SCOPES, MIN_TOKEN_LENGTH, TOKEN_NAME_PATTERN, tokenProblem, type ApiScope, type ApiToken } from './auth-tokens.js';

/** The environment variable holding tokens: `scope:token` or `name:scope:token`, comma-separated. */
export const API_TOKENS_ENV = 'REGSYNC_API_TOKENS';

/** A token list or file that cannot be used. The message names the source and the entry, never a token value. */
export class ApiTokensError extends Error {
  override readonly name = 'ApiTokensError';
  readonly code = 'invalid_api_tokens';
}

const NAME_RE = new RegExp(TOKEN_NAME_PATTERN);
const FIELDS = ['name', 'scope', 'token'] as const;

/**
 * Parses `REGSYNC_API_TOKENS`: entries separated by commas, each `scope:token` or
 * `name:scope:token` (blanks around entries are ignored). An entry without a name is named after its
 * scope (`admin`, then `admin-2`, ...).
 */
export function parseApiTokensEnv(value: string, source = API_TOKENS_ENV): ApiToken[] {
  const tokens: ApiToken[] = [];
  const unnamed: Record<ApiScope, number> = { read: 0, admin: 0 };
  const entries = value.split(',').map((e) => e.trim());
  entries.forEach((entry, i) => {
    if (entry === '') return;
    const where = `${source} entry ${i + 1}`;
    const parts = entry.split(':');
    if (parts.length !== 2 && parts.length !== 3) {
      throw new ApiTokensError(`${where}: expected scope:token or name:scope:token (scope read or admin)`);
    }
    const [name, scope, token] = parts.length === 3 ? (parts as [string, string, string]) : [undefined, parts[0] as string, parts[1] as string];
    // `ops:admin`: a name and a scope, the token left out (the value is not quoted: it may be a token).
    if (parts.length === 2 && !isScope(parts[0] ?? '') && isScope(parts[1] ?? '') && (parts[0] ?? '').length < MIN_TOKEN_LENGTH) {
      throw new ApiTokensError(`${where}: a name and a scope but no token: write name:scope:token (ops:admin:<token>) or scope:token (admin:<token>)`);
    }
    // The value is not quoted: a swapped entry (token:scope) would put the token there.
    if (!isScope(scope)) throw new ApiTokensError(`${where}: the scope must be read or admin (entries are scope:token or name:scope:token)`);
    let tokenName: string;
    if (name === undefined) {
      unnamed[scope] += 1;
      tokenName = unnamed[scope] === 1 ? scope : `${scope}-${unnamed[scope]}`;
    } else {
      tokenName = name;
    }
    check(where, { name: tokenName, scope, token });
    tokens.push({ name: tokenName, scope, token });
  });
  return tokens;
}

/**
 * Reads a token file: a YAML (or JSON) list of `{name, scope, token}`. Checked strictly: every field
 * is required, no other field is allowed, names and tokens are unique, and the list is not empty
 * (an empty file would leave the API open while its operator believes it closed).
 */
export function readApiTokensFile(file: string): ApiToken[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new ApiTokensError(`cannot read the API tokens file ${file}: ${code === 'ENOENT' ? 'no such file' : (code ?? 'read error')}`);
  }
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    // The parser's message quotes the offending line, which may hold a token: only its position is said.
    if (err instanceof YAMLParseError) {
      const at = err.linePos?.[0];
      throw new ApiTokensError(`${file}: not valid YAML or JSON${at ? ` at line ${at.line}, column ${at.col}` : ''} (${err.code})`);
    }
    throw new ApiTokensError(`${file}: not valid YAML or JSON`);
  }
  if (!Array.isArray(data)) {
    throw new ApiTokensError(`${file}: expected a list of {name, scope, token} entries`);
  }
  if (data.length === 0) throw new ApiTokensError(`${file}: lists no tokens; leave the option out to run the API without tokens`);
  const tokens = data.map((entry: unknown, i) => {
    const where = `${file}: entry ${i + 1}`;
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry)) {
      throw new ApiTokensError(`${where}: expected {name, scope, token}`);
    }
    const record = entry as Record<string, unknown>;
    // Only a well-formed name is quoted (a token pasted into the wrong field must not be shown).
    const named = typeof record.name === 'string' && NAME_RE.test(record.name) ? `${where} (name ${JSON.stringify(record.name)})` : where;
    const unknown = Object.keys(record).filter((key) => !(FIELDS as readonly string[]).includes(key));
    if (unknown.length > 0) {
      const shown = unknown.map((key) => (/^[A-Za-z_]{1,12}$/.test(key) ? JSON.stringify(key) : 'a field')).join(', ');
      throw new ApiTokensError(`${named}: ${shown} is not a known field; an entry has exactly name, scope and token`);
    }
    for (const field of FIELDS) {
      if (record[field] === undefined || record[field] === null) throw new ApiTokensError(`${named}: ${field} is required`);
      if (typeof record[field] !== 'string') throw new ApiTokensError(`${named}: ${field} must be a string`);
    }
    const { name, scope, token } = record as Record<(typeof FIELDS)[number], string>;
    if (!isScope(scope)) throw new ApiTokensError(`${named}: scope must be read or admin`);
    check(named, { name, scope, token });
    return { name, scope, token };
  });
  return tokens;
}

/**
 * The tokens of a process: those of `REGSYNC_API_TOKENS` (`env`) and those of the file, checked
 * together (a name or a token used twice is an error). Empty: the API runs open.
 */
export function loadApiTokens(opts: { file?: string | undefined; env?: string | undefined }): ApiToken[] {
  const fromEnv = opts.env === undefined ? [] : parseApiTokensEnv(opts.env);
  const fromFile = opts.file === undefined ? [] : readApiTokensFile(opts.file);
  const all = [...fromEnv.map((t) => ({ t, from: API_TOKENS_ENV })), ...fromFile.map((t) => ({ t, from: opts.file as string }))];
  const names = new Map<string, string>();
  const values = new Map<string, string>();
  for (const { t, from } of all) {
    const first = names.get(t.name);
    if (first !== undefined) throw new ApiTokensError(`token name ${JSON.stringify(t.name)} is used twice (${first} and ${from}); names must be unique`);
    names.set(t.name, from);
    const same = values.get(t.token);
    if (same !== undefined) throw new ApiTokensError(`tokens ${JSON.stringify(same)} and ${JSON.stringify(t.name)} (${from}) have the same value; give each its own`);
    values.set(t.token, t.name);
  }
  return all.map(({ t }) => t);
}

function isScope(value: string): value is ApiScope {
  return (API_SCOPES as readonly string[]).includes(value);
}

function check(where: string, token: ApiToken): void {
  if (!NAME_RE.test(token.name)) {
    throw new ApiTokensError(`${where}: the name must be 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit`);
  }
  const problem = tokenProblem(token.token);
  if (problem !== undefined) throw new ApiTokensError(`${where}: ${problem}`);
}
