import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname, extname, resolve } from 'node:path';
import type { Logger } from 'pino';
import { parseDocument } from 'yaml';
import { silentLogger } from '../log.js';
import type { CmdbEntities, CmdbEntity, CmdbEvent, CmdbLabel, CmdbProblem, CmdbProvider } from './provider.js';

/** Options of {@link FileCmdbProvider}. */
export interface FileCmdbProviderOptions {
  /** The YAML or JSON file. */
  path: string;
  /** Format; default by extension (`.json`, `.yaml`, `.yml`), else sniffed (`{` first means JSON). */
  format?: 'yaml' | 'json';
  /** Period of the stat fallback that catches changes `fs.watch` misses, in ms; default 2000. */
  pollMs?: number;
  /** Quiet time after the last change notice before reloading, in ms; default 100. */
  debounceMs?: number;
  /** How long events are kept for {@link FileCmdbProvider.events}, in ms; default one hour. */
  eventRetentionMs?: number;
  logger?: Logger;
}

/** A CMDB file that cannot be used; `path` is where in the document the problem is (empty for the whole file). */
export class CmdbFileError extends Error {
  constructor(
    readonly file: string,
    readonly path: string,
    readonly problem: string,
  ) {
    super(path === '' ? `${file}: ${problem}` : `${file}: ${path}: ${problem}`);
    this.name = 'CmdbFileError';
  }
}

/** The validated content of a CMDB file. */
export interface CmdbFileContent {
  labels: Map<string, CmdbLabel>;
  entities: CmdbEntities;
}

const TOP_LEVEL_KEYS = new Set(['labels', 'entities']);
const LABEL_KEYS = new Set(['values', 'description']);

/**
 * Parses and validates the text of a CMDB file; throws {@link CmdbFileError} naming `file` and the path
 * of the first bad field.
 *
 * Shape (YAML shown; JSON is the same tree):
 * ```yaml
 * labels:                # optional; every label an entity uses must be declared here
 *   site: [x11, x12]     # allowed values; null or [] allows any value
 *   rack:                # long form, with a description
 *     values: []
 *     description: Rack of the host
 * entities:              # optional; entity type -> entity name -> label -> value
 *   ip:
 *     11.11.11.11: {site: x11}
 * ```
 * Strict on purpose (a typo must not silently drop a label): unknown top-level keys, undeclared labels,
 * values outside the allowed ones, non-string values (quote numbers in YAML) and duplicate keys are
 * rejected.
 */
export function parseCmdbFile(text: string, file: string, format?: 'yaml' | 'json'): CmdbFileContent {
  const fmt = format ?? formatOf(file, text);
  let raw: unknown;
  if (fmt === 'json') {
    try {
      raw = JSON.parse(text);
    } catch (error) {
      throw new CmdbFileError(file, '', `invalid JSON: ${(error as Error).message}`);
    }
  } else {
    const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
    const first = doc.errors[0];
    if (first !== undefined) throw new CmdbFileError(file, '', `invalid YAML: ${first.message}`);
    raw = doc.toJS({ maxAliasCount: 100 });
  }
  return validate(raw, file);
}

function formatOf(file: string, text: string): 'yaml' | 'json' {
  const ext = extname(file).toLowerCase();
  if (ext === '.json') return 'json';
  if (ext === '.yaml' || ext === '.yml') return 'yaml';
  return text.trimStart().startsWith('{') ? 'json' : 'yaml';
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'a mapping' : `${typeof value} ${JSON.stringify(value)}`;
}

/** `labels.site`, or `entities.ip["11.11.11.11"]` for keys that are not plain identifiers. */
function child(path: string, key: string): string {
  const part = /^[A-Za-z_][\w-]*$/.test(key) ? key : JSON.stringify(key);
  if (path === '') return part;
  return part.startsWith('"') ? `${path}[${part}]` : `${path}.${part}`;
}

