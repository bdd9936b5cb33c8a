import { readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { TaskBodyCheck } from '../api/index.js';
import { DEFAULT_GROUP, DEFAULT_NAMESPACE } from '../model/index.js';
import { canonical } from '../util/canonical.js';

/** Clusters and tasks read from declarative files, in the REST API's shapes. */
export interface Declarations {
  clusters: Array<Record<string, unknown> & { id: string }>;
  tasks: Array<Record<string, unknown> & { id: string }>;
  /**
   * Where each entry was read (`<file> (document 2): tasks[0] (id t)`), by index of `clusters`
   * and `tasks`; absent for declarations built in code.
   */
  where?: { clusters: string[]; tasks: string[] };
  /** A note per file left out because it holds something else (a CMDB data file). */
  skipped?: string[];
}

/** A file that cannot be applied; the message names the file and the document. */
export class DeclarationError extends Error {
  override readonly name = 'DeclarationError';
}

/** The top-level keys of a CMDB data file (see `src/cmdb/file-provider.ts`). */
const CMDB_FILE_KEYS: readonly string[] = ['labels', 'entities'];

/**
 * Reads YAML files (a file, or every `.yaml`/`.yml` file of a directory). Each document holds
 * `clusters:` and/or `tasks:` lists; every entry needs an `id`, so that applying twice changes nothing.
 * An id declared twice (in any files) is an error naming both places. A file whose documents are
 * all CMDB data (only `labels:` and `entities:`) is left out with a note in `skipped`, so that a
 * folder may hold the CMDB file beside the declarations; any other top-level key is an error (a
 * misspelt `clusters:` must not pass for another kind of file).
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
  const out: Declarations & Required<Pick<Declarations, 'where' | 'skipped'>> = { clusters: [], tasks: [], where: { clusters: [], tasks: [] }, skipped: [] };
  for (const file of files) {
    const docs = parseAllDocuments(readFileSync(file, 'utf8'));
    const list = (Array.isArray(docs) ? docs : [docs]).map((doc, index) => {
      const where = `${file} (document ${index + 1})`;
      if (doc.errors.length > 0) throw new DeclarationError(`${where}: ${doc.errors[0]?.message ?? 'invalid YAML'}`);
      return { where, value: doc.toJS() as unknown };
    });
    if (isCmdbDataFile(list.map((d) => d.value))) {
      out.skipped.push(`skipped ${file}: a CMDB data file, not clusters or tasks`);
      continue;
    }
    for (const { where, value } of list) {
      if (value === null || value === undefined) continue;
      if (typeof value !== 'object' || Array.isArray(value)) throw new DeclarationError(`${where}: expected a mapping with clusters: and/or tasks:`);
      const { clusters, tasks, ...rest } = value as Record<string, unknown>;
      const unknownKeys = Object.keys(rest);
      if (unknownKeys.length > 0) throw new DeclarationError(`${where}: unknown key(s) ${unknownKeys.join(', ')}; expected clusters: and/or tasks:`);
      entries(clusters, 'clusters', where).forEach((entry, i) => {
        const at = `${where}: clusters[${i}] (id ${entry.id})`;
        out.clusters.push(withPasswordFile(expandEntry(entry, env, at), dirname(file), at));
        out.where.clusters.push(at);
      });
      entries(tasks, 'tasks', where).forEach((entry, i) => {
        const at = `${where}: tasks[${i}] (id ${entry.id})`;
        out.tasks.push(expandEntry(entry, env, at));
        out.where.tasks.push(at);
      });
    }
  }
  checkUniqueIds('cluster', out.clusters, out.where.clusters);
  checkUniqueIds('task', out.tasks, out.where.tasks);
  return out;
}

/** Whether a file's documents are CMDB data: at least one, each a mapping of CMDB keys only. */
function isCmdbDataFile(values: readonly unknown[]): boolean {
  const present = values.filter((v) => v !== null && v !== undefined);
  return (
    present.length > 0 &&
    present.every((v) => typeof v === 'object' && !Array.isArray(v) && Object.keys(v as object).length > 0 && Object.keys(v as object).every((k) => CMDB_FILE_KEYS.includes(k)))
  );
}

function checkUniqueIds(kind: string, items: ReadonlyArray<{ id: string }>, where: readonly string[]): void {
  const first = new Map<string, number>();
  items.forEach((item, i) => {
    const earlier = first.get(item.id);
    if (earlier !== undefined) throw new DeclarationError(`${where[i] ?? ''}: ${kind} id ${item.id} is declared twice (also at ${where[earlier] ?? ''})`);
    first.set(item.id, i);
  });
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

/** One line of what `apply` did, or would do with `--dry-run`. */
export interface ApplyResult {
  kind: 'cluster' | 'task';
  id: string;
  action: 'created' | 'updated' | 'unchanged' | 'deleted';
  /** For `updated`: the fields that differ, as the server's comparison names them (never values). */
  fields?: string[];
}

/** How {@link applyDeclarations} runs. */
export interface ApplyOptions {
  /** An admin token (a read token suffices for a dry run, and for an apply that changes nothing). */
  token?: string | undefined;
  /** Only compare and report: no PUT, no DELETE. */
  dryRun?: boolean;
  /** Delete stored clusters and tasks the files do not name (see {@link planApply}). */
  prune?: boolean;
  /** Notes for the operator (what `--prune` keeps, skipped files), one line each. */
  note?: (line: string) => void;
}

/** What {@link planApply} found: the result of every entry, and the deletions of `--prune`. */
export interface ApplyPlan {
  clusters: ApplyResult[];
  tasks: ApplyResult[];
  /** Tasks `--prune` deletes (before the declared tasks are written, so that a renamed task can take its service). */
  pruneTasks: string[];
  /** Clusters `--prune` deletes (last, once no task uses them). */
  pruneClusters: string[];
  /**
   * Ids of declared tasks that take over a service another stored task syncs today (one the files
   * move elsewhere, or one `--prune` deletes): written after the other tasks.
   */
  takeOver?: Set<string>;
}

interface StoredCluster {
  id: string;
  namespace?: string;
}
interface StoredTask {
  id: string;
  source: string;
  destination: string;
  namespace: string;
  group: string;
  service: string;
  options: Record<string, unknown>;
}

/** Fields of a task, in the order the server's comparison names them. */
const TASK_FIELDS = ['source', 'destination', 'namespace', 'group', 'service', 'options'] as const;

/**
 * Checks every entry and works out what applying would change, writing nothing: the first phase
 * of every `apply`, so that one bad entry anywhere stops it before the first write. Reads what is
 * stored (`GET`) and asks the server to compare each entry (`POST .../:id/compare`, which checks
 * a body as `PUT` would, judges passwords the API never shows and names the fields that differ).
 * A task naming a cluster the same files create (or whose source's namespace, its default, the
 * files change) cannot be compared yet: it is checked here with the API's schema and task rules
 * ({@link TaskBodyCheck}) and compared with the stored task field by field. A task naming a cluster that is neither declared nor stored is an error.
 *
 * `--prune` guard: only with `prune`; only kinds the files declare (files with clusters but no
 * tasks delete no task, and the other way round); never a cluster a remaining task uses (a task
 * of the files, or a stored one that stays): it is kept, with a note.
 *
 * Every problem found is reported at once, each naming its file, document and entry, in one
 * {@link DeclarationError}.
 */
export async function planApply(server: string, decl: Declarations, opts: ApplyOptions = {}): Promise<ApplyPlan> {
  const call = (method: string, path: string, body?: unknown) => callApi(server, opts.token, method, path, body);
  const storedClusters = (await getList<StoredCluster>(call, '/api/v1/clusters')).items;
  const storedTasks = (await getList<StoredTask>(call, '/api/v1/tasks')).items;
  const stored = new Map(storedClusters.map((c) => [c.id, c]));
  const declared = new Map(decl.clusters.map((c) => [c.id, c]));
  const problems: string[] = [];
  const whereOf = (kind: 'clusters' | 'tasks', i: number, id: string) => decl.where?.[kind][i] ?? `${kind}[${i}] (id ${id})`;
  const plan: ApplyPlan = { clusters: [], tasks: [], pruneTasks: [], pruneClusters: [] };

  for (const [i, body] of decl.clusters.entries()) {
    const res = await call('POST', `/api/v1/clusters/${encodeURIComponent(body.id)}/compare`, body);
    if (!isOk(res)) {
      problems.push(`${whereOf('clusters', i, body.id)}: ${entryProblemOf(res)}`);
      continue;
    }
    plan.clusters.push(resultOf('cluster', body.id, res.body as Comparison));
  }

  const check = new TaskBodyCheck();
  try {
    for (const [i, body] of decl.tasks.entries()) {
      const where = whereOf('tasks', i, body.id);
      const named = [body.source, body.destination].filter((c): c is string => typeof c === 'string');
      const unknown = named.filter((c) => !declared.has(c) && !stored.has(c));
      if (unknown.length > 0) {
        problems.push(`${where}: no cluster ${unknown.join(' or ')}, neither in the files nor stored`);
        continue;
      }
      // A task's namespace defaults to its source's: one the files change is compared here too.
      const sourceNamespaceMoves = typeof body.source === 'string' && declared.has(body.source) && declared.get(body.source)?.namespace !== stored.get(body.source)?.namespace;
      if (named.every((c) => stored.has(c)) && !sourceNamespaceMoves) {
        const res = await call('POST', `/api/v1/tasks/${encodeURIComponent(body.id)}/compare`, body);
        if (isOk(res)) plan.tasks.push(resultOf('task', body.id, res.body as Comparison));
        else problems.push(`${where}: ${entryProblemOf(res)}`);
        continue;
      }
      const source = typeof body.source === 'string' ? (declared.get(body.source) ?? stored.get(body.source)) : undefined;
      const { problem, spec } = await check.check(body, source?.namespace as string | undefined);
      if (problem !== undefined || spec === undefined) {
        problems.push(`${where}: ${problem ?? 'invalid'}`);
        continue;
      }
      const current = storedTasks.find((t) => t.id === body.id);
      const fields = current === undefined ? [] : TASK_FIELDS.filter((f) => canonical(current[f]) !== canonical(spec[f]));
      plan.tasks.push(resultOf('task', body.id, { exists: current !== undefined, differs: current === undefined || fields.length > 0, fields }));
    }
  } finally {
    await check.close();
  }
  const taskIds = new Set(decl.tasks.map((t) => t.id));
  if (opts.prune && decl.tasks.length > 0) plan.pruneTasks = storedTasks.filter((t) => !taskIds.has(t.id)).map((t) => t.id).sort();
  plan.takeOver = checkSelectors(decl, storedTasks, (c) => (declared.get(c)?.namespace as string | undefined) ?? stored.get(c)?.namespace, new Set(plan.pruneTasks), (i) => whereOf('tasks', i, decl.tasks[i]?.id ?? ''), problems);
  if (problems.length > 0) {
    throw new DeclarationError(problems.length === 1 ? `${problems[0]}; nothing written` : `${problems.length} problems, nothing written:\n  ${problems.join('\n  ')}`);
  }

  if (opts.prune) {
    if (decl.clusters.length > 0) {
      const pruned = new Set(plan.pruneTasks);
      const users = [...decl.tasks.map((t) => ({ id: t.id, source: t.source, destination: t.destination })), ...storedTasks.filter((t) => !pruned.has(t.id) && !taskIds.has(t.id))];
      for (const c of storedClusters.filter((c) => !declared.has(c.id)).sort((a, b) => a.id.localeCompare(b.id))) {
        const user = users.find((t) => t.source === c.id || t.destination === c.id);
        if (user === undefined) plan.pruneClusters.push(c.id);
        else opts.note?.(`kept cluster ${c.id}: not in the files, but task ${user.id} uses it`);
      }
    }
  }
  return plan;
}

/**
 * Checks that no two tasks would sync the same service (source, destination, namespace, group,
 * service; defaults as the server applies them): not two of the files, and none of the files with
 * a stored task of another id that stays as it is. Adds a problem per clash; answers the ids of
 * declared tasks that take a service over from a stored task that moves or is pruned.
 */
function checkSelectors(
  decl: Declarations,
  storedTasks: readonly StoredTask[],
  namespaceOf: (cluster: string) => string | undefined,
  pruned: ReadonlySet<string>,
  whereOf: (i: number) => string,
  problems: string[],
): Set<string> {
  const key = (t: Record<string, unknown>) => JSON.stringify([t.source, t.destination, t.namespace, t.group, t.service]);
  const declaredKeys = decl.tasks.map((t) =>
    key({ ...t, namespace: t.namespace ?? (typeof t.source === 'string' ? namespaceOf(t.source) : undefined) ?? DEFAULT_NAMESPACE, group: t.group ?? DEFAULT_GROUP }),
  );
  const declaredIds = new Map(decl.tasks.map((t, i) => [t.id, declaredKeys[i]]));
  const first = new Map<string, number>();
  const takeOver = new Set<string>();
  decl.tasks.forEach((task, i) => {
    const k = declaredKeys[i] as string;
    const earlier = first.get(k);
    if (earlier !== undefined) {
      problems.push(`${whereOf(i)}: syncs the same service as ${whereOf(earlier)}`);
      return;
    }
    first.set(k, i);
    const owner = storedTasks.find((t) => t.id !== task.id && key({ ...t }) === k);
    if (owner === undefined) return;
    const moves = declaredIds.has(owner.id) && declaredIds.get(owner.id) !== k;
    if (moves || pruned.has(owner.id)) takeOver.add(task.id);
    else problems.push(`${whereOf(i)}: stored task ${owner.id} already syncs ${owner.namespace}/${owner.group}/${owner.service} from ${owner.source} to ${owner.destination}`);
  });
  return takeOver;
}

/**
 * Applies declarations through the REST API at `server`: {@link planApply} first (every entry
 * checked and compared, nothing written), then, unless `dryRun`, writes what differs: clusters
 * (`PUT`), the tasks `--prune` deletes, tasks (compared again, as a cluster written just before may
 * change a task's defaults, and sent with `PUT` only when they differ), and last the clusters
 * `--prune` deletes. Idempotent: applying the same files twice sends no `PUT` the second time, so
 * no adapter is rebuilt and no copy re-created. `options.token` is sent as `Authorization: Bearer`.
 */
export async function applyDeclarations(server: string, decl: Declarations, options: ApplyOptions = {}): Promise<ApplyResult[]> {
  const plan = await planApply(server, decl, options);
  const deleted = (kind: 'cluster' | 'task', ids: string[]): ApplyResult[] => ids.map((id) => ({ kind, id, action: 'deleted' }));
  if (options.dryRun) return [...plan.clusters, ...deleted('task', plan.pruneTasks), ...plan.tasks, ...deleted('cluster', plan.pruneClusters)];

  const call = (method: string, path: string, body?: unknown) => callApi(server, options.token, method, path, body);
  const results: ApplyResult[] = [];
  for (const [i, body] of decl.clusters.entries()) {
    const planned = plan.clusters[i] as ApplyResult;
    if (planned.action !== 'unchanged') await expectOk(await call('PUT', `/api/v1/clusters/${encodeURIComponent(body.id)}`, body), `cluster ${body.id}`);
    results.push(planned);
  }
  for (const id of plan.pruneTasks) {
    await expectOk(await call('DELETE', `/api/v1/tasks/${encodeURIComponent(id)}`), `task ${id}`);
    results.push({ kind: 'task', id, action: 'deleted' });
  }
  const ordered = [...decl.tasks.filter((t) => !plan.takeOver?.has(t.id)), ...decl.tasks.filter((t) => plan.takeOver?.has(t.id))];
  for (const body of ordered) {
    const path = `/api/v1/tasks/${encodeURIComponent(body.id)}`;
    const compared = await call('POST', `${path}/compare`, body);
    await expectOk(compared, `task ${body.id}`);
    const result = resultOf('task', body.id, compared.body as Comparison);
    if (result.action !== 'unchanged') await expectOk(await call('PUT', path, body), `task ${body.id}`);
    results.push(result);
  }
  for (const id of plan.pruneClusters) {
    await expectOk(await call('DELETE', `/api/v1/clusters/${encodeURIComponent(id)}`), `cluster ${id}`);
    results.push({ kind: 'cluster', id, action: 'deleted' });
  }
  return results;
}

/** `cluster east updated: endpoints, labels`; `(dry run)` appended to lines of a dry run. */
export function formatResult(r: ApplyResult, dryRun: boolean): string {
  const fields = r.action === 'updated' && r.fields !== undefined && r.fields.length > 0 ? `: ${r.fields.join(', ')}` : '';
  return `${r.kind} ${r.id} ${r.action}${fields}${dryRun && r.action !== 'unchanged' ? ' (dry run)' : ''}`;
}

/** The last line of a dry run: how many changes are pending. */
export function dryRunSummary(results: readonly ApplyResult[]): string {
  const count = (a: ApplyResult['action']) => results.filter((r) => r.action === a).length;
  const changes = results.length - count('unchanged');
  if (changes === 0) return `dry run: no changes (${count('unchanged')} unchanged); nothing written`;
  return `dry run: ${changes} change${changes === 1 ? '' : 's'} pending (${count('created')} created, ${count('updated')} updated, ${count('deleted')} deleted, ${count('unchanged')} unchanged); nothing written`;
}

interface Comparison {
  exists: boolean;
  differs: boolean;
  fields: string[];
}

function resultOf(kind: 'cluster' | 'task', id: string, c: Comparison): ApplyResult {
  if (!c.exists) return { kind, id, action: 'created' };
  if (!c.differs) return { kind, id, action: 'unchanged' };
  return { kind, id, action: 'updated', fields: c.fields };
}

type Call = (method: string, path: string, body?: unknown) => Promise<{ status: number; body: unknown }>;

/** `GET` of a list route (`{items: [...]}`). */
export async function getList<T>(call: Call, path: string): Promise<{ items: T[] }> {
  const res = await call('GET', path);
  await expectOk(res, `GET ${path}`);
  return res.body as { items: T[] };
}

/** One request to the REST API; an unreachable API is an error that says what to check. */
export async function callApi(server: string, token: string | undefined, method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }> {
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

function isOk(res: { status: number }): boolean {
  return res.status >= 200 && res.status < 300;
}

/** `400 invalid_request body.colour is not a known field`, with a hint on 401 and 403. */
function problemOf(res: { status: number; body: unknown }): string {
  const err = (res.body as { error?: { code?: string; message?: string } } | undefined)?.error;
  const hint = res.status === 401 || res.status === 403 ? ' (the API wants an admin token: set REGSYNC_API_TOKEN)' : '';
  return `${`${res.status} ${err?.code ?? ''} ${err?.message ?? JSON.stringify(res.body)}`.trim()}${hint}`;
}

/** What is wrong with an entry the server refused: its message alone for a 400 (the entry's fault), else {@link problemOf}. */
function entryProblemOf(res: { status: number; body: unknown }): string {
  const message = (res.body as { error?: { message?: string } } | undefined)?.error?.message;
  return res.status === 400 && message !== undefined ? message : problemOf(res);
}

async function expectOk(res: { status: number; body: unknown }, what: string): Promise<void> {
  if (isOk(res)) return;
  throw new Error(`${what}: ${problemOf(res)}`);
}
