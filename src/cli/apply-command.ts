import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';

/** Clusters and tasks read from declarative files, in the REST API's shapes. */
export interface Declarations {
  clusters: Array<Record<string, unknown> & { id: string }>;
  tasks: Array<Record<string, unknown> & { id: string }>;
}

/** A file that cannot be applied; the message names the file and the document. */
export class DeclarationError extends Error {
  override readonly name = 'DeclarationError';
}

/**
 * Reads YAML files (a file, or every `.yaml`/`.yml` file of a directory). Each document holds
 * `clusters:` and/or `tasks:` lists; every entry needs an `id`, so that applying twice changes nothing.
 *
 * Secrets stay out of the files: `${NAME}` in any string value is replaced by the variable `NAME`
 * of `env` (a variable that is not set is an error naming the file, the entry and the variable;
 * `$${` writes a literal `${`), and a cluster's `passwordFile: <path>` (relative to the YAML file)
 * is read here and sent as its `password` (the file's final newline dropped). Read on the side of
 * `apply`, so the secret reaches the store, encrypted there, and no worker needs the file mounted.
 */
export function readDeclarations(path: string, env: Readonly<Record<string, string | undefined>> = process.env): Declarations {
  const files = statSync(path).isDirectory()
    ? readdirSync(path)
        .filter((f) => /\.ya?ml$/.test(f))
        .sort()
        .map((f) => join(path, f))
    : [path];
  const out: Declarations = { clusters: [], tasks: [] };
  for (const file of files) {
    const docs = parseAllDocuments(readFileSync(file, 'utf8'));
    const list = Array.isArray(docs) ? docs : [docs];
    list.forEach((doc, index) => {
      const where = `${file} (document ${index + 1})`;
      if (doc.errors.length > 0) throw new DeclarationError(`${where}: ${doc.errors[0]?.message ?? 'invalid YAML'}`);
      const value: unknown = doc.toJS();
      if (value === null || value === undefined) return;
      if (typeof value !== 'object' || Array.isArray(value)) throw new DeclarationError(`${where}: expected a mapping with clusters: and/or tasks:`);
      const { clusters, tasks, ...rest } = value as Record<string, unknown>;
      const unknownKeys = Object.keys(rest);
      if (unknownKeys.length > 0) throw new DeclarationError(`${where}: unknown key(s) ${unknownKeys.join(', ')}; expected clusters: and/or tasks:`);
      out.clusters.push(...entries(clusters, 'clusters', where).map((entry, i) => withPasswordFile(expandEntry(entry, env, `${where}: clusters[${i}] (id ${entry.id})`), dirname(file), `${where}: clusters[${i}] (id ${entry.id})`)));
      out.tasks.push(...entries(tasks, 'tasks', where).map((entry, i) => expandEntry(entry, env, `${where}: tasks[${i}] (id ${entry.id})`)));
    });
  }
  return out;
}

function entries(value: unknown, what: string, where: string): Array<Record<string, unknown> & { id: string }> {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new DeclarationError(`${where}: ${what} must be a list`);
  return value.map((entry, i) => {
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) throw new DeclarationError(`${where}: ${what}[${i}] must be a mapping`);
    const id = (entry as Record<string, unknown>).id;
    if (typeof id !== 'string' || id === '') throw new DeclarationError(`${where}: ${what}[${i}] needs an id`);
    return entry as Record<string, unknown> & { id: string };
  });
}

/** Every string value of an entry with its `${NAME}` replaced from `env`. */
function expandEntry<T>(entry: T, env: Readonly<Record<string, string | undefined>>, where: string): T {
  const walk = (value: unknown, at: string): unknown => {
    if (typeof value === 'string') return expandString(value, env, `${where}, ${at}`);
    if (Array.isArray(value)) return value.map((v, i) => walk(v, `${at}[${i}]`));
    if (value !== null && typeof value === 'object') {
      return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, walk(v, at === '' ? k : `${at}.${k}`)]));
    }
    return value;
  };
  return walk(entry, '') as T;
}

/**
 * `${NAME}` (NAME: letters, digits and `_`, not starting with a digit) replaced by the variable's
 * value, `$${` by `${`; any other `$` is kept. One pass, left to right: a value is never expanded again.
 */