function validate(raw: unknown, file: string): CmdbFileContent {
  const fail = (path: string, problem: string): never => {
    throw new CmdbFileError(file, path, problem);
  };
  if (!isMapping(raw)) fail('', `the document must be a mapping with "labels" and "entities", got ${describe(raw)}`);
  const top = raw as Record<string, unknown>;
  for (const key of Object.keys(top)) {
    if (!TOP_LEVEL_KEYS.has(key)) fail(child('', key), 'unknown top-level key (allowed: labels, entities)');
  }

  const labels = new Map<string, CmdbLabel>();
  const rawLabels = top.labels ?? {};
  if (!isMapping(rawLabels)) fail('labels', `must be a mapping of label name to allowed values, got ${describe(rawLabels)}`);
  for (const [name, def] of Object.entries(rawLabels as Record<string, unknown>)) {
    const at = child('labels', name);
    if (name.trim() === '') fail(at, 'label names must not be blank');
    let values: unknown = def;
    let description: unknown;
    if (isMapping(def)) {
      for (const key of Object.keys(def)) {
        if (!LABEL_KEYS.has(key)) fail(child(at, key), 'unknown key (allowed: values, description)');
      }
      values = def.values;
      description = def.description;
      if (description !== undefined && typeof description !== 'string') {
        fail(child(at, 'description'), `must be a string, got ${describe(description)}`);
      }
    }
    if (values === null || values === undefined) values = [];
    if (!Array.isArray(values)) fail(isMapping(def) ? child(at, 'values') : at, `must be a list of allowed values or null, got ${describe(values)}`);
    const allowed: string[] = [];
    (values as unknown[]).forEach((value, i) => {
      const vat = `${isMapping(def) ? child(at, 'values') : at}[${i}]`;
      if (typeof value !== 'string') fail(vat, `allowed values must be strings (quote numbers in YAML), got ${describe(value)}`);
      if (allowed.includes(value as string)) fail(vat, `duplicate allowed value ${JSON.stringify(value)}`);
      allowed.push(value as string);
    });
    labels.set(name, description === undefined ? { name, values: allowed } : { name, values: allowed, description: description as string });
  }

  const entities: CmdbEntities = new Map();
  const rawEntities = top.entities ?? {};
  if (!isMapping(rawEntities)) fail('entities', `must be a mapping of entity type to entities, got ${describe(rawEntities)}`);
  for (const [type, byName] of Object.entries(rawEntities as Record<string, unknown>)) {
    const tat = child('entities', type);
    if (type.trim() === '') fail(tat, 'entity types must not be blank');
    if (byName === null) {
      entities.set(type, new Map());
      continue;
    }
    if (!isMapping(byName)) fail(tat, `must be a mapping of entity name to labels, got ${describe(byName)}`);
    const named = new Map<string, CmdbEntity>();
    for (const [name, rawEntityLabels] of Object.entries(byName as Record<string, unknown>)) {
      const eat = child(tat, name);
      if (name.trim() === '') fail(eat, 'entity names must not be blank');
      const entityLabels: Record<string, string> = {};
      const given = rawEntityLabels ?? {};
      if (!isMapping(given)) fail(eat, `must be a mapping of label name to value, got ${describe(given)}`);
      for (const [label, value] of Object.entries(given as Record<string, unknown>)) {
        const lat = child(eat, label);
        const def = labels.get(label);
        if (def === undefined) fail(lat, `label ${JSON.stringify(label)} is not declared under "labels"`);
        if (typeof value !== 'string') fail(lat, `label values must be strings (quote numbers in YAML), got ${describe(value)}`);
        if (def!.values.length > 0 && !def!.values.includes(value as string)) {
          fail(lat, `value ${JSON.stringify(value)} is not allowed for label ${JSON.stringify(label)} (allowed: ${def!.values.join(', ')})`);
        }
        entityLabels[label] = value as string;
      }
      named.set(name, { type, name, labels: entityLabels });
    }
    entities.set(type, named);
  }
  return { labels, entities };
}

function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

