import { describe, expect, it } from 'vitest';
import type { ServiceRef } from './wire.js';
import { WatchIndex } from './watch-index.js';

const watch = (namespaceId: string, group: string, name: string, tag = ''): { ref: ServiceRef; tag: string } => ({ ref: { namespaceId, group, name }, tag });
const tags = (ws: Array<{ tag: string }>): string[] => ws.map((w) => w.tag);
/** An index holding `watches`, added in order. */
function indexOf(...watches: Array<ReturnType<typeof watch>>): WatchIndex<ReturnType<typeof watch>> {
  const index = new WatchIndex<ReturnType<typeof watch>>();
  for (const w of watches) index.add(w);
  return index;
}

describe('WatchIndex', () => {
  it('finds a watch by namespace, group and name, and no other', () => {
    const index = indexOf();
    const orders = watch('public', 'G', 'orders', 'a');
    index.add(orders);
    expect(index.get({ namespaceId: 'public', group: 'G', name: 'orders' })).toBe(orders);
    expect(index.get({ namespaceId: 'dev', group: 'G', name: 'orders' })).toBeUndefined();
    expect(index.get({ namespaceId: 'public', group: 'H', name: 'orders' })).toBeUndefined();
    expect(index.get({ namespaceId: 'public', group: 'G', name: 'users' })).toBeUndefined();
    // Group and name are not joined into one string: `G@@a` + `b` is not `G` + `a@@b`.
    index.add(watch('public', 'G@@a', 'b', 'x'));
    expect(index.get({ namespaceId: 'public', group: 'G', name: 'a@@b' })).toBeUndefined();
    expect(index.size).toBe(2);
  });

  it('holds one watch per namespace of a name, in the order they came, and forgets each alone', () => {
    const pub = watch('public', 'G', 'orders', 'public');
    const dev = watch('dev', 'G', 'orders', 'dev');
    const test = watch('test', 'G', 'orders', 'test');
    const index = indexOf(pub, dev, test);
    expect(tags(index.named('G', 'orders'))).toEqual(['public', 'dev', 'test']);
    expect(index.get({ namespaceId: 'dev', group: 'G', name: 'orders' })).toBe(dev);
    expect(index.size).toBe(3);
    index.delete(dev);
    index.delete(pub);
    expect(tags(index.named('G', 'orders'))).toEqual(['test']);
    expect(index.get({ namespaceId: 'test', group: 'G', name: 'orders' })).toBe(test);
    index.add(pub);
    expect(tags(index.named('G', 'orders'))).toEqual(['test', 'public']);
    index.delete(test);
    index.delete(pub);
    expect(index.named('G', 'orders')).toEqual([]);
    expect(index.size).toBe(0);
    expect([...index.values()]).toEqual([]);
  });

  it('replaces a watch of the same service, and deleting a watch that is not the one held changes nothing', () => {
    const index = indexOf();
    const first = watch('public', 'G', 'orders', 'first');
    const second = watch('public', 'G', 'orders', 'second');
    index.add(first);
    index.add(second);
    expect(index.size).toBe(1);
    expect(index.get(first.ref)).toBe(second);
    index.delete(first);
    expect(index.get(first.ref)).toBe(second);
    index.add(watch('dev', 'G', 'orders', 'dev'));
    index.delete(first);
    expect(index.size).toBe(2);
    index.delete(watch('none', 'X', 'y'));
    expect(index.size).toBe(2);
  });

  it('answers lists of its own: changing the index while going through it skips nothing', () => {
    const x = watch('a', 'G', 'orders', 'x');
    const y = watch('b', 'G', 'orders', 'y');
    const index = indexOf(x, y, watch('a', 'G', 'users', 'z'));
    const named: string[] = [];
    for (const w of index.named('G', 'orders')) {
      index.delete(y);
      named.push(w.tag);
    }
    expect(named).toEqual(['x', 'y']);
    index.add(y);
    const all: string[] = [];
    for (const w of index.values()) {
      index.delete(w);
      all.push(w.tag);
    }
    expect(all.sort()).toEqual(['x', 'y', 'z']);
    expect(index.size).toBe(0);
  });
});
