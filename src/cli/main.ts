import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { createLogger } from '../log.js';
import { startRegistry } from '../registry/registry-server.js';
import { applyDeclarations, readDeclarations } from './apply-command.js';
import { runDemo, type DemoOptions } from './demo.js';
import { runUp, stopOnSignal, type UpOptions } from './up-command.js';
import { parsePort } from './options.js';
import { addRegistryOptions, closeOnSignal, registryOptionsFrom, type RegistryCliOptions } from './registry-command.js';

function version(): string {
  const pkg = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
  return pkg.version;
}

/** Builds the `regsync` command tree. */
export function buildProgram(): Command {
  const program = new Command('regsync')
    .description('Registry synchronization daemon: register once, read everywhere.')
    .version(version())
    .showHelpAfterError();

  addRegistryOptions(
    program.command('registry').description('run the embedded Nacos-compatible registry (v1 and v3 naming API, UDP push)'),
    8848,
  ).action(async (opts: RegistryCliOptions) => {
    const logger = createLogger();
    const registry = await startRegistry(registryOptionsFrom(opts, logger));
    process.stdout.write(`regsync registry listening on ${registry.url}\n`);
    closeOnSignal(registry, logger);
  });

  program
    .command('up')
    .description('run the REST API and a sync worker in one process')
    .option('--listen <host:port>', 'where the REST API listens', '127.0.0.1:8080')
    .option('--redis <url>', 'Redis holding tasks, status and queues (also REGSYNC_REDIS_URL); without it a local redis-server is started')
    .option('--data-dir <dir>', 'data of the local redis-server', '.regsync')
    .action(async (opts: UpOptions) => {
      const logger = createLogger();
      const handle = await runUp(opts, logger);
      process.stdout.write(`regsync up: REST API listening on ${handle.node.url}\n`);
      stopOnSignal(() => handle.close(), logger);
    });

  program
    .command('apply')
    .description('create or update clusters and tasks from YAML files (idempotent)')
    .requiredOption('-f, --file <path>', 'a YAML file or a directory of them')
    .option('--server <url>', 'the regsync REST API (also REGSYNC_API)', process.env.REGSYNC_API ?? 'http://127.0.0.1:8080')
    .action(async (opts: { file: string; server: string }) => {
      const results = await applyDeclarations(opts.server, readDeclarations(opts.file));
      for (const r of results) process.stdout.write(`${r.kind} ${r.id} ${r.action}\n`);
    });

  program
    .command('demo')
    .description('two embedded registries (shanghai, beijing) synced both ways by a local regsync')
    .option('--shanghai-port <port>', 'HTTP port of the shanghai registry', parsePort, 8848)
    .option('--beijing-port <port>', 'HTTP port of the beijing registry', parsePort, 8849)
    .option('--listen <host:port>', 'where the REST API listens', '127.0.0.1:8080')
    .option('--data-dir <dir>', 'data of the local redis-server', '.regsync')
    .option('--redis <url>', 'use this Redis instead of a local redis-server')
    .action(async (opts: DemoOptions) => {
      await runDemo(opts);
    });

  return program;
}

/** Runs the command line; exits non-zero with a one-line message on bad input or startup failure. */
export async function run(argv: string[]): Promise<void> {
  const program = buildProgram();
  program.exitOverride();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode);
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`regsync: ${message}\n`);
    process.exit(1);
  }
}