/** The events that turn `before` into `after`. */
function diffEntities(before: CmdbEntities, after: CmdbEntities): CmdbEvent[] {
  const events: CmdbEvent[] = [];
  for (const [type, byName] of after) {
    const old = before.get(type);
    for (const [name, entity] of byName) {
      const prev = old?.get(name);
      if (prev === undefined || !sameLabels(prev.labels, entity.labels)) {
        events.push({ entityName: name, entityType: type, type: 'ENTITY_ADD_OR_UPDATE' });
      }
    }
  }
  for (const [type, byName] of before) {
    const now = after.get(type);
    for (const name of byName.keys()) {
      if (now?.has(name) !== true) events.push({ entityName: name, entityType: type, type: 'ENTITY_REMOVE' });
    }
  }
  return events;
}

function copyEntity(entity: CmdbEntity): CmdbEntity {
  return { type: entity.type, name: entity.name, labels: { ...entity.labels } };
}

/**
 * A {@link CmdbProvider} reading one YAML or JSON file (format: see {@link parseCmdbFile}).
 *
 * {@link start} loads the file (and throws if it cannot be used: there is no last good content yet),
 * then follows it: `fs.watch` on its directory (so replacing the file by rename, as editors and config
 * management do, is seen) plus a stat every `pollMs` for file systems where watching is unreliable.
 * Change notices are debounced by `debounceMs`, and reloads never overlap.
 *
 * A reload that fails (file missing, unreadable, invalid) keeps serving the last good content and sets
 * {@link lastError}; the next good reload clears it. Each good reload records one timestamped event per
 * entity added, changed or removed, which {@link events} returns; events older than `eventRetentionMs`
 * are dropped (readers catch up with full refreshes).
 *
 * Answers are copies; callers may mutate them.
 */
export class FileCmdbProvider implements CmdbProvider {
  readonly path: string;
  private readonly opts: FileCmdbProviderOptions;
  private readonly logger: Logger;
  private content: CmdbFileContent = { labels: new Map(), entities: new Map() };
  private history: Array<{ at: number; event: CmdbEvent }> = [];
  private problem: CmdbProblem | undefined;
  private watcher: FSWatcher | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private debounceTimer: NodeJS.Timeout | undefined;
  /** `mtime:size:ino` of the file at the last load attempt, `missing`, or undefined before the first. */
  private signature: string | undefined;
  private loading: Promise<boolean> | undefined;
  private loadAgain = false;
  private state: 'new' | 'started' | 'closed' = 'new';

  constructor(opts: FileCmdbProviderOptions) {
    this.opts = opts;
    this.path = resolve(opts.path);
    this.logger = (opts.logger ?? silentLogger()).child({ component: 'cmdb-file', file: this.path });
  }

