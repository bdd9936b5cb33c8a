import type { Command, Option } from 'commander';
import { describe, expect, it } from 'vitest';
import { buildProgram } from './main.js';

/** Every option of every command, with its command's name. */
function allOptions(program: Command): Array<{ command: string; option: Option }> {
  return program.commands.flatMap((c) => c.options.map((option) => ({ command: c.name(), option })));
}

describe('--help defaults', () => {
  it('show a value the flag itself takes, which parses to the default that runs', () => {
    const problems: string[] = [];
    for (const { command, option } of allOptions(buildProgram())) {
      // Repeatable options collect into a list that starts empty: nothing is shown for them.
      if (option.defaultValue === undefined || option.parseArg === undefined || Array.isArray(option.defaultValue)) continue;
      const shown = option.defaultValueDescription ?? JSON.stringify(option.defaultValue).replace(/^"|"$/g, '');
      let parsed: unknown;
      try {
        parsed = option.parseArg(shown, undefined);
      } catch (err) {
        problems.push(`regsync ${command} ${option.long}: --help shows (default: ${shown}), which the flag refuses: ${(err as Error).message}`);
        continue;
      }
      if (JSON.stringify(parsed) !== JSON.stringify(option.defaultValue)) problems.push(`regsync ${command} ${option.long}: --help shows ${shown}, which parses to ${JSON.stringify(parsed)}, but ${JSON.stringify(option.defaultValue)} runs`);
    }
    expect(problems).toEqual([]);
  });
});
