import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { basename, dirname, resolve } from 'node:path';
import type { Logger } from 'pino';
import { silentLogger } from '../log.js';
import { CmdbFileError, parseCmdbFile, type CmdbFileContent } from './document.js';
import { SnapshotCmdbProvider } from './snapshot-provider.js';

// The document format lives in document.ts (the HTTP provider reads it too); re-exported here, where
// it was first defined, so existing imports keep working.
export { CmdbFileError, parseCmdbFile, type CmdbFileContent } from './document.js';

/** Options of {@link FileCmdbProvider}. */
export interface FileCmdbProviderOptions {
  /** The YAML or JSON file. */
  path: string;
  /** Format; default by extension (`.json`, `.yaml`, `.yml`), else sniffed (`{` first means JSON). */
  format?: 'yaml' | 'json';
  /** Period of the stat fallback that catches changes `fs.watch` misses, in ms; default 2000. */
  pollMs?: number;
  /** Quiet time after the last change notice before reloading, in ms; default 100. */
  debounceMs?: number;
  /** How long events are kept for {@link FileCmdbProvider.events}, in ms; default one hour. */
  eventRetentionMs?: number;
  logger?: Logger;
}

/**
 * A {@link CmdbProvider} reading one YAML or JSON file (format: see {@link parseCmdbFile}); the
 * snapshot, its events and {@link lastError} are {@link SnapshotCmdbProvider}'s.
 *
 * {@link start} loads the file (and throws if it cannot be used: there is no last good content yet),
 * then follows it: `fs.watch` on its directory (so replacing the file by rename, as editors and config
 * management do, is seen) plus a stat every `pollMs` for file systems where watching is unreliable.
 * Change notices are debounced by `debounceMs`, and reloads never overlap.
 *
 * A reload that fails (file missing, unreadable, invalid) keeps serving the last good content and sets
 * {@link lastError}; the next good reload clears it. Each good reload records one timestamped event per
 * entity added, changed or removed, which {@link events} returns; events older than `eventRetentionMs`
 * are dropped (readers catch up with full refreshes).
 *
 * Answers are copies; callers may mutate them.
 */
export class FileCmdbProvider extends SnapshotCmdbProvider {
  readonly path: string;
  private readonly opts: FileCmdbProviderOptions;
  private readonly logger: Logger;
  private watcher: FSWatcher | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private debounceTimer: NodeJS.Timeout | undefined;
  /** `mtime:size:ino` of the file at the last load attempt, `missing`, or undefined before the first. */
  private signature: string | undefined;
  private state: 'new' | 'started' | 'closed' = 'new';

  constructor(opts: FileCmdbProviderOptions) {
    super(opts.eventRetentionMs === undefined ? {} : { eventRetentionMs: opts.eventRetentionMs });
    this.opts = opts;
    this.path = resolve(opts.path);
    this.logger = (opts.logger ?? silentLogger()).child({ component: 'cmdb-file', file: this.path });
  }

  /** Loads the file (throwing {@link CmdbFileError} if it cannot be used) and starts following it. */
  async start(): Promise<void> {
    if (this.state !== 'new') throw new Error(`FileCmdbProvider already ${this.state}`);
    const error = await this.load();
    if (error !== undefined) throw error;
    this.state = 'started';
    this.watchDirectory();
    const pollMs = this.opts.pollMs ?? 2000;
    this.pollTimer = setInterval(() => void this.checkStat(), pollMs);
    this.pollTimer.unref();
  }

  /** Stops following the file; the content loaded last stays readable. Idempotent. */
  async close(): Promise<void> {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.watcher?.close();
    this.watcher = undefined;
    clearInterval(this.pollTimer);
    clearTimeout(this.debounceTimer);
    await this.loadsSettled();
  }

  /**
   * Reloads the file now (after any reload in progress); resolves true if the new content is in use,
   * false if it failed (see {@link lastError}).
   */
  async reload(): Promise<boolean> {
    return this.coalescedLoad(async () => (await this.load()) === undefined, () => this.state === 'closed');
  }

  /** One load attempt; returns the error if the file could not be used. */
  private async load(): Promise<CmdbFileError | undefined> {
    let text: string;
    try {
      const st = await stat(this.path);
      this.signature = `${st.mtimeMs}:${st.size}:${st.ino}`;
      text = await readFile(this.path, 'utf8');
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') this.signature = 'missing';
      return this.failed(new CmdbFileError(this.path, '', code === 'ENOENT' ? 'file not found' : `cannot read: ${(error as Error).message}`));
    }
    let next: CmdbFileContent;
    try {
      next = parseCmdbFile(text, this.path, this.opts.format);
    } catch (error) {
      return this.failed(error instanceof CmdbFileError ? error : new CmdbFileError(this.path, '', String(error)));
    }
    const first = this.state === 'new';
    const { events, recovered } = this.install(next, !first);
    if (recovered) this.logger.info('CMDB file usable again');
    if (!first) this.logger.info({ events }, 'CMDB file reloaded');
    return undefined;
  }

  private failed(error: CmdbFileError): CmdbFileError {
    this.setProblem(error.message);
    if (this.state !== 'new') this.logger.warn({ err: error }, 'CMDB file reload failed; keeping the last good content');
    return error;
  }

  private watchDirectory(): void {
    const name = basename(this.path);
    try {
      this.watcher = watch(dirname(this.path), { persistent: false }, (_event, filename) => {
        if (filename === null || filename.toString() === name) this.scheduleReload();
      });
      this.watcher.on('error', (error) => {
        this.logger.warn({ err: error }, 'watching the CMDB file directory failed; relying on polling');
        this.watcher?.close();
        this.watcher = undefined;
      });
    } catch (error) {
      this.logger.warn({ err: error }, 'cannot watch the CMDB file directory; relying on polling');
    }
  }

  private async checkStat(): Promise<void> {
    let signature: string;
    try {
      const st = await stat(this.path);
      signature = `${st.mtimeMs}:${st.size}:${st.ino}`;
    } catch {
      signature = 'missing';
    }
    // A reload already pending reads the file as it is then; re-arming its debounce from here would
    // postpone it forever whenever pollMs is shorter than debounceMs.
    if (signature !== this.signature && this.debounceTimer === undefined) this.scheduleReload();
  }

  private scheduleReload(): void {
    if (this.state !== 'started') return;
    clearTimeout(this.debounceTimer);
    this.debounceTimer = setTimeout(() => {
      this.debounceTimer = undefined;
      void this.reload();
    }, this.opts.debounceMs ?? 100);
    this.debounceTimer.unref();
  }
}
