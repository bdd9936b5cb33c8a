import { createClient, CreateMode, Exception, State, type Client, type Event, type Stat } from 'node-zookeeper-client';
import type { Logger } from 'pino';
import { guardClient } from './client-guards.js';
import { ZooKeeperRequestError, type ZooKeeperRequestErrorCode } from './zookeeper-request-error.js';

/** The client options regsync sets; `retries: 0` because a failed call is the engine's to retry. */
export interface ZooKeeperClientOptions {
  sessionTimeout: number;
  spinDelay: number;
  retries: number;
}

/** Builds a node-zookeeper-client `Client`; injectable so that tests can reach the session. */
export type ZooKeeperClientFactory = (connectionString: string, options: ZooKeeperClientOptions) => Client;

/** node-zookeeper-client's `createClient`. */
export const defaultClientFactory: ZooKeeperClientFactory = (connectionString, options) => createClient(connectionString, options);

/** A watcher function as node-zookeeper-client calls it. */
export type ZooKeeperWatcher = (event: Event) => void;

/** Told whenever a connection is (re-)established. */
export interface ConnectedInfo {
  /** The server gave a new session: every watch and every ephemeral node of the old one is gone. */
  newSession: boolean;
  /** The session id in hex. */
  sessionId: string;
}

export interface ZooKeeperConnectionOptions {
  clusterId: string;
  /** `host:port,host:port`. */
  connectionString: string;
  sessionTimeoutMs: number;
  connectTimeoutMs: number;
  operationTimeoutMs: number;
  spinDelayMs: number;
  /** `user:password` for digest authentication, sent on every (re)connection. */
  digest: string | undefined;
  clientFactory: ZooKeeperClientFactory;
  log: Logger;
  /** Called after every (re)connection, new session or not. Must not throw. */
  onConnected: (info: ConnectedInfo) => void;
}

/** What a `create` found. */
export type CreateOutcome = 'created' | 'exists' | 'no-parent';

interface Pending {
  client: Client;
  fail: (code: ZooKeeperRequestErrorCode, detail: string) => void;
}

interface Waiter {
  resolve: (client: Client) => void;
  reject: (error: ZooKeeperRequestError) => void;
  timer: NodeJS.Timeout;
}

/**
 * One ZooKeeper session at a time for one cluster, with promise-returning calls that never hang.
 *
 * The client library queues calls while it is disconnected and never answers calls queued on a
 * session that expired; here a call first waits for a connection (at most `connectTimeoutMs`, then
 * `zookeeper-unavailable`), then for its answer (at most `operationTimeoutMs`, then
 * `zookeeper-timeout`). A lost connection is re-established by the library on the same session; an
 * expired session is replaced by a new client at once, and `onConnected` says which happened so the
 * owner can re-arm watches and re-create ephemeral nodes.
 *
 * Connects lazily, on the first call. Deliberately left out: read-only mode, SASL, chroot.
 */
export class ZooKeeperConnection {
  private client: Client | undefined;
  private isConnected = false;
  private lastSessionId: string | undefined;
  private readonly waiters = new Set<Waiter>();
  private readonly pending = new Set<Pending>();
  private closed = false;
  private reopenTimer: NodeJS.Timeout | undefined;
  private readonly counters = { sessions: 0, expiries: 0 };

  constructor(private readonly opts: ZooKeeperConnectionOptions) {}

  /** Whether a session is connected right now. */
  get connected(): boolean {
    return this.isConnected;
  }

  /** The current (or last) session id in hex; undefined before the first connection. */
  get sessionId(): string | undefined {
    return this.lastSessionId;
  }

  /** Sessions established and sessions lost to expiry, for diagnostics. */
  stats(): { sessions: number; expiries: number } {
    return { ...this.counters };
  }

  /** Does this ephemeral node belong to the current session? */
  ownsEphemeral(stat: Stat): boolean {
    return this.lastSessionId !== undefined && stat.ephemeralOwner.toString('hex') === this.lastSessionId;
  }

  /** Children of `path` (names only), or undefined when the node does not exist; `watcher` is armed on success. */
  getChildren(path: string, watcher?: ZooKeeperWatcher): Promise<string[] | undefined> {
    return this.call<string[] | undefined>('getChildren', path, (client, done) => {
      const cb = (error: unknown, children: string[]) => (isCode(error, Exception.NO_NODE) ? done(null, undefined) : done(error, children));
      if (watcher) client.getChildren(path, watcher, cb);
      else client.getChildren(path, cb);
    });
  }

  /** Data and stat of `path`, or undefined when it does not exist; `watcher` is armed on success. */
  getData(path: string, watcher?: ZooKeeperWatcher): Promise<{ data: Buffer; stat: Stat } | undefined> {
    return this.call<{ data: Buffer; stat: Stat } | undefined>('getData', path, (client, done) => {
      const cb = (error: unknown, data: Buffer | undefined, stat: Stat) =>
        isCode(error, Exception.NO_NODE) ? done(null, undefined) : done(error, { data: data ?? Buffer.alloc(0), stat });
      if (watcher) client.getData(path, watcher, cb);
      else client.getData(path, cb);
    });
  }

