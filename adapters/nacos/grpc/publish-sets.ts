import { createHash } from 'node:crypto';
import type { Logger } from 'pino';
import { instanceId, type Instance } from '../../../src/model/index.js';
import { describeService, type ServiceRef } from '../wire.js';
import { WatchIndex } from '../watch-index.js';
import { batchProblem, wireInstance, type WireInstance } from './messages.js';
import { packInstances, unpackInstances, type PackedInstances } from './packed-instances.js';

export interface PublishSetsOptions {
  log: Logger;
  /**
   * Replaces the connection's whole set for the service (`BatchInstanceRequest`); `json` is
   * `JSON.stringify(instances)`, for a sender that writes the request body as text.
   */
  send: (ref: ServiceRef, instances: WireInstance[], json: string) => Promise<void>;
  /**
   * Removes the connection's entry for the service altogether (`deregisterInstance`, which Nacos
   * applies to the whole entry whatever instance it names: `last` is one the set held). An empty
   * batch would leave an empty entry behind on the server.
   */
  clear: (ref: ServiceRef, last: WireInstance) => Promise<void>;
}

interface Entry {
  readonly ref: ServiceRef;
  /** Each owner's share (a service sync key -> its ephemeral copies, packed: kept for as long as the copies live). */
  owners: Map<string, PackedInstances>;
  /** Digest of the JSON of the set the live connection holds; undefined when it holds none. */
  sent: string | undefined;
  /** One instance of that set (what a clear names), packed. */
  sentOne: PackedInstances | undefined;
  /** How many instances that set holds (0: none). */
  held: number;
  /** The last send queued: sends of one service go one after another. */
  tail: Promise<void>;
}

/**
 * What this process's connection publishes, per destination service: a Nacos connection holds one
 * set per service and a write replaces it whole, so the shares of every owner (the service syncs
 * writing into that service, from any task) are merged into one list, and that whole list is sent
 * whenever it differs from what the connection holds. Sends of one service are serial and
 * coalesce: a caller resolves once a send that includes its change was accepted. The merge is
 * deterministic (sorted by address, metadata keys sorted): every replica that publishes the same
 * shares sends byte-identical instances, which Nacos shows once. Kept per service for as long as
 * its copies live: the shares packed ({@link packInstances}) and a digest of what was sent, not the
 * instances and the text.
 */
export class PublishSets {
  private readonly entries = new WatchIndex<Entry>();
  private heldSets = 0;
  private heldInstances = 0;

  constructor(private readonly opts: PublishSetsOptions) {}

  /**
   * Replaces `owner`'s share of the service; resolves once the connection holds the merged set.
   * `resend` sends it even when the connection should hold it already: a reader found copies of it
   * missing (removed at the server, say, by an operator), and only a new write brings them back.
   */
  set(ref: ServiceRef, owner: string, instances: readonly Instance[], resend = false): Promise<void> {
    let entry = this.entries.get(ref);
    // What Nacos would refuse would fail the whole set: left out (the adapter's apply names them).
    const ephemeral = instances.filter((i) => i.ephemeral && batchProblem(i) === undefined);
    if (!entry) {
      if (ephemeral.length === 0) return Promise.resolve();
      entry = { ref, owners: new Map(), sent: undefined, sentOne: undefined, held: 0, tail: Promise.resolve() };
      this.entries.add(entry);
    }
    if (ephemeral.length === 0) entry.owners.delete(owner);
    else entry.owners.set(owner, packInstances(ephemeral));
    if (resend) entry.sent = undefined;
    return this.flush(entry);
  }

  /** After a reconnect: the new connection holds nothing; publish every set again. Answers how many sends failed. */
  async republishAll(): Promise<number> {
    const runs: Promise<void>[] = [];
    for (const entry of this.entries.values()) {
      entry.sent = undefined;
      entry.sentOne = undefined;
      this.hold(entry, 0);
      runs.push(this.flush(entry));
    }
    return (await Promise.allSettled(runs)).filter((r) => r.status === 'rejected').length;
  }

  /** Publishes the sets the connection does not hold as they are (after failed sends). Answers how many sends failed. */
  async retryUnsent(): Promise<number> {
    const runs: Promise<void>[] = [];
    for (const entry of this.entries.values()) runs.push(this.flush(entry));
    return (await Promise.allSettled(runs)).filter((r) => r.status === 'rejected').length;
  }

  /** Sets the connection holds (services with at least one copy published) and their copies. */
  stats(): { sets: number; instances: number } {
    return { sets: this.heldSets, instances: this.heldInstances };
  }

  /** Keeps the totals of what the connection holds (read by metrics and every worker heartbeat: no walk over the sets). */
  private hold(entry: Entry, instances: number): void {
    this.heldSets += (instances > 0 ? 1 : 0) - (entry.held > 0 ? 1 : 0);
    this.heldInstances += instances - entry.held;
    entry.held = instances;
  }

  private flush(entry: Entry): Promise<void> {
    const run = entry.tail.catch(() => undefined).then(() => this.sendIfChanged(entry));
    entry.tail = run;
    return run;
  }

  private async sendIfChanged(entry: Entry): Promise<void> {
    const merged = merge(entry);
    const wire = merged.map((i) => wireInstance(entry.ref, i));
    // Serialized once: for the digest, and as the request body's instances.
    const json = JSON.stringify(wire);
    const digest = createHash('sha1').update(json).digest('base64url');
    const empty = wire.length === 0;
    if (digest === entry.sent || (empty && entry.sent === undefined)) {
      if (empty && entry.owners.size === 0) this.forget(entry);
      return;
    }
    const last = entry.sentOne;
    if (empty && last) await this.opts.clear(entry.ref, wireInstance(entry.ref, unpackInstances(last)[0] as Instance));
    else await this.opts.send(entry.ref, wire, json);
    entry.sent = empty ? undefined : digest;
    entry.sentOne = merged.length === 0 ? undefined : packInstances(merged.slice(0, 1));
    this.hold(entry, wire.length);
    this.opts.log.debug({ service: describeService(entry.ref), instances: wire.length }, 'nacos gRPC publish set sent');
    if (empty && entry.owners.size === 0) this.forget(entry);
  }

  private forget(entry: Entry): void {
    if (entry.owners.size === 0) this.entries.delete(entry);
  }
}

/** The owners' shares as one list: one instance per address (the first owner in key order wins), sorted. */
function merge(entry: Entry): Instance[] {
  const byId = new Map<string, Instance>();
  for (const owner of [...entry.owners.keys()].sort()) {
    const share = entry.owners.get(owner);
    for (const instance of share === undefined ? [] : unpackInstances(share)) {
      const id = instanceId(instance);
      if (!byId.has(id)) byId.set(id, instance);
    }
  }
  return [...byId.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, i]) => i);
}
