import { describe, expect, it } from 'vitest';
import { compileGlobs, globsProblem, MAX_GLOB_EXPANSIONS, MAX_GLOB_LIST_EXPANSIONS, MAX_GLOB_LIST_WEIGHT, MAX_GLOB_LIST_WILDCARDS } from './glob.js';
import { GlobError } from './glob-error.js';

const matches = (pattern: string, name: string): boolean => compileGlobs([pattern])(name);

/**
 * Patterns and names with the answers of picomatch 4 with `{ dot: true }`, a backtracking glob
 * library: the syntax the README documents means what operators know from such libraries.
 */
const PICOMATCH_CASES: ReadonlyArray<[string, string, boolean]> = [
  ['*', 'orders', true],
  ['*', '.hidden', true],
  ['orders-*', 'orders-eu', true],
  ['orders-*', 'orders-', true],
  ['orders-*', 'Orders-eu', false],
  ['*-canary', 'orders-canary', true],
  ['*-canary', 'orders-canary2', false],
  ['pay?', 'pays', true],
  ['pay?', 'payments', false],
  ['pay?', 'pay', false],
  ['consumers:*', 'consumers:com.acme.Orders::', true],
  ['consumers:*', 'providers:com.acme.Orders::', false],
  ['providers:com.acme.*', 'providers:com.acme.Orders:1.0:', true],
  ['*:*', 'providers:x', true],
  ['*:*', 'orders', false],
  ['dubbo.*', 'dubbo.version', true],
  ['dubbo.secret*', 'dubbo.secretKey', true],
  ['dubbo.secret*', 'dubbo.version', false],
  ['a?c', 'abc', true],
  ['a?c', 'a.c', true],
  ['a?c', 'ac', false],
  ['[abc]x', 'bx', true],
  ['[abc]x', 'dx', false],
  ['[a-c]*', 'bz', true],
  ['[a-c]*', 'dz', false],
  ['[^a]*', 'bar', true],
  ['[^a]*', 'abc', false],
  ['*.[ch]', 'main.c', true],
  ['*.[ch]', 'main.o', false],
  ['[]a]x', ']x', true],
  ['[a-]', '-', true],
  ['[.]x', '.x', true],
  ['{a,b}c', 'bc', true],
  ['{a,b}c', 'dc', false],
  ['x{1,2,3}y', 'x2y', true],
  ['x{1,2,3}y', 'x4y', false],
  ['{a,{b,c}}d', 'cd', true],
  ['a{b,c}{d,e}f', 'acef', true],
  ['a{b,c}{d,e}f', 'abef', true],
  ['a{b,c}{d,e}f', 'adf', false],
  ['x{,y}', 'x', true],
  ['x{,y}', 'xy', true],
  ['file{1..3}', 'file2', true],
  ['file{1..3}', 'file4', false],
  ['{a..c}z', 'bz', true],
  ['{a}', '{a}', true],
  ['{a}', 'a', false],
  ['!foo', 'bar', true],
  ['!foo', 'foo', false],
  ['!orders-*', 'orders-eu', false],
  ['!orders-*', 'users', true],
  ['\\*', '*', true],
  ['\\*', 'a', false],
  ['a\\?b', 'a?b', true],
  ['a\\?b', 'axb', false],
  ['*a*a*b', 'aXaYb', true],
  ['*a*a*b', 'ab', false],
  ['**', 'orders', true],
  ['.*', '.x', true],
  ['*.', 'x.', true],
  ['a|b', 'a|b', true],
  ['a|b', 'a', false],
  ['a+b', 'a+b', true],
  ['a]', 'a]', true],
  ['??*', 'ab', true],
  ['??*', 'a', false],
  ['*?', 'a', true],
  ['[0-9][0-9]', '42', true],
  ['[0-9][0-9]', '4a', false],
  ['*o*r*d*', 'oxrxdx', true],
  ['*o*r*d*', 'oxdxrx', false],
  ['ORDERS', 'orders', false],
  ['*', '', false],
];