  /** Stat of `path`, or undefined when it does not exist; `watcher` fires when it is created, changed or deleted. */
  exists(path: string, watcher?: ZooKeeperWatcher): Promise<Stat | undefined> {
    return this.call<Stat | undefined>('exists', path, (client, done) => {
      const cb = (error: unknown, stat: Stat | undefined) => done(error, stat ?? undefined);
      if (watcher) client.exists(path, watcher, cb);
      else client.exists(path, cb);
    });
  }

  /** Creates a node (open ACL); answers instead of failing when it exists or its parent does not. */
  create(path: string, data: Buffer, mode: 'persistent' | 'ephemeral'): Promise<CreateOutcome> {
    const flags = mode === 'ephemeral' ? CreateMode.EPHEMERAL : CreateMode.PERSISTENT;
    return this.call<CreateOutcome>('create', path, (client, done) => {
      client.create(path, data, flags, (error) => {
        if (isCode(error, Exception.NODE_EXISTS)) done(null, 'exists');
        else if (isCode(error, Exception.NO_NODE)) done(null, 'no-parent');
        else done(error, 'created');
      });
    });
  }

  /** Creates `path` and its missing ancestors as persistent nodes; existing ones are fine. */
  async mkdirp(path: string): Promise<void> {
    const segments = path.split('/').filter((s) => s !== '');
    let current = '';
    for (const segment of segments) {
      current += `/${segment}`;
      const outcome = await this.create(current, Buffer.alloc(0), 'persistent');
      if (outcome === 'no-parent') throw this.error('create', current, 'zookeeper-error', 'the parent vanished while creating the path', 'NO_NODE');
    }
  }

  /** Deletes a node whatever its version; answers false when it was already gone. */
  remove(path: string): Promise<boolean> {
    return this.call<boolean>('remove', path, (client, done) => {
      client.remove(path, -1, (error) => (isCode(error, Exception.NO_NODE) ? done(null, false) : done(error, true)));
    });
  }

  /** Replaces a node's data whatever its version; answers false when the node is gone. */
  setData(path: string, data: Buffer): Promise<boolean> {
    return this.call<boolean>('setData', path, (client, done) => {
      client.setData(path, data, -1, (error) => (isCode(error, Exception.NO_NODE) ? done(null, false) : done(error, true)));
    });
  }

  /**
   * Closes the session (the server then deletes its ephemeral nodes at once) and fails every
   * waiting call with `zookeeper-closed`. Idempotent.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.reopenTimer) clearTimeout(this.reopenTimer);
    for (const w of [...this.waiters]) {
      clearTimeout(w.timer);
      w.reject(this.error('connect', this.opts.connectionString, 'zookeeper-closed', 'the adapter is closed'));
    }
    this.waiters.clear();
    for (const p of [...this.pending]) p.fail('zookeeper-closed', 'the adapter is closed');
    this.pending.clear();
    const client = this.client;
    this.client = undefined;
    if (!client) return;
    const wasConnected = this.isConnected;
    this.isConnected = false;
    if (!wasConnected) {
      try {
        client.close();
      } catch (err) {
        // The library writes the close to a socket it may not have opened yet; nothing to close then.
        this.opts.log.debug({ err }, 'zookeeper client closed before it had a socket');
      }
      return;
    }
    // Wait (briefly) for the server to confirm, so that our ephemeral nodes are gone when close resolves.
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, Math.min(this.opts.operationTimeoutMs, 5_000));
      client.once('disconnected', () => {
        clearTimeout(timer);
        resolve();
      });
      client.close();
    });
  }

  /** How long one connection attempt may go without a session, as the Java client's connect timeout: the session timeout shared among the servers. */
  private handshakeTimeoutMs(): number {
    const servers = this.opts.connectionString.split(',').length;
    return Math.max(1_000, Math.floor(this.opts.sessionTimeoutMs / servers));
  }

  private ensureClient(): void {
    if (this.client || this.closed || this.reopenTimer) return;
    const client = this.opts.clientFactory(this.opts.connectionString, {
      sessionTimeout: this.opts.sessionTimeoutMs,
      spinDelay: this.opts.spinDelayMs,
      retries: 0,
    });
    this.client = client;
    guardClient(client, this.handshakeTimeoutMs(), this.opts.log);
    if (this.opts.digest !== undefined) client.addAuthInfo('digest', Buffer.from(this.opts.digest));
    client.on('state', (state: State) => this.onState(client, state));
    client.connect();
  }

