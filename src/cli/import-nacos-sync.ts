import { readFileSync, statSync, writeFileSync } from 'node:fs';
import { extname } from 'node:path';
import { fastify } from 'fastify';
import { Document, isMap, isSeq } from 'yaml';
import { TaskBodyCheck } from '../api/index.js';
import { NacosSyncError } from '../nacos-sync/nacos-sync-error.js';
import { clusterAddBody, taskAddBody } from '../nacos-sync/nacos-sync-schemas.js';
import { clusterSpecOf, isBlank, taskBodyOf, TASK_STATUS_DELETE, TASK_STATUS_SYNC, type ClusterAddRequest, type TaskAddRequest } from '../nacos-sync/nacos-sync-wire.js';
import { describeViolation } from '../validation/violation.js';
import { DEFAULT_NAMESPACE, NACOS_SYNC_NAME_OPTION, type ClusterSpec } from '../model/index.js';
import { applyDeclarations, dryRunSummary, formatResult, type Declarations } from './apply-command.js';
import { readCsvTable } from './import-nacos-sync-csv.js';
import { ImportNacosSyncError } from './import-nacos-sync-error.js';
import { MAX_FILE_BYTES, placeText, type ExportRow, type RowValue } from './import-nacos-sync-rows.js';
import { readSqlDump, type SqlDialect } from './import-nacos-sync-sql.js';

/** The rows of every file of an export, and notes for the operator. */
export interface ExportRows {
  rows: ExportRow[];
  notes: string[];
}

/** A cluster as the native API's `PUT /api/v1/clusters/:id` takes it. */
export interface ImportedCluster extends Record<string, unknown> {
  id: string;
  kind: string;
  endpoints: string[];
  namespace?: string;
  username?: string;
  password?: string;
  options: Record<string, unknown>;
}

/** A task as the native API's `PUT /api/v1/tasks/:id` takes it, namespace and group spelt out. */
export interface ImportedTask extends Record<string, unknown> {
  id: string;
  source: string;
  destination: string;
  service: string;
  group: string;
  namespace: string;
}

/** What an export maps to. */
export interface ImportResult {
  clusters: ImportedCluster[];
  tasks: ImportedTask[];
  /** Where each cluster and task was read (`file:line:column`), by index. */
  where: { clusters: string[]; tasks: string[] };
  /** The `password` of each cluster as the YAML writes it without `--include-passwords`: the variable to set. */
  passwordVariables: Map<string, string>;
  /** Rows that cannot be imported, one line each naming the place and the reason. */
  problems: string[];
  /** Rows left out on purpose (tasks nacos-sync is deleting), and hints about the files. */
  notes: string[];
}

/**
 * Reads the files of a nacos-sync export: a `.csv`/`.tsv` file is one table with a header row
 * (see {@link readCsvTable}); any other file is a SQL dump holding either table or both (see
 * {@link readSqlDump}). Files larger than {@link MAX_FILE_BYTES} are refused before they are read.
 */
export function readExportFiles(files: readonly string[], dialect: SqlDialect = 'auto'): ExportRows {
  const out: ExportRows = { rows: [], notes: [] };
  for (const file of files) {
    const size = statSync(file).size;
    if (size > MAX_FILE_BYTES) throw new ImportNacosSyncError(`${file}: ${size} bytes; an export of nacos-sync's two tables is far smaller (at most ${MAX_FILE_BYTES} bytes are read)`);
    const text = readFileSync(file, 'utf8');
    if (['.csv', '.tsv'].includes(extname(file).toLowerCase())) {
      out.rows.push(...readCsvTable(text, file));
    } else {
      const dump = readSqlDump(text, file, dialect);
      out.rows.push(...dump.rows);
      out.notes.push(...dump.notes);
    }
  }
  if (!out.rows.some((r) => r.table === 'cluster')) out.notes.push(`no row of the cluster table in ${files.join(', ')}`);
  return out;
}

