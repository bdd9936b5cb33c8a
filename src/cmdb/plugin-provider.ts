import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { CmdbPluginError } from './plugin-error.js';
import type { CmdbEntities, CmdbEntity, CmdbEvent, CmdbLabel, CmdbProblem, CmdbProvider } from './provider.js';

/** What a plug-in's factory gets besides its options. */
export interface CmdbPluginContext {
  /** A child logger (`component: 'cmdb-plugin'`, `module`) for the plug-in's own logs. */
  logger: Logger;
}

/**
 * The function a CMDB plug-in module exports, as `createCmdbProvider` or as its default export.
 *
 * The plug-in contract, the TypeScript counterpart of dropping a jar into Nacos' plugins directory:
 *
 * - The module is plain ESM (or CommonJS) JavaScript that Node can `import()`; regsync does not
 *   compile it. It is named in the CMDB config (`provider: plugin`, `module: ./my-cmdb.mjs`) by a path
 *   (absolute, or relative to the config file; `./` or `../` first) or a package name.
 * - It exports `createCmdbProvider(options, context)`. `options` is the config's `options` mapping as
 *   given (`{}` when absent); the plug-in validates it and throws a clear error when it is wrong.
 *   `context.logger` is a pino logger.
 * - The factory returns (or resolves to) a ready {@link CmdbProvider}: an object with the eight SPI
 *   methods `labelNames`, `entityTypes`, `label`, `labelValue`, `labelValues`, `allEntities`,
 *   `entity` and `events`, each returning a Promise (a plain value is accepted too), and optionally
 *   `lastError()` (synchronous) and `close()`. Connecting or a first load belong in the factory:
 *   regsync calls nothing else before it reads. `allEntities()` resolves to a `Map` of entity type to
 *   a `Map` of entity name to `{type, name, labels}`.
 * - A method may throw or reject when its backend fails: regsync keeps the labels it has and retries
 *   later; it never reads a failure as "no labels". Report a degraded-but-answering state through
 *   `lastError()` instead.
 *
 * See `examples/cmdb-plugin/static-cmdb.mjs` for a complete plug-in.
 */
export type CreateCmdbProvider = (
  options: Record<string, unknown>,
  context: CmdbPluginContext,
) => CmdbProvider | Promise<CmdbProvider>;

/** Options of {@link loadCmdbPlugin}. */
export interface LoadCmdbPluginOptions {
  /**
   * The module: an absolute path, a `file:` URL, a path relative to `baseDir` starting with `./` or
   * `../`, or a package name (resolved like `require` would from `baseDir`, else from regsync's own
   * installation).
   */
  module: string;
  /** Passed to the factory; default `{}`. */
  options?: Record<string, unknown>;
  /** Where relative paths and package names are resolved from; default the working directory. */
  baseDir?: string;
  logger?: Logger;
}

/** The SPI methods every provider must have. */
export const CMDB_PROVIDER_METHODS = [
  'labelNames',
  'entityTypes',
  'label',
  'labelValue',
  'labelValues',
  'allEntities',
  'entity',
  'events',
] as const;

const OPTIONAL_METHODS = ['lastError', 'close'] as const;

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function isRelativePath(spec: string): boolean {
  return /^\.\.?(?:[/\\]|$)/.test(spec);
}

/**
 * The specifier to `import()` for `module`: a `file:` URL for paths (relative ones resolved against
 * `baseDir`) and for packages found from `baseDir`; the bare name for other packages.
 */
export function resolvePluginModule(module: string, baseDir: string = process.cwd()): string {
  if (module.startsWith('file:')) return module;
  if (isAbsolute(module)) return pathToFileURL(module).href;
  if (isRelativePath(module)) return pathToFileURL(resolve(baseDir, module)).href;
  try {
    return pathToFileURL(createRequire(join(resolve(baseDir), 'noop.js')).resolve(module)).href;
  } catch {
    // Not resolvable the CommonJS way from baseDir (absent there, or an ESM-only package): let
    // import() try from regsync's own location and report its error.
    return module;
  }
}

