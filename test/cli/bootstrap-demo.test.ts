import { chmodSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { NEEDS } from '../../scripts/system-packages.mjs';
import { findExecutable, makeTempDir, ManagedProcess, removeTempDir } from '../support/server-process.js';
import { waitUntil } from '../support/wait-until.js';

const BOOTSTRAP = fileURLToPath(new URL('../../scripts/bootstrap.mjs', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;

/**
 * A PATH that holds node and nothing else of this machine, so that redis-server is missing as on a
 * fresh one, with an apt-get (and apt-cache) that record what they are asked and "install"
 * redis-server by linking the machine's own into that PATH: a test cannot uninstall the real one.
 */
function bareMachine(dir: string): { bin: string; aptLog: string } {
  const bin = join(dir, 'bin');
  const aptLog = join(dir, 'apt.log');
  const redisServer = findExecutable('redis-server');
  if (!redisServer) throw new Error('redis-server is needed to stand for the one apt-get installs');
  mkdirSync(bin);
  symlinkSync(process.execPath, join(bin, 'node'));
  const script = (name: string, body: string): void => {
    writeFileSync(join(bin, name), `#!/bin/sh\necho "${name} $*" >> '${aptLog}'\n${body}\n`);
    chmodSync(join(bin, name), 0o755);
  };
  script('apt-get', `case "$1" in install) /bin/ln -sf '${redisServer}' '${join(bin, 'redis-server')}';; esac\nexit 0`);
  script('apt-cache', 'echo "  Candidate: 5:7.0.15-1"\nexit 0');
  return { bin, aptLog };
}

describe('npm run demo on a machine with nothing but Node.js', () => {
  let dir: string | undefined;
  let demo: ManagedProcess | undefined;
  afterEach(async () => {
    await demo?.stop();
    demo = undefined;
    if (dir) removeTempDir(dir);
    dir = undefined;
  });

  it('needs nothing of the system that npm test does not install too', () => {
    expect(NEEDS.demo).toEqual(['redis-server']);
    for (const need of NEEDS.demo) expect(NEEDS.test).toContain(need);
  });

  it('brings redis-server through the system-package step of npm test, then runs', async () => {
    dir = makeTempDir('regsync-bare-');
    const { bin, aptLog } = bareMachine(dir);
    const logFile = join(dir, 'out.log');
    const args = ['demo', '--shanghai-port', '0', '--beijing-port', '0', '--listen', '127.0.0.1:0', '--dns-listen', 'off', '--data-dir', join(dir, 'data')];
    demo = new ManagedProcess(process.execPath, [BOOTSTRAP, ...args], {
      logFile,
      cwd: ROOT,
      env: { ...process.env, PATH: bin, REGSYNC_LOG_LEVEL: 'warn' },
    });
    const output = (): string => readFileSync(logFile, 'utf8');
    if (!isRoot) {
      // Not root: the exact command, as npm test says it.
      expect((await demo.exited).code).toBe(1);
      expect(output()).toContain('regsync demo needs: apt-get install -y redis-server');
      return;
    }
    await waitUntil(() => /Ctrl-C stops everything/.test(output()) || !demo?.running, { timeoutMs: 120_000, message: 'the demo to start' });
    expect(output()).toMatch(/Ctrl-C stops everything/);
    // Only what the demo needs was installed: no browser, no ZooKeeper.
    const installs = readFileSync(aptLog, 'utf8').split('\n').filter((line) => line.startsWith('apt-get install'));
    expect(installs).toEqual(['apt-get install -y --no-install-recommends redis-server']);
    expect(output()).toMatch(/beijing\s+orders\s+10\.0\.1\.11:8080\s+copy from shanghai/);
    expect((await demo.stop()).code).toBe(0);
  });
});
