/** Another live `regsync up` (or demo) holds the data dir: two would share, and break, one local Redis. */
export class DataDirLockedError extends Error {
  override readonly name = 'DataDirLockedError';
  /** A stable code for callers and logs. */
  readonly code = 'data-dir-locked';

  constructor(
    readonly dir: string,
    readonly pid: number,
    since: string,
  ) {
    super(`data dir ${dir} is in use by another regsync (pid ${pid}, since ${since}): stop it, or give this one another --data-dir (or --redis)`);
  }
}
