import { Command } from 'commander';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import { addRegistryOptions, registryOptionsFrom, type RegistryCliOptions } from './registry-command.js';

const parsed = (args: string[]) => {
  const cmd = addRegistryOptions(new Command(), 8848).exitOverride();
  cmd.parse(args, { from: 'user' });
  return registryOptionsFrom(cmd.opts<RegistryCliOptions>(), silentLogger());
};

describe('regsync registry options', () => {
  it('serves fuzzy watch with Nacos’ limits unless told otherwise', () => {
    expect(parsed([]).grpc).toEqual({});
    expect(parsed(['--fuzzy-watch-max-patterns', '50', '--fuzzy-watch-max-services', '200000']).grpc).toEqual({ fuzzyWatchMaxPatterns: 50, fuzzyWatchMaxServices: 200_000 });
    expect(parsed(['--no-fuzzy-watch']).grpc).toEqual({ fuzzyWatch: false });
    expect(() => parsed(['--fuzzy-watch-max-services', '0'])).toThrow();
  });
});