/**
 * Maps the rows of nacos-sync's `cluster` and `task` tables onto regsync clusters and tasks: what
 * its console API (`/v1/cluster/add`, `/v1/task/add`) would store for the same clusters and tasks,
 * through the same functions ({@link clusterSpecOf}, {@link taskBodyOf}) and schemas
 * (`nacos-sync-schemas.ts`), then checked as the native API checks task bodies
 * ({@link TaskBodyCheck}). So the ids are nacos-sync's (and must match nacos-sync's formulas: a row
 * whose `cluster_id` or `task_id` does not was not written by nacos-sync, and is refused), a
 * cluster keeps its name in `options.nacosSyncName`, a `SYNC` task runs.
 *
 * A task whose `task_status` is `DELETE` is left out with a note: nacos-sync is removing its
 * copies. A row that cannot be mapped (an unsupported cluster type such as `CS`, a Dubbo
 * `version` filter, a task of a cluster not imported, a second task of the same service) is a
 * problem; with `strict` the import is refused, listing every problem, else each is reported and
 * the row skipped.
 */
export async function importRows(rows: readonly ExportRow[], opts: { strict?: boolean } = {}): Promise<ImportResult> {
  const result: ImportResult = { clusters: [], tasks: [], where: { clusters: [], tasks: [] }, passwordVariables: new Map(), problems: [], notes: [] };
  const check = new RequestCheck();
  const taskCheck = new TaskBodyCheck();
  const index: ImportIndex = { clusters: new Map(), skippedClusters: new Map(), tasks: new Map(), selectors: new Map() };
  try {
    for (const row of rows.filter((r) => r.table === 'cluster')) await importCluster(row, check, result, index);
    for (const row of rows.filter((r) => r.table === 'task')) await importTask(row, check, taskCheck, result, index);
  } finally {
    await Promise.all([check.close(), taskCheck.close()]);
  }
  nameVariables(result);
  if (opts.strict && result.problems.length > 0) {
    throw new ImportNacosSyncError(`${result.problems.length} row${result.problems.length === 1 ? '' : 's'} cannot be imported (--strict), nothing written:\n  ${result.problems.join('\n  ')}`);
  }
  return result;
}

/** What an import has taken so far, by key, so that each row is checked against the others in constant time. */
interface ImportIndex {
  /** Index in `clusters` by id. */
  clusters: Map<string, number>;
  /** Where a cluster row that is not imported was, by the id it states. */
  skippedClusters: Map<string, string>;
  /** Index in `tasks` by id. */
  tasks: Map<string, number>;
  /** Index in `tasks` by what the task syncs (source, destination, namespace, group, service). */
  selectors: Map<string, number>;
}

/** A compiled request schema, as Fastify hands it out. */
type Validator = ((body: unknown) => boolean) & { errors?: Array<Parameters<typeof describeViolation>[1]> | null };

/**
 * The request schemas of nacos-sync's routes, compiled by the same validator settings as the API's
 * (an app that never listens, asked once for its compiled validators), with the API's messages.
 */
class RequestCheck {
  private readonly app = fastify({ ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } } });
  private validators: Record<'cluster' | 'task', Validator> | undefined;

  constructor() {
    this.app.post('/compile', async (request) => {
      this.validators = { cluster: request.compileValidationSchema(clusterAddBody), task: request.compileValidationSchema(taskAddBody) };
      return {};
    });
  }

  /** The schema's complaint about `body`, without its `body.` prefix; undefined when it passes. */
  async problem(kind: 'cluster' | 'task', body: object): Promise<string | undefined> {
    if (this.validators === undefined) await this.app.inject({ method: 'POST', url: '/compile', payload: {} });
    const validate = (this.validators as Record<'cluster' | 'task', Validator>)[kind];
    if (validate(body)) return undefined;
    const violation = validate.errors?.[0];
    return violation === undefined || violation === null ? 'invalid' : describeViolation('body', violation).replace(/^body\./, '');
  }

  async close(): Promise<void> {
    await this.app.close();
  }
}

/** Reads a row's values; `missing` names required columns the export does not have. */
function valuesOf(row: ExportRow, required: readonly string[]) {
  const get = (key: string): RowValue | undefined => row.values.get(key);
  const missing = required.filter((k) => get(k) === undefined);
  if (missing.length > 0) {
    throw new ImportNacosSyncError(`${placeText(row.at)}: the ${row.table} table of this export has no column ${missing.join(', ')}; export the whole table`);
  }
  return { get, text: (key: string): string | null => get(key)?.value ?? null };
}

/** `file:line:column: what: message`, at the value the message is about (else the row). */
function problemAt(row: ExportRow, value: RowValue | undefined, what: string, message: string): string {
  return `${placeText(value?.at ?? row.at)}: ${what}: ${value === undefined ? '' : `${value.column}: `}${message}`;
}

