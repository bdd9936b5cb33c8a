import { resolve } from 'node:path';
import { Option, type Command } from 'commander';
import type { Logger } from 'pino';
import { CmdbConfigError, parseCmdbUrl, readCmdbConfig, startCmdb, type CmdbCacheSettings, type CmdbConfig, type RunningCmdb } from '../cmdb/index.js';
import { parseDuration } from './options.js';

/** The CMDB options as commander hands them over (see {@link addCmdbOptions}). */
export interface CmdbCliOptions {
  cmdb?: string | undefined;
  cmdbUrl?: string | undefined;
  cmdbConfig?: string | undefined;
  /** Milliseconds (parsed by `parseDuration`). */
  cmdbRefresh?: number | undefined;
  /** Milliseconds (parsed by `parseDuration`). */
  cmdbEventPoll?: number | undefined;
}

const SOURCES = [
  ['cmdb', '--cmdb'],
  ['cmdbUrl', '--cmdb-url'],
  ['cmdbConfig', '--cmdb-config'],
] as const;

/**
 * Adds the CMDB options to a command that runs the sync engine: where label selectors get the labels
 * of IPs from. At most one source: `--cmdb <file>` (a data file, the common case), `--cmdb-url <url>`
 * (polled over HTTP) or `--cmdb-config <file>` (any provider, including plug-ins, and HTTP headers,
 * which deliberately have no option: secrets do not belong on a command line). Turn the parsed
 * options into a configuration with {@link cmdbConfigFromCli}.
 */
export function addCmdbOptions(cmd: Command): Command {
  const others = (own: string) => SOURCES.map(([key]) => key).filter((key) => key !== own);
  return cmd
    .addOption(
      new Option('--cmdb <file>', 'CMDB data file (YAML or JSON): labels of IPs for label selectors; reloaded when it changes').conflicts(others('cmdb')),
    )
    .addOption(new Option('--cmdb-url <url>', 'URL serving the CMDB data document, polled (ETag aware)').conflicts(others('cmdbUrl')))
    .addOption(
      new Option('--cmdb-config <file>', 'CMDB config file (provider: file, http or plugin; headers; periods)').conflicts(others('cmdbConfig')),
    )
    .addOption(new Option('--cmdb-refresh <duration>', 'full refresh period of the CMDB label cache (default 60s)').argParser(parseDuration))
    .addOption(new Option('--cmdb-event-poll <duration>', 'event poll period of the CMDB label cache (default 5s)').argParser(parseDuration));
}

/**
 * The {@link CmdbConfig} the options ask for, or undefined when no CMDB is configured. Relative paths
 * are resolved against `cwd`; `--cmdb-config` is read (and validated) here, and `--cmdb-refresh` /
 * `--cmdb-event-poll` override its `refreshMs` / `eventPollMs`.
 *
 * Throws {@link CmdbConfigError} for more than one source, for periods without a source, and for an
 * invalid URL or config file. (Commander already rejects two sources while parsing; this check also
 * covers options built by other means.)
 */
export function cmdbConfigFromCli(opts: CmdbCliOptions, cwd: string = process.cwd()): CmdbConfig | undefined {
  const source = 'command line';
  const given = SOURCES.filter(([key]) => opts[key] !== undefined);
  const periods: CmdbCacheSettings = {};
  if (opts.cmdbRefresh !== undefined) periods.refreshMs = opts.cmdbRefresh;
  if (opts.cmdbEventPoll !== undefined) periods.eventPollMs = opts.cmdbEventPoll;
  if (given.length > 1) {
    throw new CmdbConfigError(source, '', `use at most one of --cmdb, --cmdb-url and --cmdb-config (given: ${given.map(([, flag]) => flag).join(', ')})`);
  }
  const [only] = given;
  if (only === undefined) {
    const stray = [opts.cmdbRefresh !== undefined ? '--cmdb-refresh' : '', opts.cmdbEventPoll !== undefined ? '--cmdb-event-poll' : ''].filter((f) => f !== '');
    if (stray.length > 0) throw new CmdbConfigError(source, stray[0]!, 'needs a CMDB: add --cmdb, --cmdb-url or --cmdb-config');
    return undefined;
  }
  const [key, flag] = only;
  const value = opts[key] as string;
  if (value.trim() === '') throw new CmdbConfigError(source, flag, 'must not be blank');
  switch (key) {
    case 'cmdb':
      return { provider: 'file', file: resolve(cwd, value), ...periods };
    case 'cmdbUrl':
      parseCmdbUrl(source, flag, value);
      return { provider: 'http', url: value, ...periods };
    case 'cmdbConfig':
      return { ...readCmdbConfig(resolve(cwd, value)), ...periods };
  }
}

/** Starts the CMDB the options ask for (see {@link cmdbConfigFromCli}), or answers undefined when none is configured. */
export async function startCmdbFromCli(opts: CmdbCliOptions, logger: Logger): Promise<RunningCmdb | undefined> {
  const config = cmdbConfigFromCli(opts);
  if (config === undefined) return undefined;
  const running = await startCmdb(config, logger);
  logger.info({ cmdb: running.describe, ...running.cache.status() }, 'CMDB loaded');
  return running;
}