describe('compileGlobs', () => {
  it.each(PICOMATCH_CASES)('%j against %j is %s, as with picomatch', (pattern, name, expected) => {
    expect(matches(pattern, name)).toBe(expected);
  });

  it('reads a set negated with "!" as the shell does, and parentheses as the characters they are', () => {
    // picomatch 4 reads `[!a]` as "! or a" and `a(b)` as a regular-expression group matching "ab".
    expect(matches('svc-[!a]', 'svc-b')).toBe(true);
    expect(matches('svc-[!a]', 'svc-a')).toBe(false);
    expect(matches('a(b)', 'ab')).toBe(false);
    expect(matches('a(b)', 'a(b)')).toBe(true);
  });

  it('treats "/" as any other character: names are not paths', () => {
    expect(matches('*', 'app.kubernetes.io/name')).toBe(true);
    expect(matches('app.*', 'app.kubernetes.io/name')).toBe(true);
    expect(matches('a?c', 'a/c')).toBe(true);
  });

  it('matches a name against any of the patterns, negated ones included; none matches nothing', () => {
    const keep = compileGlobs(['orders', 'pay-*', '!*-*']);
    expect(['orders', 'pay-eu', 'users', 'user-eu'].filter(keep)).toEqual(['orders', 'pay-eu', 'users']);
    expect(compileGlobs([])('orders')).toBe(false);
  });

  it('escapes inside sets and ranges of escaped characters', () => {
    expect(matches('[\\]]', ']')).toBe(true);
    expect(matches('[a\\-z]', '-')).toBe(true);
    expect(matches('[a\\-z]', 'b')).toBe(false);
    expect(matches('x[*?]', 'x*')).toBe(true);
    expect(matches('x[*?]', 'xa')).toBe(false);
    expect(matches('{Z..a}', '\\')).toBe(true);
  });

  it('agrees with a regular expression of the same pattern on random patterns and names', () => {
    // Small inputs, where backtracking costs nothing; sets and wildcards beyond 32 atoms in a row too.
    let seed = 15;
    const random = (n: number): number => {
      seed = (Math.imul(seed, 1_103_515_245) + 12_345) >>> 0;
      return (seed >>> 16) % n;
    };
    const pieces: ReadonlyArray<[string, string]> = [
      ['a', 'a'],
      ['b', 'b'],
      ['\u00e4', '\u00e4'],
      ['/', '\\/'],
      ['?', '[\\s\\S]'],
      ['*', '[\\s\\S]*'],
      ['[ab]', '[ab]'],
      ['[!a]', '[^a]'],
      ['[^\u00e4-\u00f6]', '[^\u00e4-\u00f6]'],
      ['[a\u00e4]', '[a\u00e4]'],
    ];
    const names = ['a', 'b', '\u00e4', '/', '\u00f6'];
    let compared = 0;
    for (let round = 0; round < 3000; round += 1) {
      // One round in five: a star, then 33 to 40 single-character tests (mostly "?"), then a star.
      const long = random(5) === 0;
      let [glob, regex] = long ? ['*', '[\\s\\S]*'] : ['', ''];
      for (let n = long ? 33 + random(8) : 1 + random(8); n > 0; n -= 1) {
        const [g, r] = (long ? (random(4) > 0 ? pieces[4] : pieces[[0, 1, 2, 6, 7, 8, 9][random(7)] as number]) : pieces[random(pieces.length)]) as [string, string];
        glob += g;
        regex += r;
      }
      if (long) [glob, regex] = [`${glob}*`, `${regex}[\\s\\S]*`];
      const expected = new RegExp(`^${regex}$`);
      const match = compileGlobs([glob]);
      for (let k = 0; k < 20; k += 1) {
        let name = '';
        for (let n = long ? 30 + random(30) : 1 + random(12); n > 0; n -= 1) name += names[random(names.length)];
        expect(match(name), `${glob} against ${name}`).toBe(expected.test(name));
        compared += 1;
      }
    }
    expect(compared).toBe(60_000);
  });

  it('answers the backtracking pattern at once, however long the name', () => {
    const hostile = compileGlobs(['*a*a*a*a*a*a*a*a*a*a*a*a*b']);
    expect(hostile('a'.repeat(64))).toBe(false);
    expect(hostile('a'.repeat(1_000_000))).toBe(false);
    expect(hostile(`${'a'.repeat(1_000_000)}b`)).toBe(true);
    expect(hostile(`${'a'.repeat(11)}b`)).toBe(false);
    // Segments with single-character tests are searched leftmost too, never retried.
    const sets = compileGlobs(['*[ab]?[ab]?[ab]?[ab]?[ab]?[ab]?c*[ab]?[ab]?d']);
    expect(sets('ab'.repeat(500_000))).toBe(false);
    expect(sets(`${'ab'.repeat(1000)}ababababababc${'ab'.repeat(1000)}abad`)).toBe(true);
  });
});