export function expandString(text: string, env: Readonly<Record<string, string | undefined>>, where: string): string {
  let out = '';
  let i = 0;
  for (;;) {
    const at = text.indexOf('$', i);
    if (at < 0) return out + text.slice(i);
    out += text.slice(i, at);
    if (text.startsWith('$${', at)) {
      out += '${';
      i = at + 3;
    } else if (text.startsWith('${', at)) {
      const end = text.indexOf('}', at + 2);
      const name = end < 0 ? '' : text.slice(at + 2, end);
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
        throw new DeclarationError(`${where}: \${ must be followed by a variable name and } (write $\${ for a literal \${)`);
      }
      const value = env[name];
      if (value === undefined) throw new DeclarationError(`${where}: environment variable ${name} is not set`);
      out += value;
      i = end + 1;
    } else {
      out += '$';
      i = at + 1;
    }
  }
}

/** A cluster's `passwordFile` read into its `password` (both given: an error). */
function withPasswordFile(entry: Record<string, unknown> & { id: string }, dir: string, where: string): Record<string, unknown> & { id: string } {
  const { passwordFile, ...rest } = entry;
  if (passwordFile === undefined) return entry;
  if (typeof passwordFile !== 'string' || passwordFile === '') throw new DeclarationError(`${where}: passwordFile must be a path`);
  if (rest.password !== undefined) throw new DeclarationError(`${where}: give password or passwordFile, not both`);
  const file = resolve(dir, passwordFile);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new DeclarationError(`${where}: cannot read passwordFile ${file}: ${code === 'ENOENT' ? 'no such file' : (code ?? 'read error')}`);
  }
  const password = text.replace(/\r?\n$/, '');
  if (password === '') throw new DeclarationError(`${where}: passwordFile ${file} is empty`);
  return { ...rest, password };
}

/** One line of what `apply` did. */
export interface ApplyResult {
  kind: 'cluster' | 'task';
  id: string;
  action: 'created' | 'updated' | 'unchanged';
}

/**
 * Applies declarations through the REST API at `server`: clusters first, then tasks. Idempotent:
 * each entry is first compared on the server (`POST .../:id/compare`, which can judge passwords the
 * API never shows), and only one that would change is sent with `PUT`; applying the same files
 * twice sends no `PUT` the second time, so no adapter is rebuilt and no copy re-created.
 * `token` is sent as `Authorization: Bearer` (an admin token, when the API requires tokens).
 */
export async function applyDeclarations(server: string, decl: Declarations, token?: string): Promise<ApplyResult[]> {
  const call = (method: string, path: string, body?: unknown) => callApi(server, token, method, path, body);
  const results: ApplyResult[] = [];
  const entries = [
    ...decl.clusters.map((body) => ({ kind: 'cluster' as const, path: `/api/v1/clusters/${encodeURIComponent(body.id)}`, body })),
    ...decl.tasks.map((body) => ({ kind: 'task' as const, path: `/api/v1/tasks/${encodeURIComponent(body.id)}`, body })),
  ];
  for (const { kind, path, body } of entries) {
    const what = `${kind} ${body.id}`;
    const compared = await call('POST', `${path}/compare`, body);
    await expectOk(compared, what);
    const { exists, differs } = compared.body as { exists: boolean; differs: boolean };
    if (exists && !differs) {
      results.push({ kind, id: body.id, action: 'unchanged' });
      continue;
    }
    await expectOk(await call('PUT', path, body), what);
    results.push({ kind, id: body.id, action: exists ? 'updated' : 'created' });
  }
  return results;
}

async function callApi(server: string, token: string | undefined, method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
  let res: Response;
  const headers: Record<string, string> = {};
  if (token !== undefined && token !== '') headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  try {
    res = await fetch(`${server.replace(/\/$/, '')}${path}`, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  } catch (err) {
    throw new Error(`cannot reach the regsync API at ${server} (${err instanceof Error ? err.message : String(err)}); is \`regsync up\` running? (--server)`, {
      cause: err,
    });
  }
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = text === '' ? undefined : JSON.parse(text);
  } catch {
    // keep the text
  }
  return { status: res.status, body: parsed };
}

async function expectOk(res: { status: number; body: unknown }, what: string): Promise<void> {
  if (res.status >= 200 && res.status < 300) return;
  const err = (res.body as { error?: { code?: string; message?: string } } | undefined)?.error;
  const hint = res.status === 401 || res.status === 403 ? ' (the API wants an admin token: set REGSYNC_API_TOKEN)' : '';
  throw new Error(`${`${what}: ${res.status} ${err?.code ?? ''} ${err?.message ?? JSON.stringify(res.body)}`.trim()}${hint}`);
}
