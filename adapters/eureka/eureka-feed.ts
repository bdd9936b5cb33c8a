import type { Logger } from 'pino';
import type { EurekaHttp } from './eureka-http.js';
import { instancesDigest, type Instance } from '../../src/model/index.js';
import { applicationsOf, instanceOfInfo, instancesOfApp, reconcileHashOf, type EurekaInfo } from './eureka-meta.js';

/** Called after every refresh with the applications (upper-case names) whose instances changed since the one before. */
export type FeedListener = (changedApps: ReadonlySet<string>, appsChanged: boolean) => void;

/**
 * This process's copy of a Eureka registry, kept as Eureka clients keep theirs: a full fetch
 * (`GET /apps`), then `GET /apps/delta` every `pollIntervalMs`, each delta applied (ADDED and
 * MODIFIED replace an instance, DELETED removes it) and checked against the server's
 * `apps__hashcode`: when the hash of the copy differs, a full fetch replaces it. A full fetch also
 * runs every `fullFetchEvery` polls and after a failure. Listeners hear which applications changed.
 * Runs only while someone listens.
 */
export class EurekaFeed {
  private readonly apps = new Map<string, Map<string, EurekaInfo>>();
  private readonly digests = new Map<string, string>();
  private readonly listeners = new Set<FeedListener>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private full = false;
  private polls = 0;
  private running = false;
  private closed = false;
  /** Whether one refresh succeeded (the copy can be read). */
  ready = false;

  constructor(
    private readonly http: EurekaHttp,
    private readonly pollIntervalMs: number,
    private readonly fullFetchEvery: number,
    private readonly log: Logger,
  ) {}

  /** The instances of an application in the copy (upper-case name). */
  instancesOf(app: string): EurekaInfo[] {
    return [...(this.apps.get(app)?.values() ?? [])];
  }

  appNames(): string[] {
    return [...this.apps.keys()].filter((a) => (this.apps.get(a)?.size ?? 0) > 0);
  }

  subscribe(listener: FeedListener): () => void {
    this.listeners.add(listener);
    if (!this.running && !this.closed) {
      this.running = true;
      this.schedule(0);
    }
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  private schedule(ms: number): void {
    this.timer = setTimeout(() => void this.tick(), ms);
    this.timer.unref?.();
  }

  private stop(): void {
    this.running = false;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  close(): void {
    this.closed = true;
    this.stop();
    this.listeners.clear();
  }

  private async tick(): Promise<void> {
    if (!this.running) return;
    try {
      await this.refresh();
    } catch (err) {
      this.full = false;
      this.log.debug({ err }, 'eureka registry fetch failed; a full fetch follows');
    }
    if (this.running) this.schedule(this.pollIntervalMs);
  }

  /** One round: a delta, or a full fetch when due; then tells the listeners what changed. */
  async refresh(): Promise<void> {
    const before = new Set(this.appNames());
    this.polls += 1;
    if (!this.full || this.polls % this.fullFetchEvery === 0) await this.fetchAll();
    else {
      const answer = await this.http.call('GET', '/apps/delta', [200]);
      const hash = (answer.body as { applications?: { apps__hashcode?: string } } | undefined)?.applications?.apps__hashcode;
      for (const app of applicationsOf(answer.body)) {
        const name = (app.name ?? '').toUpperCase();
        for (const info of instancesOfApp(app)) {
          const id = info.instanceId ?? info.hostName;
          if (id === undefined) continue;
          const byId = this.apps.get(name) ?? new Map<string, EurekaInfo>();
          if (info.actionType === 'DELETED') byId.delete(id);
          else byId.set(id, info);
          this.apps.set(name, byId);
        }
      }
      const mine = reconcileHashOf([...this.apps.values()].flatMap((byId) => [...byId.values()].map((i) => i.status ?? 'UNKNOWN')));
      if (hash !== undefined && hash !== mine) {
        this.log.debug({ server: hash, local: mine }, 'eureka delta disagrees with the registry hash; fetching it whole');
        await this.fetchAll();
      }
    }
    this.ready = true;
    const changed = new Set<string>();
    for (const name of new Set([...before, ...this.apps.keys()])) {
      // What regsync reads of them: lease times move at every renewal and change nothing.
      const read = this.instancesOf(name).map(instanceOfInfo);
      const digest = instancesDigest(read.filter((r): r is { instance: Instance; eurekaId: string } => typeof r !== 'string').map((r) => r.instance));
      if (this.digests.get(name) !== digest) changed.add(name);
      if (this.instancesOf(name).length === 0) {
        this.digests.delete(name);
        this.apps.delete(name);
      } else this.digests.set(name, digest);
    }
    const after = new Set(this.appNames());
    const appsChanged = before.size !== after.size || [...after].some((a) => !before.has(a));
    // Every listener hears every round (a watch's first read waits for one), changes or not.
    for (const listener of [...this.listeners]) {
      try {
        listener(changed, appsChanged);
      } catch (err) {
        this.log.warn({ err }, 'a eureka feed listener threw');
      }
    }
  }

  private async fetchAll(): Promise<void> {
    const answer = await this.http.call('GET', '/apps', [200]);
    this.apps.clear();
    for (const app of applicationsOf(answer.body)) {
      const byId = new Map<string, EurekaInfo>();
      for (const info of instancesOfApp(app)) {
        const id = info.instanceId ?? info.hostName;
        if (id !== undefined) byId.set(id, info);
      }
      this.apps.set((app.name ?? '').toUpperCase(), byId);
    }
    this.full = true;
  }
}
