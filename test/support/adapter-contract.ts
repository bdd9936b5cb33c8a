import { isDeepStrictEqual } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { RegistryAdapter } from '../../src/model/adapter.js';
import {
  instanceId,
  MARK_ORIGIN,
  MARK_PATH,
  MARK_TASK,
  serviceKeyString,
  type Instance,
  type ServiceKey,
} from '../../src/model/index.js';
import { waitUntil } from './wait-until.js';

/** A namespace and group a task may name (`*` included). */
export interface ContractScope {
  namespace: string;
  group: string;
}

/** Instance fields a kind may not keep; a kind lists those it keeps, the rest are written with their defaults. */
export type ContractField = 'weight' | 'healthy' | 'enabled' | 'ephemeral' | 'cluster';

/** The kind-specific part of the contract, for one running registry. */
export interface ContractRegistry {
  /** A new adapter for the running registry; the suite closes it. */
  connect(): RegistryAdapter;
  /** An adapter whose registry cannot be reached (an endpoint nothing listens on); the suite closes it. */
  connectDead(): RegistryAdapter | Promise<RegistryAdapter>;
  /** Makes the running registry unreachable for every adapter; the answer brings it back and resolves once it serves. */
  outage(): Promise<() => Promise<void>>;
  /**
   * Where copies can be written, the default scope first. With two or more, they must differ in
   * namespace or group, so that `*` scopes are seen to tell them apart.
   */
  scopes: readonly [ContractScope, ...ContractScope[]];
  /** A legal service name, distinct for every distinct `tag` (letters, digits and `-`). */
  serviceName(tag: string): string;
  /** Metadata every copy of the service needs to be writable (Dubbo: protocol, interface, version). */
  copyMetadata(service: ServiceKey): Record<string, string>;
  /** Fields that survive a round trip with other values than the defaults. */
  keeps: readonly ContractField[];
  /**
   * An instance this kind refuses to write, distinct for every `n`; or why the kind cannot make one
   * write fail while others succeed (the case is then skipped with that reason).
   */
  unwritable: ((base: Instance, n: number) => Instance) | { skip: string };
  /** Stops what `start` started. */
  close(): Promise<void>;
}

const sorted = (instances: readonly Instance[]) => [...instances].sort((a, b) => instanceId(a).localeCompare(instanceId(b)));

/** Settles a promise into what it resolved to or why it rejected, so a test can assert on either. */
async function settle<T>(promise: Promise<T>): Promise<{ value: T } | { error: unknown }> {
  try {
    return { value: await promise };
  } catch (error) {
    return { error };
  }
}

/**
 * Registers the adapter contract as one `describe` block run against `start()`'s registry: what the
 * engine relies on from every kind, whatever its registry. A kind runs it from one test file beside
 * its adapter; what differs between kinds (legal names, scopes, which fields survive, how a write or
 * the registry fails) is the {@link ContractRegistry} it answers.
 *
 * Checked: instances with every kept field, metadata with dots and regsync's marks survive apply
 * and read, update and removal; a watch is called after a change made by another adapter and no
 * longer once unsubscribed or closed; `*` scopes list services under their real namespace and
 * group; a read that fails rejects (never `[]`); an apply with failing writes attempts every write
 * and names each failure; `close()` resolves, stops watches and refuses reads.
 *
 * Deliberately left out: what only some kinds do (heartbeats, `retain`, service-list watches, read
 * issues) and how a kind lays data out; the kinds' own tests cover those.
 */
