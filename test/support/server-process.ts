import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, closeSync, constants, existsSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { waitUntil } from './wait-until.js';

/*
 * Shared plumbing of the real-server test helpers (redis.ts, zookeeper.ts): spawning a server with its
 * output in a log file, stopping it politely or not, and making sure nothing outlives the test process.
 */

/** How a server process ended. */
export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

interface Registry {
  children: Set<ChildProcess>;
  dirs: Set<string>;
}

// Kept on globalThis so that the hooks are installed once per process even when the test runner
// evaluates this module again for every test file.
const REGISTRY = Symbol.for('regsync.test-support.server-registry');

function registry(): Registry {
  const holder = globalThis as typeof globalThis & { [REGISTRY]?: Registry };
  let found = holder[REGISTRY];
  if (!found) {
    found = { children: new Set(), dirs: new Set() };
    holder[REGISTRY] = found;
    installExitHooks(found);
  }
  return found;
}

function isRunning(child: ChildProcess): boolean {
  return child.pid !== undefined && child.exitCode === null && child.signalCode === null;
}

/** Synchronous on purpose: it runs from process 'exit', where nothing asynchronous happens any more. */
function killEverythingSync(reg: Registry): void {
  for (const child of reg.children) {
    if (isRunning(child)) {
      try {
        child.kill('SIGKILL');
      } catch {
        // already gone
      }
    }
  }
  reg.children.clear();
  for (const dir of reg.dirs) {
    try {
      rmSync(dir, { recursive: true, force: true });
    } catch {
      // best effort
    }
  }
  reg.dirs.clear();
}

function installExitHooks(reg: Registry): void {
  process.on('exit', () => killEverythingSync(reg));
  // A test process killed by a signal does not run 'exit' handlers. Kill the servers, then, when nobody
  // else handles the signal, let it take its default course (the process dies by that signal).
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = (): void => {
      killEverythingSync(reg);
      if (process.listenerCount(signal) === 1) {
        process.removeListener(signal, onSignal);
        process.kill(process.pid, signal);
      }
    };
    process.on(signal, onSignal);
  }
}

/** Creates a fresh directory under os.tmpdir() that is removed when the process exits, at the latest. */
export function makeTempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  registry().dirs.add(dir);
  return dir;
}

/** Removes a directory made by {@link makeTempDir}. */
export function removeTempDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
  registry().dirs.delete(dir);
}