/** The request field a nacos-sync message names first, as the column key it comes from. */
function columnNamed(message: string, fields: Readonly<Record<string, string>>): string | undefined {
  let best: { at: number; key: string } | undefined;
  for (const [field, key] of Object.entries(fields)) {
    const at = message.indexOf(field);
    if (at >= 0 && (best === undefined || at < best.at)) best = { at, key };
  }
  return best?.key;
}

const CLUSTER_FIELDS = { connectKeyList: 'connectkeylist', clusterName: 'clustername', clusterType: 'clustertype', namespace: 'namespace', userName: 'username', password: 'password' };
const TASK_FIELDS = { sourceClusterId: 'sourceclusterid', destClusterId: 'destclusterid', serviceName: 'servicename', groupName: 'groupname', version: 'version', nameSpace: 'namespace' };

async function importCluster(row: ExportRow, check: RequestCheck, result: ImportResult, index: ImportIndex): Promise<void> {
  const { get, text } = valuesOf(row, ['clustername', 'clustertype', 'connectkeylist']);
  const what = `cluster ${text('clustername') ?? 'null'} (${text('clustertype') ?? 'null'})`;
  const storedId = text('clusterid');
  const skip = (key: string | undefined, message: string) => {
    const problem = problemAt(row, key === undefined ? undefined : get(key), what, message);
    result.problems.push(problem);
    if (!isBlank(storedId)) index.skippedClusters.set(storedId, placeText(row.at));
  };
  const keys = connectKeysOf(text('connectkeylist'));
  if (typeof keys === 'string') return skip('connectkeylist', keys);
  const request: ClusterAddRequest = {
    clusterName: text('clustername'),
    clusterType: text('clustertype'),
    connectKeyList: keys,
    userName: text('username'),
    password: text('password'),
    namespace: text('namespace'),
  };
  const schemaProblem = await check.problem('cluster', request);
  if (schemaProblem !== undefined) return skip(columnNamed(schemaProblem, CLUSTER_FIELDS), schemaProblem);
  let spec: ClusterSpec;
  try {
    spec = clusterSpecOf(request);
  } catch (err) {
    if (!(err instanceof NacosSyncError)) throw err;
    return skip(columnNamed(err.message, CLUSTER_FIELDS), err.message);
  }
  if (!isBlank(storedId) && storedId !== spec.id) {
    return skip('clusterid', `is not nacos-sync's id for this name and type (md5 of "${String(request.clusterName)}_${String(request.clusterType)}" is ${spec.id}); nacos-sync never writes such a row`);
  }
  const earlier = index.clusters.get(spec.id);
  if (earlier !== undefined) return skip(undefined, `cluster ${spec.id} is in the export twice (also at ${result.where.clusters[earlier] ?? ''}); the first is imported`);
  const cluster: ImportedCluster = {
    id: spec.id,
    kind: spec.kind,
    endpoints: spec.endpoints,
    ...(spec.namespace === undefined ? {} : { namespace: spec.namespace }),
    ...(spec.username === undefined ? {} : { username: spec.username }),
    ...(spec.password === undefined ? {} : { password: spec.password }),
    options: { [NACOS_SYNC_NAME_OPTION]: spec.options[NACOS_SYNC_NAME_OPTION] },
  };
  index.clusters.set(cluster.id, result.clusters.length);
  result.clusters.push(cluster);
  result.where.clusters.push(placeText(row.at));
}

/**
 * nacos-sync's `connect_key_list`: the JSON array of strings its API writes (Jackson), or, in rows
 * written by hand, one comma-separated string. Answers the list, or what is wrong with it.
 */
function connectKeysOf(raw: string | null): string[] | string {
  if (raw === null || raw.trim() === '') return [];
  if (!raw.trim().startsWith('[')) return [raw];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return 'is not a JSON list of "host:port" strings, as nacos-sync writes it';
  }
  if (!Array.isArray(parsed) || !parsed.every((k) => typeof k === 'string')) return 'is not a JSON list of "host:port" strings, as nacos-sync writes it';
  return parsed as string[];
}