  private onState(client: Client, state: State): void {
    if (client !== this.client) return;
    const log = this.opts.log;
    if (state === State.SYNC_CONNECTED) {
      const sessionId = client.getSessionId().toString('hex');
      const newSession = sessionId !== this.lastSessionId;
      this.lastSessionId = sessionId;
      this.isConnected = true;
      if (newSession) this.counters.sessions += 1;
      log.info({ sessionId, newSession, timeoutMs: client.getSessionTimeout() }, newSession ? 'zookeeper session established' : 'zookeeper connection re-established');
      for (const w of [...this.waiters]) {
        clearTimeout(w.timer);
        w.resolve(client);
      }
      this.waiters.clear();
      try {
        this.opts.onConnected({ newSession, sessionId });
      } catch (err) {
        log.warn({ err }, 'zookeeper connection listener failed');
      }
    } else if (state === State.DISCONNECTED) {
      if (this.isConnected) log.warn('zookeeper connection lost; reconnecting on the same session');
      this.isConnected = false;
    } else if (state === State.EXPIRED) {
      this.replaceClient(client, 'expired');
    } else if (state === State.AUTH_FAILED) {
      this.replaceClient(client, 'auth-failed');
    }
  }

  /**
   * Drops a client whose session is over and opens a new one: at once after an expiry (the
   * server may also say so in answer to a request, when it closed the session under a connection
   * it kept open), after `spinDelayMs` when authentication failed.
   */
  private replaceClient(client: Client, why: 'expired' | 'auth-failed'): void {
    if (client !== this.client) return;
    const log = this.opts.log;
    this.isConnected = false;
    this.client = undefined;
    this.failPending(client, why === 'expired' ? 'the session expired' : 'authentication failed');
    client.close();
    if (why === 'expired') {
      this.counters.expiries += 1;
      log.warn({ sessionId: this.lastSessionId }, 'zookeeper session expired; opening a new session');
      this.ensureClient();
      return;
    }
    log.error('zookeeper authentication failed (check username/password); trying again shortly');
    this.reopenTimer = setTimeout(() => {
      this.reopenTimer = undefined;
      this.ensureClient();
    }, this.opts.spinDelayMs);
    this.reopenTimer.unref();
  }

  private failPending(client: Client, detail: string): void {
    for (const p of [...this.pending]) {
      if (p.client !== client) continue;
      this.pending.delete(p);
      p.fail('zookeeper-unavailable', detail);
    }
  }

  private connectedClient(op: string, path: string): Promise<Client> {
    if (this.closed) return Promise.reject(this.error(op, path, 'zookeeper-closed', 'the adapter is closed'));
    this.ensureClient();
    const client = this.client;
    if (this.isConnected && client) return Promise.resolve(client);
    return new Promise<Client>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters.delete(waiter);
          reject(this.error(op, path, 'zookeeper-unavailable', `not connected to ${this.opts.connectionString} within ${this.opts.connectTimeoutMs} ms`));
        }, this.opts.connectTimeoutMs),
      };
      this.waiters.add(waiter);
    });
  }

  private async call<T>(op: string, path: string, run: (client: Client, done: (error: unknown, value: T) => void) => void): Promise<T> {
    const client = await this.connectedClient(op, path);
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const pending: Pending = {
        client,
        fail: (code, detail) => finish(this.error(op, path, code, detail), undefined),
      };
      const timer = setTimeout(
        () => finish(this.error(op, path, 'zookeeper-timeout', `no answer within ${this.opts.operationTimeoutMs} ms`), undefined),
        this.opts.operationTimeoutMs,
      );
      const finish = (error: unknown, value: T | undefined) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        this.pending.delete(pending);
        // The server closed the session under a connection it kept open: nothing else will say so.
        if (isCode(error, Exception.SESSION_EXPIRED) && client === this.client && this.isConnected) this.replaceClient(client, 'expired');
        if (error) reject(error instanceof ZooKeeperRequestError ? error : this.convert(op, path, error));
        else resolve(value as T);
      };
      this.pending.add(pending);
      try {
        run(client, (error, value) => finish(error, value));
      } catch (error) {
        // The library asserts its arguments synchronously (an invalid path, say).
        finish(this.error(op, path, 'zookeeper-error', error instanceof Error ? error.message : String(error), 'BAD_ARGUMENTS'), undefined);
      }
    });
  }

  private convert(op: string, path: string, error: unknown): ZooKeeperRequestError {
    const name = zkCodeName(error);
    const lost = name === 'CONNECTION_LOSS' || name === 'SESSION_EXPIRED';
    const detail = lost ? 'the connection was lost before the answer came; the outcome is unknown' : describe(error);
    return this.error(op, path, lost ? 'zookeeper-unavailable' : 'zookeeper-error', detail, name, error);
  }

  private error(op: string, path: string, code: ZooKeeperRequestErrorCode, detail: string, zkCode?: string, cause?: unknown): ZooKeeperRequestError {
    return new ZooKeeperRequestError({ code, clusterId: this.opts.clusterId, op, path, zkCode, detail }, cause === undefined ? undefined : { cause });
  }
}

function isCode(error: unknown, code: number): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === code;
}

function zkCodeName(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const name = (error as { name?: unknown }).name;
  return typeof name === 'string' && /^[A-Z_]+$/.test(name) ? name : undefined;
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message;
  if (typeof error === 'object' && error !== null && typeof (error as { message?: unknown }).message === 'string') {
    return (error as { message: string }).message;
  }
  return String(error);
}