export function describeAdapterContract(name: string, start: () => Promise<ContractRegistry>): void {
  describe(`${name}: adapter contract`, () => {
    let registry: ContractRegistry;
    const adapters: RegistryAdapter[] = [];
    let tags = 0;

    const open = (adapter: RegistryAdapter): RegistryAdapter => {
      adapters.push(adapter);
      return adapter;
    };
    const connect = () => open(registry.connect());
    /** A service no other test uses, in the scope given (default: the kind's default scope). */
    const freshService = (scope: ContractScope = registry.scopes[0]): ServiceKey => {
      tags += 1;
      return { ...scope, name: registry.serviceName(`c${tags}`) };
    };
    /** A copy as the engine writes one: marks, a dotted key, and what the kind needs. */
    const copy = (service: ServiceKey, ip: string, over: Partial<Instance> = {}): Instance => ({
      ip,
      port: 20880,
      weight: 1,
      healthy: true,
      enabled: true,
      ephemeral: true,
      cluster: 'DEFAULT',
      ...over,
      metadata: {
        ...registry.copyMetadata(service),
        [MARK_ORIGIN]: 'contract-a',
        [MARK_PATH]: 'contract-a,contract-b',
        [MARK_TASK]: 'contract-task',
        'app.build.id': 'v1.2.3',
        ...over.metadata,
      },
    });
    /** Other values than the defaults for every field the kind keeps. */
    const kept = (values: Partial<Record<ContractField, unknown>>): Partial<Instance> =>
      Object.fromEntries(registry.keeps.filter((f) => f in values).map((f) => [f, values[f]])) as Partial<Instance>;
    /** Every instance of `service` read through `adapter` equals `expected` (any order), waiting for writes to show. */
    const readsBack = async (adapter: RegistryAdapter, service: ServiceKey, expected: Instance[]) => {
      const read = async () => sorted(await adapter.listInstances(service));
      const same = await waitUntil(async () => isDeepStrictEqual(await read(), sorted(expected)), { timeoutMs: 5_000 }).catch(() => false);
      // On a timeout, show the difference.
      if (!same) expect(await read(), `${serviceKeyString(service)} read back`).toStrictEqual(sorted(expected));
    };

    beforeAll(async () => {
      registry = await start();
    });
    afterEach(async () => {
      await Promise.all(adapters.splice(0).map((a) => a.close()));
    });
    afterAll(async () => {
      await registry?.close();
    });

    it('reads back what apply wrote, with every kept field, the marks and dotted metadata; updates and removes', async () => {
      const adapter = connect();
      const service = freshService();
      const rich = copy(service, '10.77.1.1', {
        ...kept({ weight: 3, healthy: false, enabled: false, ephemeral: false, cluster: 'CONTRACT' }),
        metadata: { zone: 'z-1', 'a.b.c': 'dotted' },
      });
      // Same ephemerality: a Nacos service holds either kind, not both.
      const plain = copy(service, '10.77.1.2', { port: 9000, ...kept({ ephemeral: false }) });
      await adapter.apply(service, { upsert: [rich, plain], remove: [] });
      await readsBack(adapter, service, [rich, plain]);
      // Another adapter (another process) reads the same.
      await readsBack(connect(), service, [rich, plain]);

      const changed = { ...rich, ...kept({ weight: 5, healthy: true }), metadata: { ...rich.metadata, zone: 'z-2' } };
      await adapter.apply(service, { upsert: [changed], remove: [plain] });
      await readsBack(adapter, service, [changed]);

      await adapter.apply(service, { upsert: [], remove: [changed] });
      await readsBack(adapter, service, []);
    });

    it('calls a watch after another adapter changes the service, and not once unsubscribed', async () => {
      const watcher = connect();
      const writer = connect();
      const service = freshService();
      const a = copy(service, '10.77.2.1');
      // Each call records what a read right after it sees, so a call is matched to a change.
      const seen: string[][] = [];
      const look = () => void watcher.listInstances(service).then((list) => seen.push(list.map((i) => i.ip)), () => seen.push(['failed']));
      const stop = watcher.watch(service, look);

      const beforeAdd = seen.length;
      await writer.apply(service, { upsert: [a], remove: [] });
      await waitUntil(() => seen.slice(beforeAdd).some((ips) => ips.includes(a.ip)), { message: 'a call after the instance was added' });
      const beforeRemove = seen.length;
      await writer.apply(service, { upsert: [], remove: [a] });
      await waitUntil(() => seen.slice(beforeRemove).some((ips) => ips.length === 0), { message: 'a call after the instance was removed' });

      stop();
      // A second watch of the same service proves the next change was seen by the adapter's watch.
      let second = 0;
      const stopSecond = watcher.watch(service, () => (second += 1));
      const calls = seen.length;
      await writer.apply(service, { upsert: [copy(service, '10.77.2.2')], remove: [] });
      await waitUntil(async () => second > 0 && (await watcher.listInstances(service)).length === 1, { message: 'the second watch called' });
      expect(seen.length).toBe(calls);
      stopSecond();
    });

    it('lists services of * scopes under their real namespace and group', async () => {
      const writer = connect();
      const services = registry.scopes.map((scope) => freshService(scope));
      for (const service of services) await writer.apply(service, { upsert: [copy(service, '10.77.3.1')], remove: [] });
      const reader = connect();
      const list = async (scope: ContractScope) => (await reader.listServices(scope)).map(serviceKeyString);
      for (const service of services) {
        const own = serviceKeyString(service);
        await waitUntil(async () => (await list({ namespace: '*', group: '*' })).includes(own), { message: `${own} listed for */*` });
        const ofNamespace = await list({ namespace: service.namespace, group: '*' });
        const ofGroup = await list({ namespace: '*', group: service.group });
        expect(ofNamespace).toContain(own);
        expect(ofGroup).toContain(own);
        for (const other of services) {
          if (other.namespace !== service.namespace) expect(ofNamespace).not.toContain(serviceKeyString(other));
          if (other.group !== service.group) expect(ofGroup).not.toContain(serviceKeyString(other));
        }
        // What a `*` scope lists reads back.
        expect((await reader.listInstances(service)).map((i) => i.ip)).toEqual(['10.77.3.1']);
      }
    });

    it('rejects reads of a registry it cannot reach, never answering empty', async () => {
      const dead = open(await registry.connectDead());
      const service = freshService();
      const reads: Array<[string, () => Promise<unknown>]> = [
        ['listInstances', () => dead.listInstances(service)],
        ...[registry.scopes[0], { namespace: '*', group: '*' }].map(
          (scope): [string, () => Promise<unknown>] => [`listServices ${scope.namespace}/${scope.group}`, () => dead.listServices(scope)],
        ),
      ];
      for (const [what, read] of reads) {
        const outcome = await settle(read());
        expect(outcome, `${what} of an unreachable registry`).toHaveProperty('error');
        expect((outcome as { error: unknown }).error).toBeInstanceOf(Error);
      }
    });

    it('rejects reads while its registry is down, never answering empty, and reads again once it is back', async () => {
      const adapter = connect();
      const service = freshService();
      const a = copy(service, '10.77.4.1');
      await adapter.apply(service, { upsert: [a], remove: [] });
      await readsBack(adapter, service, [a]);
      adapter.watch(service, () => {});
      const resume = await registry.outage();
      try {
        // A read may still answer what the registry held (a cache fed by a watch not yet broken); once
        // the registry is gone reads must reject. Nothing in between may be an empty service.
        await waitUntil(async () => {
          const outcome = await settle(adapter.listInstances(service));
          if ('value' in outcome) expect(outcome.value).toEqual([a]);
          return 'error' in outcome;
        }, { timeoutMs: 20_000, message: 'listInstances to reject while the registry is down' });
        await waitUntil(async () => {
          const outcome = await settle(adapter.listServices(registry.scopes[0]));
          if ('value' in outcome) expect(outcome.value.map(serviceKeyString)).toContain(serviceKeyString(service));
          return 'error' in outcome;
        }, { timeoutMs: 20_000, message: 'listServices to reject while the registry is down' });
      } finally {
        await resume();
      }
      await waitUntil(async () => Array.isArray(await adapter.listInstances(service)), { timeoutMs: 30_000, message: 'reads work again' });
    });

    it('attempts every write of an apply and names each failure, keeping the writes that succeeded', async (ctx) => {
      const { unwritable } = registry;
      if (!(unwritable instanceof Function)) {
        ctx.skip(unwritable.skip);
        return;
      }
      const adapter = connect();
      const service = freshService();
      const old = copy(service, '10.77.5.1');
      await adapter.apply(service, { upsert: [old], remove: [] });
      await readsBack(adapter, service, [old]);

      const bad = [unwritable(copy(service, '10.77.5.2'), 1), unwritable(copy(service, '10.77.5.3'), 2)];
      const good = [copy(service, '10.77.5.4'), copy(service, '10.77.5.5')];
      const outcome = await settle(adapter.apply(service, { upsert: [bad[0]!, good[0]!, bad[1]!, good[1]!], remove: [old] }));
      expect(outcome).toHaveProperty('error');
      const error = (outcome as { error: unknown }).error;
      expect(error).toBeInstanceOf(Error);
      for (const b of bad) expect((error as Error).message).toContain(instanceId(b));
      for (const g of good) expect((error as Error).message).not.toContain(instanceId(g));
      await readsBack(adapter, service, good);
    });

    it('closes: close resolves, watches stop, reads reject', async () => {
      const closing = connect();
      const writer = connect();
      const service = freshService();
      let closedCalls = 0;
      closing.watch(service, () => (closedCalls += 1));
      await closing.listInstances(service);
      await closing.close();
      await closing.close();
      const after = closedCalls;
      let live = 0;
      const other = connect();
      other.watch(service, () => (live += 1));
      await writer.apply(service, { upsert: [copy(service, '10.77.6.1')], remove: [] });
      await waitUntil(async () => live > 0 && (await other.listInstances(service)).length === 1, { message: 'a live watch called' });
      expect(closedCalls).toBe(after);
      expect(await settle(closing.listInstances(service))).toHaveProperty('error');
    });
  });
}
