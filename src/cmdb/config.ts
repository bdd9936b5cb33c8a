import { readFileSync } from 'node:fs';
import { dirname, extname, resolve } from 'node:path';
import type { Logger } from 'pino';
import { parseDocument } from 'yaml';
import { CmdbCache } from './cache.js';
import { CmdbConfigError } from './config-error.js';
import { FileCmdbProvider } from './file-provider.js';
import { checkCmdbHeaders, HttpCmdbProvider, parseCmdbUrl, redactUrl } from './http-provider.js';
import { loadCmdbPlugin } from './plugin-provider.js';
import type { CmdbProvider } from './provider.js';

/** Settings of the {@link CmdbCache} in front of any provider. */
export interface CmdbCacheSettings {
  /** Full refresh period of the cache, in ms (default: the cache's, 60 000). */
  refreshMs?: number;
  /** Event poll period of the cache, in ms (default: the cache's, 5000). */
  eventPollMs?: number;
}

/** A CMDB data file ({@link FileCmdbProvider}). */
export interface CmdbFileConfig extends CmdbCacheSettings {
  provider: 'file';
  /** Absolute path of the YAML or JSON CMDB document. */
  file: string;
  /** Stat fallback period of the file provider, in ms (default 2000). */
  pollMs?: number;
}

/** A URL serving the CMDB document ({@link HttpCmdbProvider}). */
export interface CmdbHttpConfig extends CmdbCacheSettings {
  provider: 'http';
  url: string;
  /** Request headers; values are secrets (never logged). */
  headers?: Record<string, string>;
  /** Poll period, in ms (default 10 000). */
  pollMs?: number;
  /** Request timeout, in ms (default 5000). */
  timeoutMs?: number;
}

/** A plug-in module (contract: {@link CreateCmdbProvider}). */
export interface CmdbPluginConfig extends CmdbCacheSettings {
  provider: 'plugin';
  /** An absolute path, a `file:` URL or a package name. */
  module: string;
  /** Passed to the plug-in's factory as given. */
  options?: Record<string, unknown>;
  /** Where a package name is resolved from: the config file's directory (or the working directory). */
  baseDir: string;
}

/**
 * Where regsync gets CMDB labels from: one provider and the settings of the cache in front of it.
 * Built by {@link parseCmdbConfig} from a config file or by the CLI from `--cmdb`/`--cmdb-url`; paths
 * in it are absolute.
 */
export type CmdbConfig = CmdbFileConfig | CmdbHttpConfig | CmdbPluginConfig;

const PROVIDERS = ['file', 'http', 'plugin'] as const;
const COMMON_KEYS = ['provider', 'refreshMs', 'eventPollMs'];
const KEYS: Record<CmdbConfig['provider'], string[]> = {
  file: [...COMMON_KEYS, 'file', 'pollMs'],
  http: [...COMMON_KEYS, 'url', 'headers', 'pollMs', 'timeoutMs'],
  plugin: [...COMMON_KEYS, 'module', 'options'],
};

function isMapping(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'a mapping' : `${typeof value} ${JSON.stringify(value)}`;
}

/**
 * Parses and validates a CMDB config file's text; throws {@link CmdbConfigError} naming `file` and the
 * first bad key. Relative `file` and `module` paths are resolved against `file`'s directory.
 *
 * ```yaml
 * provider: file            # file | http | plugin (required)
 * file: ./cmdb.yaml         # provider: file (required)
 * pollMs: 2000              # provider: file (stat fallback) or http (poll period)
 * url: http://127.0.0.1:9000/cmdb     # provider: http (required)
 * headers: {Authorization: "Bearer ..."}  # provider: http
 * timeoutMs: 5000           # provider: http
 * module: ./my-cmdb.mjs     # provider: plugin (required): path (./, ../ or absolute) or package name
 * options: {}               # provider: plugin: passed to createCmdbProvider
 * refreshMs: 60000          # the cache's full refresh period
 * eventPollMs: 5000         # the cache's event poll period
 * ```
 * Strict on purpose: unknown keys, keys of another provider type, wrong types and missing required
 * keys are rejected. Durations are positive integers of milliseconds. Error messages never repeat a
 * URL or header value (either may hold a token).
 */
