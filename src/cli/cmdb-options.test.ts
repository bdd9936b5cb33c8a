import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Command, CommanderError } from 'commander';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CmdbConfigError } from '../cmdb/index.js';
import { addCmdbOptions, cmdbConfigFromCli, type CmdbCliOptions } from './cmdb-options.js';

let dir: string;

beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), 'regsync-cmdb-cli-'));
});

afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** Parses `args` with a command carrying the CMDB options; throws commander's error instead of exiting. */
function parse(args: string[]): CmdbCliOptions {
  const errors: string[] = [];
  const cmd = addCmdbOptions(new Command('sync'))
    .exitOverride()
    .configureOutput({ writeErr: (text) => errors.push(text), writeOut: () => undefined });
  try {
    cmd.parse(args, { from: 'user' });
  } catch (error) {
    if (error instanceof CommanderError) throw new Error(errors.join('') || error.message, { cause: error });
    throw error;
  }
  return cmd.opts<CmdbCliOptions>();
}

function configError(run: () => unknown): CmdbConfigError {
  let error: unknown;
  try {
    run();
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(CmdbConfigError);
  return error as CmdbConfigError;
}

describe('addCmdbOptions', () => {
  it('parses the options and their durations', () => {
    expect(parse(['--cmdb', 'cmdb.yaml', '--cmdb-refresh', '30s', '--cmdb-event-poll', '1500ms'])).toEqual({
      cmdb: 'cmdb.yaml',
      cmdbRefresh: 30_000,
      cmdbEventPoll: 1500,
    });
    expect(parse([])).toEqual({});
  });

  it('rejects a bad duration', () => {
    expect(() => parse(['--cmdb', 'a.yaml', '--cmdb-refresh', 'soon'])).toThrow(/--cmdb-refresh <duration>.*expected a duration such as 1500ms, 15s/);
  });

  it.each([
    [['--cmdb', 'a.yaml', '--cmdb-url', 'http://127.0.0.1:9000/cmdb']],
    [['--cmdb-url', 'http://127.0.0.1:9000/cmdb', '--cmdb-config', 'c.yaml']],
    [['--cmdb-config', 'c.yaml', '--cmdb', 'a.yaml']],
  ])('refuses two CMDB sources at once: %j', (args) => {
    expect(() => parse(args)).toThrow(/option '--cmdb[a-z-]* <[a-z]+>' cannot be used with option '--cmdb[a-z-]* <[a-z]+>'/);
  });
});

describe('cmdbConfigFromCli', () => {
  it('is undefined without a CMDB', () => {
    expect(cmdbConfigFromCli({}, dir)).toBeUndefined();
  });

  it('builds a file provider config from --cmdb, resolved against the working directory', () => {
    expect(cmdbConfigFromCli(parse(['--cmdb', 'data/cmdb.yaml', '--cmdb-refresh', '120s']), dir)).toEqual({
      provider: 'file',
      file: join(dir, 'data/cmdb.yaml'),
      refreshMs: 120_000,
    });
    expect(cmdbConfigFromCli({ cmdb: '/srv/cmdb.json' }, dir)).toEqual({ provider: 'file', file: '/srv/cmdb.json' });
  });

  it('builds an http provider config from --cmdb-url, refusing a bad URL without repeating it', () => {
    expect(cmdbConfigFromCli(parse(['--cmdb-url', 'https://cmdb.example/labels', '--cmdb-event-poll', '2s']), dir)).toEqual({
      provider: 'http',
      url: 'https://cmdb.example/labels',
      eventPollMs: 2000,
    });
    const error = configError(() => cmdbConfigFromCli({ cmdbUrl: 'cmdb.example/labels?token=s3cr3t' }, dir));
    expect(error.message).toBe('command line: --cmdb-url: not a valid absolute URL (expected http://host[:port]/path or https://...)');
    expect(configError(() => cmdbConfigFromCli({ cmdbUrl: 'file:///etc/cmdb.yaml' }, dir)).message).toBe(
      'command line: --cmdb-url: unsupported protocol "file:" (expected http: or https:)',
    );
  });

  it('reads --cmdb-config, with the period options overriding the file', async () => {
    await writeFile(join(dir, 'cmdb-config.yaml'), 'provider: plugin\nmodule: ./plugins/my-cmdb.mjs\noptions: {a: b}\nrefreshMs: 1000\neventPollMs: 2000\n');
    expect(cmdbConfigFromCli(parse(['--cmdb-config', 'cmdb-config.yaml', '--cmdb-event-poll', '500ms']), dir)).toEqual({
      provider: 'plugin',
      module: join(dir, 'plugins/my-cmdb.mjs'),
      options: { a: 'b' },
      baseDir: dir,
      refreshMs: 1000,
      eventPollMs: 500,
    });
  });

  it('reports a missing or invalid config file', async () => {
    expect(configError(() => cmdbConfigFromCli({ cmdbConfig: 'absent.yaml' }, dir)).message).toBe(`${join(dir, 'absent.yaml')}: file not found`);
    await writeFile(join(dir, 'bad.yaml'), 'provider: file\n');
    expect(configError(() => cmdbConfigFromCli({ cmdbConfig: 'bad.yaml' }, dir)).message).toBe(
      `${join(dir, 'bad.yaml')}: file: missing: provider "file" needs the path of the CMDB data file`,
    );
  });

  it('refuses several sources, periods without a source, and blank values', () => {
    expect(configError(() => cmdbConfigFromCli({ cmdb: 'a.yaml', cmdbConfig: 'c.yaml' }, dir)).message).toBe(
      'command line: use at most one of --cmdb, --cmdb-url and --cmdb-config (given: --cmdb, --cmdb-config)',
    );
    expect(configError(() => cmdbConfigFromCli({ cmdbEventPoll: 1000 }, dir)).message).toBe(
      'command line: --cmdb-event-poll: needs a CMDB: add --cmdb, --cmdb-url or --cmdb-config',
    );
    expect(configError(() => cmdbConfigFromCli({ cmdb: ' ' }, dir)).message).toBe('command line: --cmdb: must not be blank');
  });
});
