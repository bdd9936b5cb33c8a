import { describe, expect, it } from 'vitest';
import { SourceAddresses } from './source-addresses.js';

describe('SourceAddresses', () => {
  it('answers which service syncs list an address, following every update', () => {
    const index = new SourceAddresses();
    index.set('t1|s1', ['11.11.11.11', '22.22.22.22']);
    index.set('t1|s2', ['22.22.22.22']);
    index.set('t2|s1', ['33.33.33.33', '33.33.33.33']);
    expect(index.keysOf(['22.22.22.22'])).toEqual(['t1|s1', 't1|s2']);
    expect(index.keysOf(['11.11.11.11', '33.33.33.33'])).toEqual(['t1|s1', 't2|s1']);
    index.set('t1|s1', ['44.44.44.44']);
    expect(index.keysOf(['11.11.11.11', '22.22.22.22'])).toEqual(['t1|s2']);
    expect(index.keysOf(['44.44.44.44'])).toEqual(['t1|s1']);
    expect(index.keysOf(['55.55.55.55'])).toEqual([]);
  });

  it('forgets the service syncs of a removed task', () => {
    const index = new SourceAddresses();
    index.set('t1|s1', ['11.11.11.11']);
    index.set('t10|s1', ['11.11.11.11']);
    index.forget('t1|');
    expect(index.keysOf(['11.11.11.11'])).toEqual(['t10|s1']);
    expect(index.size).toBe(1);
  });
});