async function importTask(row: ExportRow, check: RequestCheck, taskCheck: TaskBodyCheck, result: ImportResult, index: ImportIndex): Promise<void> {
  const { get, text } = valuesOf(row, ['sourceclusterid', 'destclusterid', 'servicename']);
  const storedId = text('taskid');
  const what = `task ${storedId ?? text('servicename') ?? 'null'}`;
  const skip = (key: string | undefined, message: string) => {
    result.problems.push(problemAt(row, key === undefined ? undefined : get(key), what, message));
  };
  const status = text('taskstatus');
  if (status === TASK_STATUS_DELETE) {
    result.notes.push(`${placeText(row.at)}: ${what}: task_status ${TASK_STATUS_DELETE}: nacos-sync is removing its copies; not imported`);
    return;
  }
  if (status !== TASK_STATUS_SYNC) return skip(get('taskstatus') === undefined ? undefined : 'taskstatus', `is ${status ?? 'NULL'}; nacos-sync's tasks are ${TASK_STATUS_SYNC} or ${TASK_STATUS_DELETE}`);
  const request: TaskAddRequest = {
    sourceClusterId: text('sourceclusterid') ?? '',
    destClusterId: text('destclusterid') ?? '',
    serviceName: text('servicename') ?? '',
    groupName: text('groupname'),
    version: text('version'),
    nameSpace: text('namespace'),
  };
  const schemaProblem = await check.problem('task', request);
  if (schemaProblem !== undefined) return skip(columnNamed(schemaProblem, TASK_FIELDS), schemaProblem);
  let body: ReturnType<typeof taskBodyOf>;
  try {
    body = taskBodyOf(request);
  } catch (err) {
    if (!(err instanceof NacosSyncError)) throw err;
    return skip(columnNamed(err.message, TASK_FIELDS), err.message);
  }
  if (!isBlank(storedId) && storedId !== body.id) {
    return skip('taskid', `is not nacos-sync's id for this service, group and clusters (${body.id}); nacos-sync never writes such a row`);
  }
  for (const [key, id] of [['sourceclusterid', body.source], ['destclusterid', body.destination]] as const) {
    if (index.clusters.has(id)) continue;
    const skippedAt = index.skippedClusters.get(id);
    return skip(key, skippedAt === undefined ? `names no cluster of the export (${id})` : `names the cluster at ${skippedAt}, which is not imported`);
  }
  const source = result.clusters[index.clusters.get(body.source) ?? -1];
  const { problem, spec } = await taskCheck.check({ ...body }, source?.namespace);
  if (problem !== undefined || spec === undefined) return skip(undefined, problem ?? 'invalid');
  const task: ImportedTask = { id: body.id, source: spec.source, destination: spec.destination, service: spec.service, group: spec.group, namespace: spec.namespace ?? DEFAULT_NAMESPACE };
  const earlier = index.tasks.get(task.id);
  if (earlier !== undefined) return skip(undefined, `task ${task.id} is in the export twice (also at ${result.where.tasks[earlier] ?? ''}); the first is imported`);
  const selector = JSON.stringify([task.source, task.destination, task.namespace, task.group, task.service]);
  const same = index.selectors.get(selector);
  if (same !== undefined) {
    return skip(undefined, `syncs ${task.namespace}/${task.group}/${task.service} from ${task.source} to ${task.destination}, as task ${result.tasks[same]?.id ?? ''} at ${result.where.tasks[same] ?? ''} does; the first is imported`);
  }
  index.tasks.set(task.id, result.tasks.length);
  index.selectors.set(selector, result.tasks.length);
  result.tasks.push(task);
  result.where.tasks.push(placeText(row.at));
}

/** `NACOS_SYNC_PASSWORD_<NAME>_<TYPE>` for each cluster with a password (the id's start added should two names meet). */
function nameVariables(result: ImportResult): void {
  const taken = new Set<string>();
  for (const c of result.clusters) {
    if (c.password === undefined) continue;
    const name = String(c.options[NACOS_SYNC_NAME_OPTION] ?? '');
    const base = `NACOS_SYNC_PASSWORD_${`${name}_${c.kind}`.toUpperCase().replace(/[^A-Z0-9]+/g, '_').replace(/^_|_$/g, '')}`;
    const variable = taken.has(base) ? `${base}_${c.id.slice(0, 8).toUpperCase()}` : base;
    taken.add(variable);
    result.passwordVariables.set(c.id, variable);
  }
}