/** `problem` if `value` has the wrong shape for `method`'s answer, else undefined. */
function shapeProblem(method: string, value: unknown): string | undefined {
  const isObject = typeof value === 'object' && value !== null;
  const got = value === null ? 'null' : Array.isArray(value) ? 'an array' : value instanceof Map ? 'a Map' : typeof value;
  switch (method) {
    case 'labelNames':
    case 'entityTypes':
      return Array.isArray(value) && value.every((v) => typeof v === 'string') ? undefined : `must resolve to an array of strings, got ${got}`;
    case 'events':
      return Array.isArray(value) ? undefined : `must resolve to an array of events, got ${got}`;
    case 'allEntities':
      return value instanceof Map ? undefined : `must resolve to a Map of entity type to a Map of entity name to entity, got ${got}`;
    case 'labelValue':
      return value === undefined || typeof value === 'string' ? undefined : `must resolve to a string or undefined, got ${got}`;
    case 'labelValues':
      return isObject && !Array.isArray(value) && !(value instanceof Map) ? undefined : `must resolve to an object of label values, got ${got}`;
    case 'label':
      return value === undefined || isObject ? undefined : `must resolve to a label or undefined, got ${got}`;
    case 'entity':
      return value === undefined || (isObject && typeof (value as { labels?: unknown }).labels === 'object' && (value as { labels?: unknown }).labels !== null)
        ? undefined
        : `must resolve to an entity {type, name, labels} or undefined, got ${got}`;
    default:
      return undefined;
  }
}

/**
 * A plug-in's provider as regsync uses it: every SPI call made safe for the {@link CmdbCache} in
 * front. A method that throws synchronously becomes a rejection, every failure becomes a
 * {@link CmdbPluginError} naming the module and the method (the plug-in's error is the `cause`), and
 * answers of the wrong shape (say a plain object where a `Map` is due) are rejected instead of
 * breaking the reader. `lastError()` never throws.
 */
export class PluginCmdbProvider implements CmdbProvider {
  constructor(
    /** The module as configured. */
    readonly module: string,
    private readonly inner: CmdbProvider,
  ) {}

  labelNames(): Promise<string[]> {
    return this.call('labelNames', []);
  }

  entityTypes(): Promise<string[]> {
    return this.call('entityTypes', []);
  }

  label(name: string): Promise<CmdbLabel | undefined> {
    return this.call('label', [name]);
  }

  labelValue(entityName: string, entityType: string, label: string): Promise<string | undefined> {
    return this.call('labelValue', [entityName, entityType, label]);
  }

  labelValues(entityName: string, entityType: string): Promise<Record<string, string>> {
    return this.call('labelValues', [entityName, entityType]);
  }

  allEntities(): Promise<CmdbEntities> {
    return this.call('allEntities', []);
  }

  entity(entityName: string, entityType: string): Promise<CmdbEntity | undefined> {
    return this.call('entity', [entityName, entityType]);
  }

  events(sinceMs: number): Promise<CmdbEvent[]> {
    return this.call('events', [sinceMs]);
  }

  /** The plug-in's own problem report, if it makes one; a throwing `lastError` is itself reported. */
  lastError(): CmdbProblem | undefined {
    if (typeof this.inner.lastError !== 'function') return undefined;
    let problem: unknown;
    try {
      problem = this.inner.lastError();
    } catch (error) {
      return { message: `CMDB plug-in ${this.module}: lastError() failed: ${messageOf(error)}`, at: Date.now() };
    }
    if (problem === undefined || problem === null) return undefined;
    const { message, at } = problem as Partial<CmdbProblem>;
    return {
      message: `CMDB plug-in ${this.module}: ${typeof message === 'string' ? message : String(message ?? problem)}`,
      at: typeof at === 'number' ? at : Date.now(),
    };
  }

  async close(): Promise<void> {
    if (typeof this.inner.close !== 'function') return;
    await this.call('close', []);
  }

  private async call<T>(method: (typeof CMDB_PROVIDER_METHODS)[number] | 'close', args: unknown[]): Promise<T> {
    let value: unknown;
    try {
      // Inside the try of an async function, a synchronous throw becomes this rejection too.
      value = await (this.inner[method] as (...a: unknown[]) => unknown).apply(this.inner, args);
    } catch (error) {
      throw new CmdbPluginError(this.module, 'call_failed', `${method}() failed: ${messageOf(error)}`, { cause: error });
    }
    const problem = shapeProblem(method, value);
    if (problem !== undefined) throw new CmdbPluginError(this.module, 'call_failed', `${method}() ${problem}`);
    return value as T;
  }
}

