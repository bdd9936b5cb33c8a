import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { hostname } from 'node:os';
import { join, resolve } from 'node:path';
import { DataDirLockedError } from './data-dir-locked-error.js';

/** A held data dir lock. */
export interface DataDirLock {
  readonly file: string;
  /** Removes the lock file if it is still this process's; idempotent. */
  release(): void;
}

interface LockContent {
  pid: number;
  host: string;
  since: string;
}

/**
 * Takes `<dir>/lock` for this process: created exclusively, holding the pid, host and start time.
 * A lock whose process is gone (same host, no such pid; or unreadable) is stale and taken over; a
 * live one stops the caller with a {@link DataDirLockedError}. A lock written on another host is
 * honoured: a data dir on a shared volume cannot be checked from here.
 */
export function lockDataDir(dir: string): DataDirLock {
  const root = resolve(dir);
  mkdirSync(root, { recursive: true });
  const file = join(root, 'lock');
  const mine: LockContent = { pid: process.pid, host: hostname(), since: new Date().toISOString() };
  for (let attempt = 0; attempt < 3; attempt++) {
    let fd: number;
    try {
      fd = openSync(file, 'wx');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const held = readLock(file);
      if (held !== undefined && (held.host !== mine.host || alive(held.pid))) throw new DataDirLockedError(root, held.pid, held.since);
      rmSync(file, { force: true });
      continue;
    }
    writeSync(fd, `${JSON.stringify(mine)}\n`);
    closeSync(fd);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      if (readLock(file)?.pid === mine.pid) rmSync(file, { force: true });
      process.off('exit', release);
    };
    process.once('exit', release);
    return { file, release };
  }
  throw new Error(`cannot take ${file}: it keeps coming back`);
}

function readLock(file: string): LockContent | undefined {
  try {
    const value = JSON.parse(readFileSync(file, 'utf8')) as Partial<LockContent>;
    if (typeof value.pid === 'number' && typeof value.host === 'string' && typeof value.since === 'string') return value as LockContent;
  } catch {
    // Torn or foreign: stale.
  }
  return undefined;
}

function alive(pid: number): boolean {
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
