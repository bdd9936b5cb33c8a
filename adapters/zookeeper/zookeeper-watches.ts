import { Event } from 'node-zookeeper-client';
import type { Logger } from 'pino';
import type { Unsubscribe } from '../../src/model/index.js';
import type { ZooKeeperConnection, ZooKeeperWatcher } from './zookeeper-connection.js';

interface DirectoryWatch {
  path: string;
  listeners: Set<() => void>;
  /** Also watch the data of every child (Curator instances change in place). */
  dataOfChildren: boolean;
  /** Children whose data watch is armed on the current connection. */
  dataArmed: Set<string>;
  arming: boolean;
  armAgain: boolean;
  /** Something changed: tell the listeners once the watch stands again. */
  dirty: boolean;
}

/**
 * The watches of one adapter: one ZooKeeper watch per directory however many listeners it has
 * (every task watching a service on this cluster shares it), re-armed after every event, since
 * ZooKeeper watches fire once.
 *
 * A directory is watched for its children (`getChildren`), or, while it does not exist, for its
 * creation (`exists`); optionally also for the data of each child. After every (re)connection the
 * owner calls {@link rearmAll}: everything is armed again (after a session expiry the server has
 * forgotten every watch) and every listener is told, because changes may have been missed.
 *
 * Listeners are told only once the watch has been armed again (its request sent after the event,
 * on the same session as their reads), never before: a listener's read is then processed after the
 * re-armed watch, so a change is either seen by that read or fires the watch; none falls between.
 *
 * A listener is called with no data (the engine re-reads). A watch never throws: arming failures
 * are logged and repaired at the next connection.
 */
export class ZooKeeperWatches {
  private readonly dirs = new Map<string, DirectoryWatch>();
  private closed = false;
  private failing = false;
  // One function for all paths: the client library keeps one watcher per path and function, so
  // re-arming never stacks duplicates.
  private readonly onDirectoryEvent: ZooKeeperWatcher = (event) => this.directoryEvent(event);
  private readonly onDataEvent: ZooKeeperWatcher = (event) => this.dataEvent(event);

  constructor(
    private readonly conn: ZooKeeperConnection,
    private readonly log: Logger,
  ) {}

  /** Directories watched now. */
  get size(): number {
    return this.dirs.size;
  }

  /** Calls `listener` whenever `path`'s children (and, with `dataOfChildren`, their data) may have changed. */
  watch(path: string, listener: () => void, opts: { dataOfChildren?: boolean } = {}): Unsubscribe {
    if (this.closed) return () => {};
    let dir = this.dirs.get(path);
    const created = !dir;
    if (!dir) {
      dir = { path, listeners: new Set(), dataOfChildren: false, dataArmed: new Set(), arming: false, armAgain: false, dirty: false };
      this.dirs.set(path, dir);
    }
    // A distinct wrapper per subscription, so that the same function subscribed twice unsubscribes once each.
    const entry = () => listener();
    dir.listeners.add(entry);
    const wantsData = opts.dataOfChildren === true && !dir.dataOfChildren;
    if (wantsData) dir.dataOfChildren = true;
    if (created || wantsData) this.arm(dir);
    const watched = dir;
    return () => {
      watched.listeners.delete(entry);
      if (watched.listeners.size === 0 && this.dirs.get(path) === watched) this.dirs.delete(path);
    };
  }

  /** After a (re)connection: arm every watch again and tell every listener. */
  rearmAll(): void {
    if (this.closed) return;
    for (const dir of this.dirs.values()) {
      dir.dataArmed.clear();
      dir.dirty = true;
      this.arm(dir);
    }
  }

  close(): void {
    this.closed = true;
    this.dirs.clear();
  }

  private arm(dir: DirectoryWatch): void {
    if (dir.arming) {
      dir.armAgain = true;
      return;
    }
    dir.arming = true;
    dir.armAgain = false;
    this.armOnce(dir)
      .then(
        () => {
          if (this.failing) this.log.info('zookeeper watches armed again');
          this.failing = false;
        },
        (err: unknown) => {
          // Repaired at the next (re)connection, which re-arms everything.
          if (!this.failing) this.log.warn({ err, path: dir.path }, 'cannot arm a zookeeper watch; retrying after the next reconnection');
          this.failing = true;
        },
      )
      .finally(() => {
        dir.arming = false;
        if (!this.isWatched(dir)) return;
        // Another event came meanwhile: its arm goes out before the listeners are told (and thus
        // before their reads, which travel the same session in order). Telling them at once rather
        // than after that arm keeps a steady stream of changes from holding them back.
        if (dir.armAgain) this.arm(dir);
        if (dir.dirty) {
          dir.dirty = false;
          this.notify(dir);
        }
      });
  }

  private async armOnce(dir: DirectoryWatch): Promise<void> {
    const children = await this.conn.getChildren(dir.path, this.onDirectoryEvent);
    if (children === undefined) {
      // Not there yet: watch for its creation instead.
      const stat = await this.conn.exists(dir.path, this.onDirectoryEvent);
      if (stat) {
        // Created between the two calls: no event will say so; arm the child watch and tell the listeners.
        dir.armAgain = true;
        dir.dirty = true;
      }
      return;
    }
    if (!dir.dataOfChildren) return;
    const current = new Set(children.map((c) => `${dir.path}/${c}`));
    for (const p of dir.dataArmed) if (!current.has(p)) dir.dataArmed.delete(p);
    await Promise.all(
      [...current]
        .filter((p) => !dir.dataArmed.has(p))
        .map(async (p) => {
          if ((await this.conn.getData(p, this.onDataEvent)) !== undefined) dir.dataArmed.add(p);
        }),
    );
  }

  private directoryEvent(event: Event): void {
    const dir = this.dirs.get(event.getPath());
    if (!dir || this.closed) return;
    if (event.getType() === Event.NODE_DELETED) dir.dataArmed.clear();
    dir.dirty = true;
    this.arm(dir);
  }

  private dataEvent(event: Event): void {
    const path = event.getPath();
    const dir = this.dirs.get(path.slice(0, path.lastIndexOf('/')));
    if (!dir || !dir.dataOfChildren || this.closed) return;
    dir.dataArmed.delete(path);
    // A change or deletion (a deleted child is not watched again; the directory's watch sees it go).
    dir.dirty = true;
    this.arm(dir);
  }

  private isWatched(dir: DirectoryWatch): boolean {
    return !this.closed && this.dirs.get(dir.path) === dir;
  }

  private notify(dir: DirectoryWatch): void {
    for (const listener of [...dir.listeners]) {
      try {
        listener();
      } catch (err) {
        this.log.warn({ err, path: dir.path }, 'zookeeper watch listener failed');
      }
    }
  }
}
