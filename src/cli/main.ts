import { readFileSync } from 'node:fs';
import { Command, CommanderError } from 'commander';
import { createLogger } from '../log.js';
import { startRegistry } from '../registry/registry-server.js';
import { runDemo } from './demo.js';
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

  addRegistryOptions(
    program.command('demo').description('run an embedded registry with demo services on the default port'),
    8848,
  ).action(async (opts: RegistryCliOptions) => {
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
