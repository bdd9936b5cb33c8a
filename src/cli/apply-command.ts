import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
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
 */
export function readDeclarations(path: string): Declarations {
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
      out.clusters.push(...entries(clusters, 'clusters', where));
      out.tasks.push(...entries(tasks, 'tasks', where));
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

/** One line of what `apply` did. */
export interface ApplyResult {
  kind: 'cluster' | 'task';
  id: string;
  action: 'created' | 'updated' | 'unchanged';
}

/**
 * Applies declarations through the REST API at `server`: clusters first, then tasks. Idempotent.
 * `token` is sent as `Authorization: Bearer` (an admin token, when the API requires tokens).
 */
export async function applyDeclarations(server: string, decl: Declarations, token?: string): Promise<ApplyResult[]> {
  const call = (method: string, path: string, body?: unknown) => callApi(server, token, method, path, body);
  const results: ApplyResult[] = [];
  for (const cluster of decl.clusters) {
    const current = await call('GET', `/api/v1/clusters/${encodeURIComponent(cluster.id)}`);
    // The API never shows passwords, so a declared password is always sent; it counts as a change
    // only when something visible changed too.
    const same = current.status === 200 && sameFields(current.body as Record<string, unknown>, cluster, ['password']);
    if (!same || cluster.password !== undefined) {
      await expectOk(await call('PUT', `/api/v1/clusters/${encodeURIComponent(cluster.id)}`, cluster), `cluster ${cluster.id}`);
    }
    results.push({ kind: 'cluster', id: cluster.id, action: same ? 'unchanged' : current.status === 200 ? 'updated' : 'created' });
  }
  for (const task of decl.tasks) {
    const current = await call('GET', `/api/v1/tasks/${encodeURIComponent(task.id)}`);
    if (current.status === 200 && sameFields(current.body as Record<string, unknown>, task, [])) {
      results.push({ kind: 'task', id: task.id, action: 'unchanged' });
      continue;
    }
    await expectOk(await call('PUT', `/api/v1/tasks/${encodeURIComponent(task.id)}`, task), `task ${task.id}`);
    results.push({ kind: 'task', id: task.id, action: current.status === 200 ? 'updated' : 'created' });
  }
  return results;
}

/** Do the declared fields all equal the stored ones (ignoring `ignored`)? */
function sameFields(stored: Record<string, unknown>, declared: Record<string, unknown>, ignored: string[]): boolean {
  return Object.entries(declared).every(([k, v]) => ignored.includes(k) || JSON.stringify(normalize(stored[k])) === JSON.stringify(normalize(v)));
}

function normalize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalize);
  if (v && typeof v === 'object') {
    return Object.fromEntries(Object.entries(v).sort(([a], [b]) => a.localeCompare(b)).map(([k, x]) => [k, normalize(x)]));
  }
  return v;
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