function factoryOf(exports: Record<string, unknown>): CreateCmdbProvider | undefined {
  if (typeof exports.createCmdbProvider === 'function') return exports.createCmdbProvider as CreateCmdbProvider;
  const fallback = exports.default;
  if (typeof fallback === 'function') return fallback as CreateCmdbProvider;
  // A CommonJS module's `module.exports = {createCmdbProvider}` arrives as the default export.
  if (typeof fallback === 'object' && fallback !== null) {
    const nested = (fallback as Record<string, unknown>).createCmdbProvider;
    if (typeof nested === 'function') return nested as CreateCmdbProvider;
  }
  return undefined;
}

/**
 * Loads a CMDB plug-in (contract: {@link CreateCmdbProvider}): imports the module, calls its factory
 * and checks that the result has every SPI method. Throws {@link CmdbPluginError} naming the module:
 * `load_failed`, `no_factory`, `factory_failed` or `invalid_provider` (naming the missing methods).
 *
 * A plug-in runs inside regsync with regsync's rights; only configure modules you trust.
 */
export async function loadCmdbPlugin(opts: LoadCmdbPluginOptions): Promise<PluginCmdbProvider> {
  const { module } = opts;
  const baseDir = opts.baseDir ?? process.cwd();
  const specifier = resolvePluginModule(module, baseDir);
  let exports: Record<string, unknown>;
  try {
    exports = (await import(/* @vite-ignore */ specifier)) as Record<string, unknown>;
  } catch (error) {
    let hint = '';
    if (!isAbsolute(module) && !isRelativePath(module) && !module.startsWith('file:') && existsSync(resolve(baseDir, module))) {
      hint = ` (a file of that name exists in ${resolve(baseDir)}: write "./${module}" to load it as a path)`;
    }
    throw new CmdbPluginError(module, 'load_failed', `cannot import ${specifier}: ${messageOf(error)}${hint}`, { cause: error });
  }
  const factory = factoryOf(exports);
  if (factory === undefined) {
    throw new CmdbPluginError(
      module,
      'no_factory',
      `the module exports no createCmdbProvider function (nor a default export of one); exports: ${Object.keys(exports).join(', ') || 'none'}`,
    );
  }
  const logger = (opts.logger ?? silentLogger()).child({ component: 'cmdb-plugin', module });
  let provider: unknown;
  try {
    provider = await factory(opts.options ?? {}, { logger });
  } catch (error) {
    throw new CmdbPluginError(module, 'factory_failed', `createCmdbProvider failed: ${messageOf(error)}`, { cause: error });
  }
  if (typeof provider !== 'object' || provider === null) {
    throw new CmdbPluginError(module, 'invalid_provider', `createCmdbProvider returned ${provider === null ? 'null' : typeof provider}, not a CMDB provider object`);
  }
  const candidate = provider as Record<string, unknown>;
  const missing = CMDB_PROVIDER_METHODS.filter((m) => typeof candidate[m] !== 'function');
  const badOptional = OPTIONAL_METHODS.filter((m) => candidate[m] !== undefined && typeof candidate[m] !== 'function');
  if (missing.length > 0 || badOptional.length > 0) {
    const parts: string[] = [];
    if (missing.length > 0) parts.push(`lacks the method${missing.length > 1 ? 's' : ''} ${missing.map((m) => `"${m}"`).join(', ')}`);
    if (badOptional.length > 0) parts.push(`has ${badOptional.map((m) => `"${m}"`).join(', ')} that ${badOptional.length > 1 ? 'are' : 'is'} not a function`);
    // Release what the half-made provider may hold; its own failure is secondary.
    if (typeof candidate.close === 'function') await Promise.resolve().then(() => (candidate.close as () => unknown)()).catch(() => undefined);
    throw new CmdbPluginError(
      module,
      'invalid_provider',
      `the provider returned by createCmdbProvider ${parts.join(' and ')} (required: ${CMDB_PROVIDER_METHODS.join(', ')})`,
    );
  }
  return new PluginCmdbProvider(module, provider as CmdbProvider);
}