/** The import as declarations for {@link applyDeclarations}: passwords as read, places as `where`. */
export function declarationsOf(result: ImportResult): Declarations {
  const where = (kind: string, list: readonly string[], items: ReadonlyArray<{ id: string }>) => items.map((item, i) => `${list[i] ?? ''}: ${kind} ${item.id}`);
  return {
    clusters: result.clusters,
    tasks: result.tasks,
    where: { clusters: where('cluster', result.where.clusters, result.clusters), tasks: where('task', result.where.tasks, result.tasks) },
  };
}

/**
 * The import as a declarations file for `regsync apply -f`. `${` in any value is written `$${`, so
 * that `apply` reads it back literally. A password is written as a `${VARIABLE}` reference that
 * `apply` fills from its environment (listed in the file's comment), unless `includePasswords`.
 */
export function importYaml(result: ImportResult, files: readonly string[], includePasswords = false): string {
  const literal = (v: unknown): unknown =>
    typeof v === 'string' ? v.replaceAll('${', () => '$${') : Array.isArray(v) ? v.map(literal) : v !== null && typeof v === 'object' ? Object.fromEntries(Object.entries(v).map(([k, x]) => [k, literal(x)])) : v;
  const clusters = result.clusters.map((c) => {
    const entry = literal(c) as Record<string, unknown>;
    if (c.password !== undefined && !includePasswords) entry.password = `\${${result.passwordVariables.get(c.id) ?? ''}}`;
    return entry;
  });
  const doc = new Document({ clusters, tasks: result.tasks.map((t) => literal(t)) });
  const variables = [...result.passwordVariables.values()];
  doc.commentBefore = [
    ` nacos-sync's clusters and tasks from ${files.join(', ')}, by \`regsync import-nacos-sync\`.`,
    ' Apply with `regsync apply -f <this file>`; applying it twice changes nothing.',
    ...(variables.length > 0 && !includePasswords ? [` Set the passwords when applying: ${variables.join(', ')}.`] : []),
  ].join('\n');
  const seq = doc.get('clusters', true);
  if (isSeq(seq)) {
    seq.items.forEach((item, i) => {
      const c = result.clusters[i];
      if (c !== undefined && isMap(item)) item.commentBefore = ` ${result.where.clusters[i] ?? ''}: nacos-sync cluster ${String(c.options[NACOS_SYNC_NAME_OPTION])}`;
    });
  }
  return doc.toString();
}

/** The options of `regsync import-nacos-sync`. */
export interface ImportCommandOptions {
  output?: string;
  apply?: boolean;
  server: string;
  dryRun?: boolean;
  strict?: boolean;
  includePasswords?: boolean;
  sqlDialect: SqlDialect;
  token?: string;
}

/**
 * `regsync import-nacos-sync <files...>`: reads the export, reports what it skips (stderr), then
 * writes the YAML (stdout or `output`; a file holding passwords is made readable by its owner
 * only) or, with `apply`, applies the clusters and tasks through the REST API exactly as `regsync
 * apply` does ({@link applyDeclarations}: everything checked before the first write, nothing
 * written twice).
 */
export async function runImportNacosSync(files: readonly string[], opts: ImportCommandOptions, io: { out: (text: string) => void; err: (line: string) => void }): Promise<void> {
  if (opts.dryRun && !opts.apply) throw new ImportNacosSyncError('--dry-run goes with --apply (without it nothing is written to a server anyway)');
  const read = readExportFiles(files, opts.sqlDialect);
  const result = await importRows(read.rows, { strict: opts.strict === true });
  for (const line of [...read.notes, ...result.notes]) io.err(line);
  for (const line of result.problems) io.err(`skipped ${line}`);
  io.err(`read ${result.clusters.length} cluster${result.clusters.length === 1 ? '' : 's'} and ${result.tasks.length} task${result.tasks.length === 1 ? '' : 's'}${result.problems.length > 0 ? `; skipped ${result.problems.length} row${result.problems.length === 1 ? '' : 's'} (--strict refuses them)` : ''}`);
  if (opts.apply) {
    const dryRun = opts.dryRun === true;
    const results = await applyDeclarations(opts.server, declarationsOf(result), { token: opts.token, dryRun, note: io.err });
    for (const r of results) io.out(`${formatResult(r, dryRun)}\n`);
    if (dryRun) io.out(`${dryRunSummary(results)}\n`);
    return;
  }
  const text = importYaml(result, files, opts.includePasswords === true);
  if (opts.output === undefined) io.out(text);
  else writeFileSync(opts.output, text, opts.includePasswords ? { mode: 0o600 } : {});
}
