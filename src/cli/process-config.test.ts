import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { buildProgram } from './main.js';
import { ProcessConfigError } from './process-config-error.js';
import { expandConfigFile } from './process-config.js';

const dir = mkdtempSync(join(tmpdir(), 'regsync-config-'));
function file(text: string): string {
  const path = join(dir, `c${Math.random().toString(36).slice(2)}.yaml`);
  writeFileSync(path, text);
  return path;
}
const argv = (...args: string[]) => ['node', 'regsync', ...args];

describe('--config', () => {
  it('puts the file before the command line, so that flags win, every value as its flag', () => {
    const config = file('redis: redis://10.0.0.5:6379\nshards: 16\nmetricsListen: 0.0.0.0:9464\nlog-level: debug\nprefix: prod\n');
    const out = expandConfigFile(buildProgram(), argv('worker', '--config', config, '--shards', '4'));
    expect(out.argv).toEqual(
      argv('worker', '--redis', 'redis://10.0.0.5:6379', '--shards', '16', '--metrics-listen', '0.0.0.0:9464', '--log-level', 'debug', '--prefix', 'prod', '--config', config, '--shards', '4'),
    );
    expect(out.dns).toBeUndefined();
  });

  it('takes switches, lists for comma-separated options, and the dns: section of up and dns', () => {
    const config = file('dns-listen: 127.0.0.1:5300\ndns-clusters: [sh, bj]\ndns:\n  zone: corp.internal\n  site: {trustedResolvers: [10.0.0.53]}\n');
    const out = expandConfigFile(buildProgram(), argv('up', `--config=${config}`));
    expect(out.argv).toEqual(argv('up', '--dns-listen', '127.0.0.1:5300', '--dns-clusters', 'sh,bj', `--config=${config}`));
    expect(out.dns).toMatchObject({ zone: 'corp.internal', site: { trustedResolvers: ['10.0.0.53'] } });
  });

  it('leaves out options of the other commands (one file for api and worker processes), and names any other key', () => {
    const shared = file('redis: redis://10.0.0.5:6379\nlisten: 0.0.0.0:8080\nmetrics-listen: 0.0.0.0:9464\n');
    expect(expandConfigFile(buildProgram(), argv('api', '--config', shared)).argv).toEqual(argv('api', '--redis', 'redis://10.0.0.5:6379', '--listen', '0.0.0.0:8080', '--config', shared));
    const typo = file('redsi: redis://10.0.0.5:6379\n');
    expect(() => expandConfigFile(buildProgram(), argv('worker', '--config', typo))).toThrow(ProcessConfigError);
    expect(() => expandConfigFile(buildProgram(), argv('worker', '--config', typo))).toThrow(`${typo}: redsi: not an option of regsync worker (known: `);
    expect(() => expandConfigFile(buildProgram(), argv('worker', '--config', file('shards: {a: 1}\n')))).toThrow(/shards: expected a string or a number, got a mapping/);
    expect(() => expandConfigFile(buildProgram(), argv('up', '--config', file('dns: {zone: x.local}\n')))).toThrow(/: dns: dns zone: /);
    expect(() => expandConfigFile(buildProgram(), argv('up', '--config', join(dir, 'missing.yaml')))).toThrow(/missing\.yaml: file not found/);
  });

  it('gives regsync dns its address from the dns: section, never the API\'s listen', () => {
    const shared = file('redis: redis://10.0.0.5:6379\nlisten: 0.0.0.0:8080\ndns:\n  listen: 0.0.0.0:5353\n');
    const out = expandConfigFile(buildProgram(), argv('dns', '--config', shared));
    expect(out.argv).toEqual(argv('dns', '--redis', 'redis://10.0.0.5:6379', '--config', shared));
    expect(out.dns).toMatchObject({ listen: { host: '0.0.0.0', port: 5353 } });
  });

  it('leaves other commands and command lines without --config alone', () => {
    expect(expandConfigFile(buildProgram(), argv('apply', '-f', 'tasks/'))).toEqual({ argv: argv('apply', '-f', 'tasks/'), dns: undefined });
    expect(expandConfigFile(buildProgram(), argv('worker', '--redis', 'redis://x'))).toEqual({ argv: argv('worker', '--redis', 'redis://x'), dns: undefined });
  });
});
