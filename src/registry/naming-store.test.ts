import { describe, expect, it } from 'vitest';
import { NONE_SELECTOR, parseSelector } from './label-selector.js';
import { NamingError, NamingStore, type InstanceInput, type PublishedInput, type ServiceChange } from './naming-store.js';

const instance = (ip: string, extra: Partial<InstanceInput> = {}): InstanceInput => ({
  ip,
  port: 80,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  clusterName: 'DEFAULT',
  metadata: {},
  ...extra,
});

const published = (ip: string, extra: Partial<PublishedInput> = {}): PublishedInput => ({
  ...instance(ip),
  instanceId: `${ip}#80#DEFAULT#G@@s`,
  ...extra,
});

const ips = (store: NamingStore, name = 's') =>
  [...(store.getService('public', 'G', name)?.instances.values() ?? [])].map((i) => i.ip).sort();

function storeWithClock() {
  let now = 1_000_000;
  const store = new NamingStore({ unhealthyAfterMs: 15_000, expireAfterMs: 30_000, emptyServiceTtlMs: 60_000 }, () => now);
  const changes: ServiceChange[] = [];
  store.on('change', (c) => changes.push(c));
  return { store, changes, advance: (ms: number) => (now += ms) };
}

describe('NamingStore', () => {
  it('marks a silent ephemeral instance unhealthy, then removes it; persistent ones stay', () => {
    const { store, advance } = storeWithClock();
    store.register('public', 'G', 'eph', instance('10.0.0.1'));
    store.register('public', 'G', 'per', instance('10.0.0.2', { ephemeral: false }));
    advance(14_999);
    store.sweep();
    expect(store.getService('public', 'G', 'eph')?.instances.get('10.0.0.1#80#DEFAULT')?.healthy).toBe(true);
    advance(1);
    store.sweep();
    expect(store.getService('public', 'G', 'eph')?.instances.get('10.0.0.1#80#DEFAULT')?.healthy).toBe(false);
    advance(15_000);
    store.sweep();
    expect(store.getService('public', 'G', 'eph')?.instances.size).toBe(0);
    expect(store.getService('public', 'G', 'per')?.instances.size).toBe(1);
  });

  it('revives an unhealthy instance on a beat and keeps it while beats come', () => {
    const { store, advance } = storeWithClock();
    store.register('public', 'G', 's', instance('10.0.0.1'));
    advance(20_000);
    store.sweep();
    expect(store.beat('public', 'G', 's', '10.0.0.1', 80, 'DEFAULT')).toBe(true);
    expect(store.getService('public', 'G', 's')?.instances.get('10.0.0.1#80#DEFAULT')).toMatchObject({ healthy: true, beats: 1 });
    advance(20_000);
    store.sweep();
    expect(store.getService('public', 'G', 's')?.instances.size).toBe(1);
    expect(store.beat('public', 'G', 's', '10.0.0.9', 80, 'DEFAULT')).toBe(false);
  });

  it('emits a change only when something a reader sees changed', () => {
    const { store, changes, advance } = storeWithClock();
    store.register('public', 'G', 's', instance('10.0.0.1', { metadata: { a: '1', b: '2' } }));
    expect(changes).toHaveLength(1);
    store.register('public', 'G', 's', instance('10.0.0.1', { metadata: { b: '2', a: '1' } }));
    store.beat('public', 'G', 's', '10.0.0.1', 80, 'DEFAULT');
    expect(changes).toHaveLength(1);
    const before = store.getService('public', 'G', 's')?.lastRefTime ?? 0;
    store.update('public', 'G', 's', instance('10.0.0.1', { weight: 2 }));
    expect(changes).toEqual([
      { namespaceId: 'public', groupedName: 'G@@s' },
      { namespaceId: 'public', groupedName: 'G@@s' },
    ]);
    expect(store.getService('public', 'G', 's')?.lastRefTime).toBeGreaterThan(before);
    advance(1);
    expect(store.deregister('public', 'G', 's', '10.0.0.1', 80, 'DEFAULT')).toBe(true);
    expect(store.deregister('public', 'G', 's', '10.0.0.1', 80, 'DEFAULT')).toBe(false);
    expect(changes).toHaveLength(3);
  });

  it('tells when a service gets its first instance and loses its last, from HTTP, gRPC publishes and expiry alike', () => {
    let now = 1_000;
    const store = new NamingStore({ unhealthyAfterMs: 100, expireAfterMs: 200 }, () => now);
    const seen: string[] = [];
    store.on('populated', (c) => seen.push(`+${c.namespaceId}/${c.groupedName}`));
    store.on('emptied', (c) => seen.push(`-${c.namespaceId}/${c.groupedName}`));
    store.createService('public', 'G', 'empty', { protectThreshold: 0, metadata: {}, selector: NONE_SELECTOR });
    store.register('public', 'G', 's', instance('10.0.0.1'));
    store.register('public', 'G', 's', instance('10.0.0.2'));
    store.deregister('public', 'G', 's', '10.0.0.1', 80, 'DEFAULT');
    store.deregister('public', 'G', 's', '10.0.0.2', 80, 'DEFAULT');
    store.publish('conn-1', 'public', 'G', 'p', []);
    store.publish('conn-1', 'public', 'G', 'p', [published('10.0.0.3')]);
    store.publish('conn-2', 'public', 'G', 'p', [published('10.0.0.3')]);
    store.unpublishAll('conn-1');
    store.unpublishAll('conn-2');
    store.register('public', 'G', 'x', instance('10.0.0.4'));
    now += 300;
    store.sweep();
    expect(seen).toEqual(['+public/G@@s', '-public/G@@s', '+public/G@@p', '-public/G@@p', '+public/G@@x', '-public/G@@x']);
  });

  it('refuses to mix ephemeral and persistent instances in one service, and to update what is missing', () => {
    const { store } = storeWithClock();
    store.register('public', 'G', 's', instance('10.0.0.1'));
    expect(() => store.register('public', 'G', 's', instance('10.0.0.2', { ephemeral: false }))).toThrow(NamingError);
    expect(store.getService('public', 'G', 's')?.instances.size).toBe(1);
    expect(() => store.update('public', 'G', 's', instance('10.0.0.3'))).toThrow(/instance not exist/);
  });

  it('drops a service that stayed empty past the TTL', () => {
    const { store, advance } = storeWithClock();
    store.register('dev', 'G', 's', instance('10.0.0.1'));
    store.deregister('dev', 'G', 's', '10.0.0.1', 80, 'DEFAULT');
    advance(59_999);
    store.sweep();
    expect(store.listServices('dev').map((s) => s.name)).toEqual(['s']);
    advance(1);
    store.sweep();
    expect(store.listServices('dev')).toEqual([]);
    expect(store.listNamespaces().map((n) => n.id)).toEqual(['public']);
  });

  it('creates, updates and deletes services; instances keep the settings, an existing name is refused', () => {
    const { store, changes, advance } = storeWithClock();
    const selector = parseSelector('{"type":"label","expression":"CONSUMER.label.site = PROVIDER.label.site"}');
    store.createService('public', 'G', 'svc', { protectThreshold: 0.5, metadata: { owner: 'team-a' }, selector });
    expect(changes).toEqual([{ namespaceId: 'public', groupedName: 'G@@svc' }]);
    expect(store.listServices('public').map((s) => s.name)).toEqual(['svc']);
    expect(() => store.createService('public', 'G', 'svc', { protectThreshold: 0, metadata: {}, selector: NONE_SELECTOR })).toThrow(
      expect.objectContaining({ code: 'service-exists' }),
    );

    store.register('public', 'G', 'svc', instance('10.0.0.1'));
    expect(store.getService('public', 'G', 'svc')).toMatchObject({ protectThreshold: 0.5, metadata: { owner: 'team-a' }, selector });
    expect(() => store.deleteService('public', 'G', 'svc')).toThrow(/is not empty/);

    advance(1);
    const before = store.getService('public', 'G', 'svc')?.lastRefTime ?? 0;
    store.updateService('public', 'G', 'svc', { protectThreshold: 0, metadata: {}, selector: NONE_SELECTOR });
    expect(store.getService('public', 'G', 'svc')).toMatchObject({ protectThreshold: 0, metadata: {}, selector: NONE_SELECTOR });
    expect(store.getService('public', 'G', 'svc')?.lastRefTime).toBeGreaterThan(before);
    expect(store.getService('public', 'G', 'svc')?.instances.size).toBe(1);
    expect(() => store.updateService('public', 'G', 'nope', { protectThreshold: 0, metadata: {}, selector: NONE_SELECTOR })).toThrow(
      expect.objectContaining({ code: 'service-not-found' }),
    );

    store.deregister('public', 'G', 'svc', '10.0.0.1', 80, 'DEFAULT');
    const changesBefore = changes.length;
    store.deleteService('public', 'G', 'svc');
    expect(changes).toHaveLength(changesBefore + 1);
    expect(store.getService('public', 'G', 'svc')).toBeUndefined();
    expect(() => store.deleteService('public', 'G', 'svc')).toThrow(expect.objectContaining({ code: 'service-not-found' }));
  });

  it('drops a service created empty once the empty-service TTL passed without instances', () => {
    const { store, advance } = storeWithClock();
    store.createService('public', 'G', 'idle', { protectThreshold: 0, metadata: {}, selector: NONE_SELECTOR });
    store.createService('public', 'G', 'used', { protectThreshold: 0, metadata: {}, selector: NONE_SELECTOR });
    store.register('public', 'G', 'used', instance('10.0.0.1', { ephemeral: false }));
    advance(60_000);
    store.sweep();
    expect(store.listServices('public').map((s) => s.name)).toEqual(['used']);
  });

  it('refuses expiry settings where removal comes before unhealthy', () => {
    expect(() => new NamingStore({ unhealthyAfterMs: 10, expireAfterMs: 5 })).toThrow(RangeError);
  });

  describe('service list', () => {
    it('lists and pages services in collation order as they come and go, whatever order they came in', () => {
      const { store, advance } = storeWithClock();
      const names = ['b', 'A', 'a', 'c10', 'c2', 'Z', 'é', 'e', 'f'];
      for (const [k, name] of names.entries()) store.register('public', 'G', name, instance(`10.0.1.${k}`, { ephemeral: false }));
      store.publish('c1', 'public', 'H', 'other', [published('10.0.2.1')]);
      store.register('dev', 'G', 'elsewhere', instance('10.0.3.1', { ephemeral: false }));
      const sorted = [...names].sort((x, y) => x.localeCompare(y));
      expect(store.listServices('public', 'G').map((s) => s.name)).toEqual(sorted);
      expect(store.listServices('public').map((s) => `${s.groupName}/${s.name}`)).toEqual([...sorted.map((n) => `G/${n}`), 'H/other']);
      expect(store.serviceNamesPage('public', 'G', 1, 4)).toEqual({ count: names.length, names: sorted.slice(0, 4) });
      expect(store.serviceNamesPage('public', 'G', 3, 4)).toEqual({ count: names.length, names: sorted.slice(8) });
      expect(store.serviceNamesPage('public', 'G', 4, 4)).toEqual({ count: names.length, names: [] });
      expect(store.serviceNamesPage('public', 'g', 1, 4)).toEqual({ count: 0, names: [] });

      store.deregister('public', 'G', 'c2', '10.0.1.4', 80, 'DEFAULT');
      store.deleteService('public', 'G', 'c2');
      store.deregister('public', 'G', 'A', '10.0.1.1', 80, 'DEFAULT');
      advance(60_000);
      store.sweep();
      const left = sorted.filter((n) => n !== 'c2' && n !== 'A');
      expect(store.listServices('public', 'G').map((s) => s.name)).toEqual(left);
      expect(store.serviceNamesPage('public', 'G', 2, 3)).toEqual({ count: left.length, names: left.slice(3, 6) });
      store.register('public', 'G', 'c2', instance('10.0.1.4', { ephemeral: false }));
      expect(store.listServices('public', 'G').map((s) => s.name)).toEqual([...left, 'c2'].sort((x, y) => x.localeCompare(y)));

      store.deregister('dev', 'G', 'elsewhere', '10.0.3.1', 80, 'DEFAULT');
      store.deleteService('dev', 'G', 'elsewhere');
      expect(store.listServices('dev')).toEqual([]);
      expect(store.serviceNamesPage('dev', 'G', 1, 10)).toEqual({ count: 0, names: [] });
    });
  });

  describe('publish sets', () => {
    it('holds one set per publisher per service; equal instances show once until the last publisher withdraws', () => {
      const { store, changes } = storeWithClock();
      store.publish('c1', 'public', 'G', 's', [published('10.0.0.1', { metadata: { a: '1', b: '2' } }), published('10.0.0.2')]);
      store.publish('c2', 'public', 'G', 's', [published('10.0.0.1', { metadata: { b: '2', a: '1' } })]);
      expect(ips(store)).toEqual(['10.0.0.1', '10.0.0.2']);
      expect(store.publishSetCount()).toBe(2);
      const seen = changes.length;
      store.unpublish('c1', 'public', 'G', 's');
      expect(ips(store)).toEqual(['10.0.0.1']);
      expect(changes).toHaveLength(seen + 1);
      store.unpublishAll('c2');
      expect(ips(store)).toEqual([]);
      expect(store.publishSetCount()).toBe(0);
    });

    it('shows instances that differ in any field side by side, and a repeat publish changes nothing', () => {
      const { store, changes } = storeWithClock();
      store.publish('c1', 'public', 'G', 's', [published('10.0.0.1')]);
      store.publish('c2', 'public', 'G', 's', [published('10.0.0.1', { weight: 2 })]);
      store.register('public', 'G', 's', instance('10.0.0.1'));
      expect(ips(store)).toEqual(['10.0.0.1', '10.0.0.1', '10.0.0.1']);
      const seen = changes.length;
      store.publish('c1', 'public', 'G', 's', [published('10.0.0.1')]);
      expect(changes).toHaveLength(seen);
    });

    it('never expires published instances, and refuses them in a persistent service', () => {
      const { store, advance } = storeWithClock();
      store.publish('c1', 'public', 'G', 's', [published('10.0.0.1')]);
      advance(60_000);
      store.sweep();
      expect(ips(store)).toEqual(['10.0.0.1']);
      store.register('public', 'G', 'p', instance('10.0.0.2', { ephemeral: false }));
      expect(() => store.publish('c1', 'public', 'G', 'p', [published('10.0.0.3')])).toThrow(NamingError);
      expect(() => store.register('public', 'G', 's', instance('10.0.0.4', { ephemeral: false }))).toThrow(NamingError);
    });

    it('keeps an empty set as an entry: the service is listed until the empty-service cleanup', () => {
      const { store, advance } = storeWithClock();
      store.publish('c1', 'public', 'G', 'empty', []);
      expect(store.listServices('public').map((s) => s.name)).toEqual(['empty']);
      expect(store.publishSetCount()).toBe(1);
      advance(60_000);
      store.sweep();
      expect(store.listServices('public')).toEqual([]);
    });
  });
});