export function parseCmdbConfig(text: string, file: string): CmdbConfig {
  const source = file;
  const fail = (key: string, problem: string): never => {
    throw new CmdbConfigError(source, key, problem);
  };
  let raw: unknown;
  if (extname(file).toLowerCase() === '.json') {
    try {
      raw = JSON.parse(text);
    } catch (error) {
      fail('', `invalid JSON: ${(error as Error).message}`);
    }
  } else {
    const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: true });
    const first = doc.errors[0];
    if (first !== undefined) fail('', `invalid YAML: ${first.message}`);
    raw = doc.toJS({ maxAliasCount: 100 });
  }
  return validateCmdbConfig(raw, source, dirname(resolve(file)));
}

/** Reads and parses a CMDB config file ({@link parseCmdbConfig}); a missing file is a {@link CmdbConfigError}. */
export function readCmdbConfig(file: string): CmdbConfig {
  const path = resolve(file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new CmdbConfigError(path, '', code === 'ENOENT' ? 'file not found' : `cannot read: ${(error as Error).message}`, { cause: error });
  }
  return parseCmdbConfig(text, path);
}

/**
 * Validates a parsed configuration tree (see {@link parseCmdbConfig}); `source` names it in errors and
 * `baseDir` resolves its relative paths.
 */
export function validateCmdbConfig(raw: unknown, source: string, baseDir: string): CmdbConfig {
  const fail = (key: string, problem: string): never => {
    throw new CmdbConfigError(source, key, problem);
  };
  if (!isMapping(raw)) return fail('', `the document must be a mapping with a "provider" key, got ${describeValue(raw)}`);
  const provider = raw.provider;
  if (provider === undefined) fail('provider', `missing (one of: ${PROVIDERS.join(', ')})`);
  if (typeof provider !== 'string' || !(PROVIDERS as readonly string[]).includes(provider)) {
    fail('provider', `must be one of ${PROVIDERS.join(', ')}, got ${describeValue(provider)}`);
  }
  const kind = provider as CmdbConfig['provider'];
  const allowed = KEYS[kind];
  for (const key of Object.keys(raw)) {
    if (allowed.includes(key)) continue;
    const owner = PROVIDERS.find((p) => KEYS[p].includes(key));
    fail(key, owner !== undefined ? `not a setting of provider "${kind}" (it belongs to provider "${owner}")` : `unknown key (allowed for provider "${kind}": ${allowed.join(', ')})`);
  }

  const millis = (key: string): number | undefined => {
    const value = raw[key];
    if (value === undefined || value === null) return undefined;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) fail(key, `must be a positive integer number of milliseconds, got ${describeValue(value)}`);
    return value as number;
  };
  const requiredString = (key: string, what: string, secret = false): string => {
    const value = raw[key];
    if (value === undefined || value === null) fail(key, `missing: provider "${kind}" needs ${what}`);
    if (typeof value !== 'string') fail(key, `must be a string, got ${secret ? typeof value : describeValue(value)}`);
    if ((value as string).trim() === '') fail(key, 'must not be blank');
    return value as string;
  };
  const cacheSettings: CmdbCacheSettings = {};
  const refreshMs = millis('refreshMs');
  if (refreshMs !== undefined) cacheSettings.refreshMs = refreshMs;
  const eventPollMs = millis('eventPollMs');
  if (eventPollMs !== undefined) cacheSettings.eventPollMs = eventPollMs;

  switch (kind) {
    case 'file': {
      const config: CmdbFileConfig = { provider: 'file', file: resolve(baseDir, requiredString('file', 'the path of the CMDB data file')), ...cacheSettings };
      const pollMs = millis('pollMs');
      if (pollMs !== undefined) config.pollMs = pollMs;
      return config;
    }
    case 'http': {
      const url = requiredString('url', 'the URL of the CMDB document', true);
      parseCmdbUrl(source, 'url', url);
      const config: CmdbHttpConfig = { provider: 'http', url, ...cacheSettings };
      const headers = raw.headers;
      if (headers !== undefined && headers !== null) {
        if (!isMapping(headers)) fail('headers', `must be a mapping of header name to value, got ${describeValue(headers)}`);
        // Values may be tokens: errors name the header, never its value.
        config.headers = checkCmdbHeaders(source, 'headers', headers as Record<string, unknown>);
      }
      const pollMs = millis('pollMs');
      if (pollMs !== undefined) config.pollMs = pollMs;
      const timeoutMs = millis('timeoutMs');
      if (timeoutMs !== undefined) config.timeoutMs = timeoutMs;
      return config;
    }
    case 'plugin': {
      const module = requiredString('module', 'the plug-in module (a path or a package name)');
      const isPath = /^\.\.?(?:[/\\]|$)/.test(module);
      const config: CmdbPluginConfig = { provider: 'plugin', module: isPath ? resolve(baseDir, module) : module, baseDir, ...cacheSettings };
      const options = raw.options;
      if (options !== undefined && options !== null) {
        if (!isMapping(options)) fail('options', `must be a mapping (passed to the plug-in), got ${describeValue(options)}`);
        config.options = options as Record<string, unknown>;
      }
      return config;
    }
  }
}

