import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { join } from 'node:path';

/*
 * Preloaded into a regsync process by the bench (`node --import`), for CPU profiles of chosen
 * windows rather than of the whole life (`--cpu-prof`): SIGUSR2 starts a profile, the next SIGUSR2
 * writes it as `window-<pid>-<n>.cpuprofile` into $REGSYNC_BENCH_WINDOW_PROFILE_DIR, and so on.
 * Without that variable it does nothing.
 */

const dir = process.env.REGSYNC_BENCH_WINDOW_PROFILE_DIR;
if (dir !== undefined && dir !== '') {
  let session: Session | undefined;
  let written = 0;
  let turn: Promise<void> = Promise.resolve();
  const toggle = async (): Promise<void> => {
    if (session === undefined) {
      const s = new Session();
      s.connect();
      await s.post('Profiler.enable');
      await s.post('Profiler.start');
      session = s;
      return;
    }
    const s = session;
    session = undefined;
    const { profile } = await s.post('Profiler.stop');
    written += 1;
    writeFileSync(join(dir, `window-${process.pid}-${written}.cpuprofile`), JSON.stringify(profile));
    s.disconnect();
  };
  process.on('SIGUSR2', () => {
    turn = turn.then(toggle).catch((err: unknown) => console.error('window profile failed', err));
  });
}
