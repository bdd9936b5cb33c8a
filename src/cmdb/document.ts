import { extname } from 'node:path';
import { parseDocument } from 'yaml';
import type { CmdbEntities, CmdbEntity, CmdbLabel } from './provider.js';

/**
 * The CMDB document: the YAML or JSON tree of labels and entities that the file provider reads from
 * disk and the HTTP provider fetches. One parser for both, so a document that works in a file works
 * behind a URL, with the same error messages.
 */

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