/** A one-line description of the configured source, safe to log (URLs redacted). */
export function describeCmdbConfig(config: CmdbConfig): string {
  switch (config.provider) {
    case 'file':
      return `file ${config.file}`;
    case 'http':
      return `http ${redactUrl(new URL(config.url))}`;
    case 'plugin':
      return `plugin ${config.module}`;
  }
}

/** A started CMDB: the provider and the started cache in front of it. */
export interface RunningCmdb {
  /** What the engine reads labels from (synchronously). */
  cache: CmdbCache;
  provider: CmdbProvider;
  /** The source, safe to log and show (see {@link describeCmdbConfig}). */
  describe: string;
  /** Stops the cache, then closes the provider. Idempotent. */
  close(): Promise<void>;
}

/**
 * Starts the configured provider and a {@link CmdbCache} in front of it.
 *
 * Throws when the configuration is unusable: an invalid first CMDB file (nothing to fall back to),
 * a bad URL or provider options ({@link CmdbConfigError}), a plug-in that cannot be loaded or made
 * ({@link CmdbPluginError}). A source that is merely unavailable does not throw: the HTTP provider
 * starts empty and keeps polling, and the cache reports the problem in its status.
 */
export async function startCmdb(config: CmdbConfig, logger: Logger): Promise<RunningCmdb> {
  let provider: CmdbProvider;
  switch (config.provider) {
    case 'file': {
      const file = new FileCmdbProvider({ path: config.file, logger, ...(config.pollMs !== undefined ? { pollMs: config.pollMs } : {}) });
      try {
        await file.start();
      } catch (error) {
        await file.close();
        throw error;
      }
      provider = file;
      break;
    }
    case 'http': {
      const http = new HttpCmdbProvider({
        url: config.url,
        logger,
        ...(config.headers !== undefined ? { headers: config.headers } : {}),
        ...(config.pollMs !== undefined ? { pollMs: config.pollMs } : {}),
        ...(config.timeoutMs !== undefined ? { timeoutMs: config.timeoutMs } : {}),
      });
      await http.start();
      provider = http;
      break;
    }
    case 'plugin':
      provider = await loadCmdbPlugin({
        module: config.module,
        baseDir: config.baseDir,
        logger,
        ...(config.options !== undefined ? { options: config.options } : {}),
      });
      break;
  }
  const describe = describeCmdbConfig(config);
  let cache: CmdbCache;
  try {
    cache = new CmdbCache({
      provider,
      logger,
      ...(config.refreshMs !== undefined ? { refreshMs: config.refreshMs } : {}),
      ...(config.eventPollMs !== undefined ? { eventPollMs: config.eventPollMs } : {}),
    });
    await cache.start();
  } catch (error) {
    await provider.close?.();
    throw error;
  }
  const status = cache.status();
  const log = logger.child({ component: 'cmdb', cmdb: describe });
  if (status.ok) log.info({ entities: status.entities }, 'CMDB ready');
  else log.warn({ problem: status.lastError?.message }, 'CMDB started without usable data; retrying in the background');
  let closing: Promise<void> | undefined;
  return {
    cache,
    provider,
    describe,
    close() {
      closing ??= (async () => {
        await cache.stop();
        await provider.close?.();
      })();
      return closing;
    },
  };
}
