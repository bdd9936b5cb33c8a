import { describe, expect, it } from 'vitest';
import { GroupedIndex } from './grouped-index.js';

describe('GroupedIndex', () => {
  it('holds one watch per name or several, in the order they came, and forgets them', () => {
    const index = new GroupedIndex<string>();
    index.add('G@@orders', 'public');
    index.add('G@@orders', 'public');
    expect(index.get('G@@orders')).toEqual(['public']);
    index.add('G@@orders', 'dev');
    index.add('G@@orders', 'test');
    expect(index.get('G@@orders')).toEqual(['public', 'dev', 'test']);
    index.delete('G@@orders', 'dev');
    index.delete('G@@orders', 'public');
    expect(index.get('G@@orders')).toEqual(['test']);
    index.add('G@@orders', 'public');
    expect(index.get('G@@orders')).toEqual(['test', 'public']);
    index.delete('G@@orders', 'test');
    index.delete('G@@orders', 'public');
    expect(index.get('G@@orders')).toEqual([]);
    index.delete('G@@none', 'x');
    expect(index.get('G@@none')).toEqual([]);
  });

  it('answers a list of its own: changing the index while going through it skips nothing', () => {
    const index = new GroupedIndex<string>();
    index.add('G@@a', 'x');
    index.add('G@@a', 'y');
    const seen: string[] = [];
    for (const v of index.get('G@@a')) {
      index.delete('G@@a', 'y');
      seen.push(v);
    }
    expect(seen).toEqual(['x', 'y']);
  });
});