describe('pattern problems', () => {
  it.each([
    ['[abc', /"\[" is never closed/],
    ['{a,b', /"\{" is never closed/],
    ['a}', /"\}" has no "\{"/],
    ['a\\', /cannot end with "\\"/],
    ['[z-a]', /the range z-a in \[\.\.\.\] is reversed/],
    ['[a-\\-]', /reversed/],
    ['@(a|b)', /extglobs such as "@\(\.\.\.\)" are not supported/],
    ['!(a)', /extglobs/],
    ['+(a)', /extglobs/],
    ['*(a)', /extglobs/],
    ['[[:alpha:]]', /POSIX classes/],
    ['', /cannot be empty/],
    ['a'.repeat(256), /at most 255 characters/],
    ['{1..65}', new RegExp(`more than ${MAX_GLOB_EXPANSIONS} alternatives`)],
    ['{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}', /more than 64 alternatives/],
    [`{${'a,'.repeat(64)}b}`, /more than 64 alternatives/],
    ['{{1..64},x}', /more than 64 alternatives/],
  ])('refuses %j', (pattern, message) => {
    expect(() => compileGlobs(['ok', pattern])).toThrow(GlobError);
    expect(globsProblem('options.include', ['ok', pattern])).toMatch(new RegExp(`^options\\.include\\[1\\] .*${message.source}`));
  });

  it('accepts what the syntax allows, the backtracking pattern included', () => {
    expect(globsProblem('options.include', ['*a*a*a*a*a*a*a*a*a*a*a*a*b', 'a\\(b\\)', '{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}', '{1..64}'])).toBeUndefined();
    expect(globsProblem('options.include', undefined)).toBeUndefined();
    expect(globsProblem('options.include', Array.from({ length: 256 }, (_, i) => `a-quite-long-service-name-${i}`.repeat(8)))).toBeUndefined();
  });

  it('bounds a whole list: alternatives, those with wildcards, and the length of patterns with wildcards', () => {
    const alternatives = Array.from({ length: MAX_GLOB_LIST_EXPANSIONS / 64 + 1 }, (_, i) => `s${i}-{1..64}`);
    expect(globsProblem('options.exclude', alternatives)).toMatch(new RegExp(`^options\\.exclude\\[16\\] .*more than ${MAX_GLOB_LIST_EXPANSIONS} alternatives together`));
    const wildcards = Array.from({ length: MAX_GLOB_LIST_WILDCARDS / 32 + 1 }, (_, i) => `s${i}-{1..32}*`);
    expect(globsProblem('options.exclude', wildcards)).toMatch(new RegExp(`^options\\.exclude\\[4\\] .*more than ${MAX_GLOB_LIST_WILDCARDS} alternatives with wildcards together`));
    expect(globsProblem('options.exclude', wildcards.slice(1))).toBeUndefined();
    const long = Array.from({ length: Math.ceil(MAX_GLOB_LIST_WEIGHT / 200) + 1 }, (_, i) => `${i}*${'x'.repeat(198)}`);
    const err = (() => {
      try {
        compileGlobs(long);
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    expect(err).toBeInstanceOf(GlobError);
    expect(err).toMatchObject({ code: 'invalid_pattern', message: expect.stringMatching(/longer than 4096 characters together/) });
  });
});
