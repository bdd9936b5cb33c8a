import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { setTimeout as delay } from 'node:timers/promises';
import { summarizeProfile, type ProfileSummary } from './profile-summary.js';

/**
 * CPU profiles of windows of a run (one per phase), taken in regsync processes started with
 * {@link WindowProfiles.nodeFlags} and {@link WindowProfiles.env} (see window-profile-hook.ts):
 * `start` and `stop` signal every live process; `stop` waits for each file and summarizes it.
 */
export class WindowProfiles {
  readonly dir: string;
  private taken = new Map<number, number>();

  constructor(dir: string) {
    this.dir = resolve(dir, `window-${new Date().toISOString().replace(/[:.]/g, '-')}`);
    mkdirSync(this.dir, { recursive: true });
  }

  /** `node --import` of the hook, as built next to this file. */
  nodeFlags(): string[] {
    return [`--import=${pathToFileURL(join(import.meta.dirname, 'window-profile-hook.js')).href}`];
  }

  env(): Record<string, string> {
    return { REGSYNC_BENCH_WINDOW_PROFILE_DIR: this.dir };
  }

  start(pids: ReadonlyArray<number | undefined>): void {
    for (const pid of pids) if (pid !== undefined) signal(pid);
  }

  /** Ends the window in each process and returns the summaries labelled `<label> <name>`, for the files that came within 30 s. */
  async stop(label: string, procs: ReadonlyArray<{ name: string; pid: number | undefined }>): Promise<ProfileSummary[]> {
    const files: Array<{ name: string; file: string }> = [];
    for (const { name, pid } of procs) {
      if (pid === undefined || !signal(pid)) continue;
      const n = (this.taken.get(pid) ?? 0) + 1;
      this.taken.set(pid, n);
      files.push({ name, file: join(this.dir, `window-${pid}-${n}.cpuprofile`) });
    }
    const out: ProfileSummary[] = [];
    const until = Date.now() + 30_000;
    for (const { name, file } of files) {
      while (!existsSync(file) && Date.now() < until) await delay(100);
      if (!existsSync(file)) continue;
      await delay(200); // written in one call; a moment for it to be whole
      try {
        out.push({ ...summarizeProfile(file, 20), file: `${label} ${name} (${file})` });
      } catch {
        // unreadable: left out
      }
    }
    return out;
  }
}

function signal(pid: number): boolean {
  try {
    process.kill(pid, 'SIGUSR2');
    return true;
  } catch {
    return false;
  }
}
