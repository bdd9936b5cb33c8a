import { readFileSync } from 'node:fs';
import { InvalidArgumentError, type Command, type Option } from 'commander';
import type { LevelWithSilent } from 'pino';
import { parse as parseYaml } from 'yaml';
import { parseDnsSection } from '../dns/dns-config.js';
import type { DnsSettings } from '../dns/dns-config.js';
import { ProcessConfigError } from './process-config-error.js';

/** The commands that run a process and take `--config`, `--log-level` and `--prefix`. */
export const DAEMON_COMMANDS = ['up', 'worker', 'api', 'dns'] as const;

const LEVELS: readonly LevelWithSilent[] = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'];

/** A key prefix as Redis keys and BullMQ queue names take it: letters, digits, `-`, `_`, `.`, at most 64. */
const PREFIX = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** The options every long-running command has: `--config`, `--log-level`, `--prefix`. */
export interface ProcessCliOptions {
  config?: string | undefined;
  logLevel?: LevelWithSilent | undefined;
  prefix?: string | undefined;
}

/** Adds {@link ProcessCliOptions} to a command that runs a process. */
export function addProcessOptions(command: Command): Command {
  return command
    .option('--config <file>', 'YAML file with any options of this command (their long names: redis, listen, shards, cmdb, log-level, prefix, ...) and a dns: section; flags win over it')
    .option('--log-level <level>', `log level: ${LEVELS.join(', ')} (default info, or REGSYNC_LOG_LEVEL)`, parseLogLevel)
    .option('--prefix <prefix>', 'prefix of every Redis key of the deployment: several deployments can share one Redis (default regsync)', parsePrefix);
}

/** Parses `--log-level`. */
export function parseLogLevel(value: string): LevelWithSilent {
  const level = value.trim().toLowerCase() as LevelWithSilent;
  if (!LEVELS.includes(level)) throw new InvalidArgumentError(`expected one of ${LEVELS.join(', ')}`);
  return level;
}

/** Parses `--prefix`. */
export function parsePrefix(value: string): string {
  if (!PREFIX.test(value)) throw new InvalidArgumentError('expected letters, digits, "-", "_" or "." (at most 64, starting with a letter or digit)');
  return value;
}

/** What {@link expandConfigFile} did to the command line. */
export interface ExpandedCommandLine {
  argv: string[];
  /** The file's `dns:` section, checked; undefined when it has none. */
  dns: Partial<DnsSettings> | undefined;
}

/**
 * Turns `regsync <command> --config regsync.yaml ...` into the command line the file stands for:
 * every key of the file is an option of the command under its long name (`redis`, `api-tokens-file`
 * or `apiTokensFile`), put before the command line's own arguments, so that a flag given on the
 * command line wins (the last value of an option counts) and every value goes through the same
 * checks as a flag. A key that is an option of another command only (a file shared by `api` and
 * `worker` processes) is left out; any other key is an error naming it. `dns:` is the DNS section
 * (the settings of `--dns-config`) for `up` and `dns`; a top-level `listen` is the REST API's, so `regsync dns`
 * listens where `dns: {listen}` says. Flags win over the file, and the file over
 * environment variables that stand in for flags (`REGSYNC_REDIS_URL`).
 */
export function expandConfigFile(program: Command, argv: readonly string[]): ExpandedCommandLine {
  const name = argv[2];
  const command = program.commands.find((c) => c.name() === name);
  if (command === undefined || !(DAEMON_COMMANDS as readonly string[]).includes(name as string)) return { argv: [...argv], dns: undefined };
  const rest = argv.slice(3);
  const file = configPath(rest);
  if (file === undefined) return { argv: [...argv], dns: undefined };
  const doc = readConfig(file);
  const others = new Set(
    program.commands
      .filter((c) => c !== command && (DAEMON_COMMANDS as readonly string[]).includes(c.name()))
      .flatMap((c) => c.options.map((o) => longName(o)))
      .filter((n): n is string => n !== undefined),
  );
  const injected: string[] = [];
  let dns: Partial<DnsSettings> | undefined;
  for (const [rawKey, value] of Object.entries(doc)) {
    const key = kebab(rawKey);
    if (key === 'config') throw new ProcessConfigError(file, rawKey, 'a config file cannot name another one');
    if (key === 'dns') {
      if (name !== 'up' && name !== 'dns') continue;
      try {
        dns = parseDnsSection(value);
      } catch (err) {
        throw new ProcessConfigError(file, rawKey, (err as Error).message, { cause: err });
      }
      continue;
    }
    // One file serves every process: a top-level `listen` is the REST API's; `regsync dns` takes its address from `dns: {listen}`.
    if (name === 'dns' && key === 'listen') continue;
    const option = command.options.find((o) => longName(o) === key);
    if (option === undefined) {
      if (others.has(key)) continue;
      const known = command.options.map((o) => longName(o)).filter((n) => n !== undefined && n !== 'config' && n !== 'help');
      throw new ProcessConfigError(file, rawKey, `not an option of regsync ${name} (known: ${[...known, ...(name === 'up' || name === 'dns' ? ['dns'] : [])].join(', ')})`);
    }
    injected.push(...asArguments(file, rawKey, option, value));
  }
  return { argv: [...argv.slice(0, 3), ...injected, ...rest], dns };
}

function configPath(args: readonly string[]): string | undefined {
  let found: string | undefined;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    if (arg === '--') break;
    if (arg === '--config') found = args[i + 1];
    else if (arg.startsWith('--config=')) found = arg.slice('--config='.length);
  }
  return found;
}

function readConfig(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ProcessConfigError(file, '', (err as NodeJS.ErrnoException).code === 'ENOENT' ? 'file not found' : `cannot read: ${(err as Error).message}`, { cause: err });
  }
  let doc: unknown;
  try {
    doc = parseYaml(text, { maxAliasCount: 100 });
  } catch (err) {
    throw new ProcessConfigError(file, '', `not valid YAML: ${(err as Error).message}`, { cause: err });
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new ProcessConfigError(file, '', 'must be a mapping of option names to values');
  return doc as Record<string, unknown>;
}

/** The option's arguments for one value of the file. */
function asArguments(file: string, key: string, option: Option, value: unknown): string[] {
  const flag = option.long as string;
  const takesValue = option.required || option.optional;
  if (!takesValue) {
    if (typeof value !== 'boolean') throw new ProcessConfigError(file, key, `a switch: true or false, got ${describe(value)}`);
    return value ? [flag] : [];
  }
  const one = (v: unknown): string => {
    if (typeof v === 'string' || typeof v === 'number') return String(v);
    throw new ProcessConfigError(file, key, `expected a string or a number, got ${describe(v)}`);
  };
  if (Array.isArray(value)) {
    if (option.variadic) return [flag, ...value.map(one)];
    // A list for a comma-separated option (`--clusters a,b`).
    return [flag, value.map(one).join(',')];
  }
  return [flag, one(value)];
}

function longName(option: Option): string | undefined {
  return option.long?.replace(/^--/, '');
}

function kebab(key: string): string {
  return key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return typeof value === 'object' ? 'a mapping' : JSON.stringify(value);
}
