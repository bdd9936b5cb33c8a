import type { CmdbFileContent } from './document.js';
import type { CmdbEntities, CmdbEntity, CmdbEvent, CmdbLabel, CmdbProblem, CmdbProvider } from './provider.js';

/** Options of {@link SnapshotCmdbProvider}. */
export interface SnapshotCmdbProviderOptions {
  /** How long events are kept for {@link SnapshotCmdbProvider.events}, in ms; default one hour. */
  eventRetentionMs?: number;
}

/** What {@link SnapshotCmdbProvider.install} did. */
export interface SnapshotInstall {
  /** How many entity events the new content recorded (0 when events were not recorded). */
  events: number;
  /** A problem was set before and is now cleared. */
  recovered: boolean;
}

function sameLabels(a: Record<string, string>, b: Record<string, string>): boolean {
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  return ka.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
}

/** The events that turn `before` into `after`. */
function diffEntities(before: CmdbEntities, after: CmdbEntities): CmdbEvent[] {
  const events: CmdbEvent[] = [];
  for (const [type, byName] of after) {
    const old = before.get(type);
    for (const [name, entity] of byName) {
      const prev = old?.get(name);
      if (prev === undefined || !sameLabels(prev.labels, entity.labels)) {
        events.push({ entityName: name, entityType: type, type: 'ENTITY_ADD_OR_UPDATE' });
      }
    }
  }
  for (const [type, byName] of before) {
    const now = after.get(type);
    for (const name of byName.keys()) {
      if (now?.has(name) !== true) events.push({ entityName: name, entityType: type, type: 'ENTITY_REMOVE' });
    }
  }
  return events;
}

function copyEntity(entity: CmdbEntity): CmdbEntity {
  return { type: entity.type, name: entity.name, labels: { ...entity.labels } };
}

/**
 * The common core of providers that periodically obtain a whole CMDB document (a file, an HTTP
 * resource) and serve it: the content in use, the entity events between two good contents, and the
 * problem the provider currently works around.
 *
 * Subclasses only fetch and validate; they call {@link install} with each good content and
 * {@link setProblem} when an attempt failed (the content in use stays: a broken source never empties
 * the CMDB). {@link install} diffs the new content against the old one and records one timestamped
 * event per entity added, changed or removed, which {@link events} returns until they are older than
 * `eventRetentionMs` (readers catch up with full refreshes).
 *
 * The SPI answers are copies; callers may mutate them. Starting, following the source and closing
 * are left to subclasses.
 */
export abstract class SnapshotCmdbProvider implements CmdbProvider {
  private content: CmdbFileContent = { labels: new Map(), entities: new Map() };
  private history: Array<{ at: number; event: CmdbEvent }> = [];
  private problem: CmdbProblem | undefined;
  private readonly eventRetentionMs: number;
  private loading: Promise<boolean> | undefined;
  private loadAgain = false;

  protected constructor(opts: SnapshotCmdbProviderOptions = {}) {
    this.eventRetentionMs = opts.eventRetentionMs ?? 3_600_000;
  }

  /**
   * Runs `attempt` (one fetch and install; true when the content in use is current) unless one is
   * running; then that one runs once more when it ends, so every caller sees the source as it was
   * when it asked, and attempts never overlap. Stops repeating once `closed()` says so.
   */
  protected coalescedLoad(attempt: () => Promise<boolean>, closed: () => boolean): Promise<boolean> {
    if (this.loading !== undefined) {
      this.loadAgain = true;
      return this.loading;
    }
    this.loading = (async () => {
      let ok: boolean;
      do {
        this.loadAgain = false;
        ok = await attempt();
      } while (this.loadAgain && !closed());
      return ok;
    })().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  /** Resolves once no load runs (for `close()`). */
  protected async loadsSettled(): Promise<void> {
    await this.loading;
  }

  /** The problem with the source's current content, or undefined when it is in use. */
  lastError(): CmdbProblem | undefined {
    return this.problem === undefined ? undefined : { ...this.problem };
  }

  async labelNames(): Promise<string[]> {
    return [...this.content.labels.keys()];
  }

  async entityTypes(): Promise<string[]> {
    return [...this.content.entities.keys()];
  }

  async label(name: string): Promise<CmdbLabel | undefined> {
    const def = this.content.labels.get(name);
    return def === undefined ? undefined : { ...def, values: [...def.values] };
  }

  async labelValue(entityName: string, entityType: string, label: string): Promise<string | undefined> {
    const entity = this.content.entities.get(entityType)?.get(entityName);
    return entity !== undefined && Object.hasOwn(entity.labels, label) ? entity.labels[label] : undefined;
  }

  async labelValues(entityName: string, entityType: string): Promise<Record<string, string>> {
    return { ...this.content.entities.get(entityType)?.get(entityName)?.labels };
  }

  async allEntities(): Promise<CmdbEntities> {
    const out: CmdbEntities = new Map();
    for (const [type, byName] of this.content.entities) {
      out.set(type, new Map([...byName].map(([name, entity]) => [name, copyEntity(entity)])));
    }
    return out;
  }

  async entity(entityName: string, entityType: string): Promise<CmdbEntity | undefined> {
    const entity = this.content.entities.get(entityType)?.get(entityName);
    return entity === undefined ? undefined : copyEntity(entity);
  }

  async events(sinceMs: number): Promise<CmdbEvent[]> {
    return this.history.filter((h) => h.at >= sinceMs).map((h) => ({ ...h.event }));
  }

  /**
   * Puts `next` in use and clears the problem. With `recordEvents` the differences to the content in
   * use so far become events; without, nothing is recorded (for the load at start, which nobody can
   * have read before). The caller hands over `next` and must not change it afterwards.
   */
  protected install(next: CmdbFileContent, recordEvents: boolean): SnapshotInstall {
    const events = recordEvents ? diffEntities(this.content.entities, next.entities) : [];
    this.content = next;
    const recovered = this.problem !== undefined;
    this.problem = undefined;
    const at = Date.now();
    const keepFrom = at - this.eventRetentionMs;
    this.history = this.history.filter((h) => h.at >= keepFrom);
    for (const event of events) this.history.push({ at, event });
    return { events: events.length, recovered };
  }

  /** Clears the problem (the source confirmed the content in use); returns whether there was one. */
  protected clearProblem(): boolean {
    const had = this.problem !== undefined;
    this.problem = undefined;
    return had;
  }

  /** Records that an attempt to get new content failed; the content in use stays. */
  protected setProblem(message: string): CmdbProblem {
    this.problem = { message, at: Date.now() };
    return { ...this.problem };
  }
}