  /** Loads the file (throwing {@link CmdbFileError} if it cannot be used) and starts following it. */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`FileCmdbProvider already ${this.state}`);
    const error = await this.load();
    if (error !== undefined) throw error;
    this.state = 'started';
    this.watchDirectory();
    const pollMs = this.opts.pollMs ?? 2000;
    this.pollTimer = setInterval(() => void this.checkStat(), pollMs);
    this.pollTimer.unref();
  }

  /** Stops following the file; the content loaded last stays readable. Idempotent. */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.watcher?.close();
    this.watcher = undefined;
    clearInterval(this.pollTimer);
    clearTimeout(this.debounceTimer);
    await this.loading;
  }

  /**
   * Reloads the file now (after any reload in progress); resolves true if the new content is in use,
   * false if it failed (see {@link lastError}).
   */
  async reload(): Promise<boolean> {
    if (this.loading !== undefined) {
      // The running loop loads once more, so this call sees the file as it is now.
      this.loadAgain = true;
      return this.loading;
    }
    this.loading = (async () => {
      let ok: boolean;
      do {
        this.loadAgain = false;
        ok = (await this.load()) === undefined;
      } while (this.loadAgain && this.state !== 'closed');
      return ok;
    })().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  /** The problem with the file's current content, or undefined when it is in use. */
  lastError(): CmdbProblem | undefined {
    return this.problem === undefined ? undefined : { ...this.problem };
  }

  async labelNames(): Promise<string[]> {
    return [...this.content.labels.keys()];
  }

  async entityTypes(): Promise<string[]> {
    return [...this.content.entities.keys()];
  }

  async label(name: string): Promise<CmdbLabel | undefined> {
    const def = this.content.labels.get(name);
    return def === undefined ? undefined : { ...def, values: [...def.values] };
  }

  async labelValue(entityName: string, entityType: string, label: string): Promise<string | undefined> {
    const entity = this.content.entities.get(entityType)?.get(entityName);
    return entity !== undefined && Object.hasOwn(entity.labels, label) ? entity.labels[label] : undefined;
  }

  async labelValues(entityName: string, entityType: string): Promise<Record<string, string>> {
    return { ...this.content.entities.get(entityType)?.get(entityName)?.labels };
  }

  async allEntities(): Promise<CmdbEntities> {
    const out: CmdbEntities = new Map();
    for (const [type, byName] of this.content.entities) {
      out.set(type, new Map([...byName].map(([name, entity]) => [name, copyEntity(entity)])));
    }
    return out;
  }

  async entity(entityName: string, entityType: string): Promise<CmdbEntity | undefined> {
    const entity = this.content.entities.get(entityType)?.get(entityName);
    return entity === undefined ? undefined : copyEntity(entity);
  }

  async events(sinceMs: number): Promise<CmdbEvent[]> {
    return this.history.filter((h) => h.at >= sinceMs).map((h) => ({ ...h.event }));
  }

  /** One load attempt; returns the error if the file could not be used. */
  private async load(): Promise<CmdbFileError | undefined> {
    let text: string;
    try {
      const st = await stat(this.path);
      this.signature = `${st.mtimeMs}:${st.size}:${st.ino}`;
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') this.signature = 'missing';
      return this.failed(new CmdbFileError(this.path, '', code === 'ENOENT' ? 'file not found' : `cannot read: ${(error as Error).message}`));
    }
    let next: CmdbFileContent;
    try {
      next = parseCmdbFile(text, this.path, this.opts.format);
    } catch (error) {
      return this.failed(error instanceof CmdbFileError ? error : new CmdbFileError(this.path, '', String(error)));
    }
    const first = this.state === 'new';
    const events = first ? [] : diffEntities(this.content.entities, next.entities);
    this.content = next;
    if (this.problem !== undefined) this.logger.info('CMDB file usable again');
    this.problem = undefined;
    const at = Date.now();
    const keepFrom = at - (this.opts.eventRetentionMs ?? 3_600_000);
    this.history = this.history.filter((h) => h.at >= keepFrom);
    for (const event of events) this.history.push({ at, event });
    if (!first) this.logger.info({ events: events.length }, 'CMDB file reloaded');
    return undefined;
  }

  private failed(error: CmdbFileError): CmdbFileError {
    this.problem = { message: error.message, at: Date.now() };
    if (this.state !== 'new') this.logger.warn({ err: error }, 'CMDB file reload failed; keeping the last good content');
    return error;
  }

  private watchDirectory(): void {
    const name = basename(this.path);
    try {
      this.watcher = watch(dirname(this.path), { persistent: false }, (_event, filename) => {
        if (filename === null || filename.toString() === name) this.scheduleReload();
      });
      this.watcher.on('error', (error) => {
        this.logger.warn({ err: error }, 'watching the CMDB file directory failed; relying on polling');
        this.watcher?.close();
        this.watcher = undefined;
      });
    } catch (error) {
      this.logger.warn({ err: error }, 'cannot watch the CMDB file directory; relying on polling');
    }
  }

  private async checkStat(): Promise<void> {
    let signature: string;
    try {
      const st = await stat(this.path);
      signature = `${st.mtimeMs}:${st.size}:${st.ino}`;
    } catch {
      signature = 'missing';
    }
    if (signature !== this.signature) this.scheduleReload();
  }

  private scheduleReload(): void {
    if (this.state !== 'started') return;
    clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(() => void this.reload(), this.opts.debounceMs ?? 100);
    this.debounceTimer.unref();
  }
}
