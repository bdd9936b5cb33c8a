import { describe, expect, it } from 'vitest';
import { fuzzyPattern, fuzzyServiceKey, itemMatches, parseFuzzyPattern, parseServiceKey, patternMatches } from './fuzzy-pattern.js';

describe('fuzzy-watch patterns', () => {
  it('builds the pattern as the Java client does: a blank namespace is public, blank parts are refused', () => {
    expect(fuzzyPattern('public', 'DEFAULT_GROUP', 'order*')).toBe('public>>DEFAULT_GROUP>>order*');
    expect(fuzzyPattern('', '*', '*')).toBe('public>>*>>*');
    expect(() => fuzzyPattern('public', ' ', '*')).toThrow(RangeError);
    expect(() => fuzzyPattern('public', '*', '')).toThrow(RangeError);
  });

  it('splits as Java split(">>") does: trailing empty parts dropped, fewer than three parts refused, extra parts ignored', () => {
    expect(parseFuzzyPattern('ns>>g*>>s')).toEqual({ namespace: 'ns', groupPattern: 'g*', servicePattern: 's' });
    expect(parseFuzzyPattern('ns>>g>>')).toBeUndefined();
    expect(parseFuzzyPattern('ns>>g')).toBeUndefined();
    expect(parseFuzzyPattern('no separator')).toBeUndefined();
    expect(parseFuzzyPattern('ns>>g>>s>>x')).toEqual({ namespace: 'ns', groupPattern: 'g', servicePattern: 's' });
    // Leftmost, non-overlapping: `>>>` leaves a `>` in the next part.
    expect(parseFuzzyPattern('ns>>>g>>s')).toEqual({ namespace: 'ns', groupPattern: '>g', servicePattern: 's' });
    expect(parseFuzzyPattern('>>g>>s')).toEqual({ namespace: '', groupPattern: 'g', servicePattern: 's' });
  });

  it('matches one part as Nacos itemMatched: exact, *, contains, suffix, prefix; a star only inside matches nothing', () => {
    expect(itemMatches('orders', 'orders')).toBe(true);
    expect(itemMatches('orders', 'Orders')).toBe(false);
    expect(itemMatches('*', '')).toBe(true);
    expect(itemMatches('*', 'anything')).toBe(true);
    expect(itemMatches('*der*', 'orders')).toBe(true);
    expect(itemMatches('*der*', 'users')).toBe(false);
    expect(itemMatches('*ers', 'orders')).toBe(true);
    expect(itemMatches('*ers', 'ordersX')).toBe(false);
    expect(itemMatches('ord*', 'orders')).toBe(true);
    expect(itemMatches('ord*', 'xorders')).toBe(false);
    expect(itemMatches('o*s', 'orders')).toBe(false);
    // Every star is removed before comparing.
    expect(itemMatches('*a*b*', 'xaby')).toBe(true);
    expect(itemMatches('*a*b*', 'axb')).toBe(false);
    expect(itemMatches('**', 'x')).toBe(true);
    // No regular expression: metacharacters are plain text, and a long name is a linear scan.
    expect(itemMatches('a.c*', 'abc')).toBe(false);
    expect(itemMatches('a.c*', 'a.cd')).toBe(true);
    expect(itemMatches(`*${'a'.repeat(50)}b*`, 'a'.repeat(100_000))).toBe(false);
  });

  it('matches the namespace exactly (a blank one is public), group and name by pattern', () => {
    const p = parseFuzzyPattern('public>>*>>ord*');
    if (!p) throw new Error('pattern');
    expect(patternMatches(p, 'public', 'G', 'orders')).toBe(true);
    expect(patternMatches(p, '', 'G', 'orders')).toBe(true);
    expect(patternMatches(p, 'staging', 'G', 'orders')).toBe(false);
    expect(patternMatches(p, 'public', 'G', 'users')).toBe(false);
    const star = parseFuzzyPattern('*>>*>>*');
    if (!star) throw new Error('pattern');
    expect(patternMatches(star, 'public', 'G', 'orders')).toBe(false);
  });

  it('writes and reads service keys ns@@group@@name', () => {
    expect(fuzzyServiceKey('public', 'DEFAULT_GROUP', 'orders')).toBe('public@@DEFAULT_GROUP@@orders');
    expect(parseServiceKey('public@@DEFAULT_GROUP@@orders')).toEqual({ namespace: 'public', group: 'DEFAULT_GROUP', name: 'orders' });
    expect(parseServiceKey('public@@orders')).toBeUndefined();
  });
});