/** The absolute path of an executable found on PATH, or undefined. */
export function findExecutable(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/** The last `maxLines` lines of each existing log file, for error messages. */
export function logTail(files: readonly string[], maxLines = 30): string {
  const parts: string[] = [];
  for (const file of files) {
    if (!existsSync(file)) continue;
    const lines = readFileSync(file, 'utf8').trimEnd().split('\n');
    parts.push(`--- last ${Math.min(lines.length, maxLines)} lines of ${file} ---\n${lines.slice(-maxLines).join('\n')}`);
  }
  return parts.join('\n') || '(no log output)';
}

/** Thrown when a server does not become ready; `exited` tells whether the process died on its own. */
export class ServerStartError extends Error {
  override readonly name = 'ServerStartError';
  constructor(
    message: string,
    readonly exited: boolean,
    readonly log: string,
    options?: { cause?: unknown },
  ) {
    super(`${message}\n${log}`, options);
  }
}

export interface SpawnOptions {
  /** stdout and stderr of the server are appended to this file. */
  logFile: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * One spawned server process, tracked so that it is SIGKILLed when the test process exits or is
 * terminated by a signal, whatever the test did. Not detached: a Ctrl-C in the terminal reaches it too.
 */
export class ManagedProcess {
  readonly child: ChildProcess;
  /** Resolves once the process has exited (or failed to spawn). */
  readonly exited: Promise<ExitInfo>;
  private spawnError: Error | undefined;

  constructor(
    readonly command: string,
    readonly args: readonly string[],
    opts: SpawnOptions,
  ) {
    const fd = openSync(opts.logFile, 'a');
    try {
      this.child = spawn(command, args, {
        cwd: opts.cwd,
        env: opts.env ?? process.env,
        stdio: ['ignore', fd, fd],
        detached: false,
      });
    } finally {
      closeSync(fd);
    }
    const reg = registry();
    reg.children.add(this.child);
    this.exited = new Promise<ExitInfo>((resolve) => {
      this.child.once('exit', (code, signal) => {
        reg.children.delete(this.child);
        resolve({ code, signal });
      });
      this.child.on('error', (error) => {
        // Only spawn failures matter here; for those no 'exit' follows.
        if (this.child.pid === undefined) {
          this.spawnError = error;
          reg.children.delete(this.child);
          resolve({ code: null, signal: null });
        }
      });
    });
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  /** Why the process could not be spawned at all, if that happened. */
  get error(): Error | undefined {
    return this.spawnError;
  }

  get running(): boolean {
    return this.spawnError === undefined && isRunning(this.child);
  }

  /** SIGTERM, wait for the exit, SIGKILL when it takes longer than `graceMs`. */
  async stop(graceMs = 5_000): Promise<ExitInfo> {
    if (this.running) {
      this.child.kill('SIGTERM');
      const timer = new AbortController();
      const outcome = await Promise.race([
        this.exited,
        delay(graceMs, 'timeout' as const, { signal: timer.signal }).catch(() => 'aborted' as const),
      ]);
      timer.abort();
      if (outcome === 'timeout' && this.running) this.child.kill('SIGKILL');
    }
    return this.exited;
  }

  /** SIGKILL (a crash, as far as the server is concerned) and wait for the exit. */
  async kill(): Promise<ExitInfo> {
    if (this.running) this.child.kill('SIGKILL');
    return this.exited;
  }
}

/**
 * Waits until `ready()` says yes, failing early when the process exits. On timeout the process is killed.
 * Errors carry the tail of `logFiles`, which is usually all one needs to see why a server did not start.
 */
export async function waitForReady(
  proc: ManagedProcess,
  ready: () => Promise<boolean>,
  opts: { what: string; timeoutMs: number; logFiles: readonly string[] },
): Promise<void> {
  let outcome: 'ready' | 'exited';
  try {
    outcome = await waitUntil(
      async () => {
        if (!proc.running) return 'exited' as const;
        return (await ready()) ? ('ready' as const) : false;
      },
      { timeoutMs: opts.timeoutMs, intervalMs: 50, message: opts.what },
    );
  } catch (error) {
    await proc.kill();
    throw new ServerStartError(
      `${(error as Error).message}\ncommand: ${proc.command} ${proc.args.join(' ')}`,
      false,
      logTail(opts.logFiles),
      { cause: error },
    );
  }
  if (outcome === 'exited') {
    const info = await proc.exited;
    const how = proc.error
      ? `could not be spawned (${proc.error.message})`
      : `exited with ${info.signal ? `signal ${info.signal}` : `code ${String(info.code)}`}`;
    throw new ServerStartError(
      `${opts.what}: ${proc.command} ${how} before it was ready\ncommand: ${proc.command} ${proc.args.join(' ')}`,
      true,
      logTail(opts.logFiles),
    );
  }
}

/**
 * The lifecycle every test server shares: one process at a time on a fixed port, restartable on
 * that port with the same data, and a temp dir removed by `cleanup()`.
 */
export abstract class ManagedServer {
  protected proc: ManagedProcess | undefined;
  protected portNumber = 0;
  protected removed = false;

  protected constructor(private readonly rootDir: string) {}

  get port(): number {
    return this.portNumber;
  }

  get running(): boolean {
    return this.proc?.running ?? false;
  }

  /** Starts the server on `port` and waits until it serves. */
  abstract startOn(port: number): Promise<void>;

  /** Refuses to start again after `cleanup()` removed the data. */
  protected checkNotRemoved(what: string, port: number): void {
    if (this.removed) throw new Error(`${what} on port ${port}: cleanup() already removed ${this.rootDir}`);
  }

  async stop(): Promise<void> {
    await this.proc?.stop();
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.startOn(this.portNumber);
  }

  async kill(): Promise<void> {
    await this.proc?.kill();
  }

  async cleanup(): Promise<void> {
    await this.stop();
    if (!this.removed) {
      this.removed = true;
      removeTempDir(this.rootDir);
    }
  }
}
