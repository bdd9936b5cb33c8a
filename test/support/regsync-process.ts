import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeTempDir, ManagedProcess, removeTempDir, waitForReady } from './server-process.js';

const BIN = fileURLToPath(new URL('../../bin/regsync.js', import.meta.url));

/** A `regsync` command running as its own process, as an operator would start it. */
export interface RegsyncProcess {
  proc: ManagedProcess;
  /** The `http://host:port` the command printed. */
  url: string;
  /** `host:port`. */
  endpoint: string;
  output(): string;
  /** SIGTERM and wait; returns the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Runs `regsync <args>` from the compiled build (bin/regsync.js -> dist/) and waits until it prints
 * `... on http://...` (or what `ready` matches; its first group is the URL). Output goes to a temp log file.
 */
export async function startRegsync(
  args: string[],
  opts: { timeoutMs?: number; ready?: RegExp; env?: NodeJS.ProcessEnv } = {},
): Promise<RegsyncProcess> {
  const dir = makeTempDir('regsync-cli-');
  const logFile = join(dir, 'out.log');
  const proc = new ManagedProcess(process.execPath, [BIN, ...args], { logFile, env: { ...process.env, REGSYNC_LOG_LEVEL: 'warn', ...opts.env } });
  const output = () => readFileSync(logFile, 'utf8');
  const ready = opts.ready ?? / on (http:\/\/[^\s]+)/;
  let url = '';
  await waitForReady(
    proc,
    async () => {
      const m = ready.exec(output());
      if (m) url = m[1] ?? / on (http:\/\/[^\s]+)/.exec(output())?.[1] ?? 'ready';
      return url !== '';
    },
    { what: `regsync ${args[0] ?? ''}`, timeoutMs: opts.timeoutMs ?? 20_000, logFiles: [logFile] },
  );
  return {
    proc,
    url,
    endpoint: url.replace(/^http:\/\//, ''),
    output,
    async stop() {
      const info = await proc.stop();
      removeTempDir(dir);
      return info.code;
    },
  };
}

/** Runs `regsync <args>` to completion and returns its exit code and output. */
export async function runRegsync(args: string[], opts: { env?: NodeJS.ProcessEnv } = {}): Promise<{ code: number | null; output: string }> {
  const dir = makeTempDir('regsync-cli-');
  const logFile = join(dir, 'out.log');
  const proc = new ManagedProcess(process.execPath, [BIN, ...args], { logFile, ...(opts.env ? { env: { ...process.env, ...opts.env } } : {}) });
  const info = await proc.exited;
  const output = readFileSync(logFile, 'utf8');
  removeTempDir(dir);
  return { code: info.code, output };
}
