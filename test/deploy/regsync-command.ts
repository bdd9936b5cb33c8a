import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { buildProgram as BuildProgram } from '../../src/cli/main.js';
import type { Container } from './kube-manifests.js';

/** The command tree of the build (what `bin/regsync.js` runs), which reads its version from the package. */
const MAIN = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
if (!existsSync(MAIN)) throw new Error('dist/ is missing: run `npm run build` first (npm test does)');
const { buildProgram } = (await import(MAIN)) as { buildProgram: typeof BuildProgram };

/** A command line as regsync's own parser reads it: which command, and its options. */
export interface ParsedCommand {
  command: string;
  opts: Record<string, unknown>;
}

/**
 * Parses `args` (what follows `regsync`) with regsync's command tree (`buildProgram()` of the build), running
 * no command: an unknown command or flag, a bad value or a missing required option throws the
 * parser's error. `env` is the environment the defaults are read from (REGSYNC_REDIS_URL, ...),
 * set for the parse only.
 */
export function parseRegsyncCommand(args: readonly string[], env: Readonly<Record<string, string>> = {}): ParsedCommand {
  const saved = new Map(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  try {
    const program = buildProgram();
    let parsed: ParsedCommand | undefined;
    for (const cmd of [program, ...program.commands]) {
      cmd.exitOverride();
      cmd.configureOutput({ writeOut: () => undefined, writeErr: () => undefined });
    }
    for (const cmd of program.commands) {
      cmd.action((opts: Record<string, unknown>) => {
        parsed = { command: cmd.name(), opts };
      });
    }
    program.parse(['node', 'regsync', ...args]);
    if (parsed === undefined) throw new Error(`regsync ${args.join(' ')}: no command ran`);
    return parsed;
  } finally {
    for (const [k, v] of saved) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/**
 * The environment a container's process sees, as far as a parse needs it: literal values as they
 * are, values from Secrets and ConfigMaps (unknown here) as `placeholder(name)`.
 */
export function containerEnv(container: Container, placeholder: (name: string) => string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const e of container.env ?? []) env[e.name] = e.value ?? placeholder(e.name);
  return env;
}
