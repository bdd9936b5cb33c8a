import { GlobError } from './glob-error.js';

/**
 * Globs of service names and metadata keys, compiled to matchers that never backtrack.
 *
 * Syntax: `*` any run of characters (none included), `?` one character, `[abc]` / `[a-z]` one
 * character of a set, `[!abc]` / `[^abc]` one character outside it, `{a,b}` alternatives (nested
 * too) and `{1..3}` / `{a..c}` ranges, `\c` the character `c` itself, and a leading `!` for every
 * name the rest does not match. Names are not paths: `*` and `?` match `/` and a leading `.` like
 * any other character. Matching is case-sensitive.
 *
 * Why not a regular expression or a glob library: both backtrack, and a pattern such as
 * `*a*a*a*a*a*a*a*a*a*a*a*a*b` takes exponential time on a name of 64 `a`s; the names come from
 * the source registry, where anyone who can register picks them. Here braces are expanded at
 * compile time (a bounded number of alternatives), and a pattern is split at its stars into
 * segments of single-character tests: the first segment must match the start of the name, the last
 * one its end, and each one between is searched leftmost after the previous one. Leftmost is always
 * right for star-only patterns, so nothing is ever retried: each pattern is one pass over the
 * name, searching literal segments with `String.indexOf` and the others with shift-and (32
 * single-character tests a word operation, a bisection to find the mask of a character beyond
 * ASCII). A name costs at most about (its length x (the patterns + their length / 32)) steps,
 * whatever the patterns and the name.
 *
 * Deliberately left out: extglobs (`@(a|b)`, `+(a)`, ...) and POSIX classes (`[[:alpha:]]`),
 * which are refused rather than read as literal text.
 */

/** Longest pattern accepted (characters, before brace expansion). */
export const MAX_GLOB_LENGTH = 255;
/** Most alternatives one pattern's braces may expand to. */
export const MAX_GLOB_EXPANSIONS = 64;
/** Most patterns a list may hold once braces are expanded. */
export const MAX_GLOB_LIST_EXPANSIONS = 1024;
/** Most of those that have a wildcard: each one is a pass over the name. */
export const MAX_GLOB_LIST_WILDCARDS = 128;
/**
 * Most characters the patterns of a list that contain a wildcard may have together, once braces
 * are expanded, which bounds the size of the search tables. Patterns without wildcards are exact
 * names, looked up in a set, and do not count.
 */
export const MAX_GLOB_LIST_WEIGHT = 4096;

/** A single-character test: a character code, any character, or a set of ranges. */
type Atom = number | typeof ANY_CHAR | CharSet;
const ANY_CHAR = -1;
interface CharSet {
  /** Inclusive ranges of character codes, as [from, to, from, to, ...]. */
  ranges: number[];
  negated: boolean;
}

/** A run of atoms between two stars; `literal` when every atom is a plain character. */
interface Segment {
  atoms: Atom[];
  literal: string | undefined;
  /** For a segment that is not literal: its shift-and search tables, built on first use. */
  search?: ShiftAnd | undefined;
}

/**
 * Shift-and (bitap) tables of a segment of k atoms: bit j of a character's mask is set when atom j
 * accepts the character; the state after each character of the name has bit j set when the last
 * j + 1 characters match the first j + 1 atoms. One pass over the name finds the leftmost match,
 * in (name length x k / 32) word operations, whatever the name.
 */
interface ShiftAnd {
  /** 32-bit words per mask and state. */
  words: number;
  /** Masks of the character codes below 128, `words` each. */
  ascii: Int32Array;
  /**
   * Codes from 128 up fall into intervals over which every atom answers the same: the first code
   * of each (ascending, the first one 128), and their masks, `words` each.
   */
  wideStarts: number[];
  wide: Int32Array;
  /** Scratch: the state (matching runs one at a time). */
  state: Int32Array;
}

/** One brace-free pattern: the segments between its stars (one segment: no star). */
interface Pattern {
  segments: Segment[];
  /** Characters the segments need at least. */
  length: number;
}

/** A compiled source pattern: its expansions, matched as one, maybe negated. */
interface Compiled {
  negated: boolean;
  exact: Set<string>;
  patterns: Pattern[];
}

/**
 * Compiles `patterns` into one matcher that answers whether a name matches any of them (none:
 * matches nothing; an empty name matches no pattern). Throws {@link GlobError} for a pattern that
 * is malformed, uses unsupported syntax or exceeds the limits above, naming it by its position.
 */
export function compileGlobs(patterns: readonly string[]): (name: string) => boolean {
  const exact = new Set<string>();
  const plain: Pattern[] = [];
  const negated: Compiled[] = [];
  let expansions = 0;
  let wildcards = 0;
  let weight = 0;
  for (const [index, source] of patterns.entries()) {
    const compiled = compileOne(source, index);
    expansions += compiled.exact.size + compiled.patterns.length;
    wildcards += compiled.patterns.length;
    weight += compiled.patterns.reduce((sum, p) => sum + weightOf(p), 0);
    if (expansions > MAX_GLOB_LIST_EXPANSIONS) {
      throw new GlobError(`the patterns expand to more than ${MAX_GLOB_LIST_EXPANSIONS} alternatives together`, index);
    }
    if (wildcards > MAX_GLOB_LIST_WILDCARDS) {
      throw new GlobError(`the patterns expand to more than ${MAX_GLOB_LIST_WILDCARDS} alternatives with wildcards together`, index);
    }
    if (weight > MAX_GLOB_LIST_WEIGHT) {
      throw new GlobError(`the patterns with wildcards are longer than ${MAX_GLOB_LIST_WEIGHT} characters together (braces expanded)`, index);
    }
    if (compiled.negated) negated.push(compiled);
    else {
      for (const name of compiled.exact) exact.add(name);
      plain.push(...compiled.patterns);
    }
  }
  return (name) => {
    if (name === '') return false;
    if (exact.has(name)) return true;
    for (const p of plain) if (matchPattern(p, name)) return true;
    for (const n of negated) if (!n.exact.has(name) && !n.patterns.some((p) => matchPattern(p, name))) return true;
    return false;
  };
}

/**
 * {@link compileGlobs} for the patterns of a field: a {@link GlobError} names the pattern as
 * `field[i] "pattern": ...`, in words an operator can act on.
 */
export function compileGlobsOf(field: string, patterns: readonly string[]): (name: string) => boolean {
  try {
    return compileGlobs(patterns);
  } catch (err) {
    if (!(err instanceof GlobError)) throw err;
    throw new GlobError(`${field}[${err.index}] ${JSON.stringify(patterns[err.index])}: ${err.message}`, err.index);
  }
}

/** What is wrong with the patterns of `field`, as {@link compileGlobsOf} says it, or undefined when they compile. */
export function globsProblem(field: string, patterns: readonly string[] | undefined): string | undefined {
  if (patterns === undefined) return undefined;
  try {
    compileGlobsOf(field, patterns);
    return undefined;
  } catch (err) {
    if (err instanceof GlobError) return err.message;
    throw err;
  }
}

function weightOf(p: Pattern): number {
  return p.segments.reduce((sum, s) => sum + s.atoms.length, 0) + p.segments.length - 1;
}

function compileOne(source: string, index: number): Compiled {
  const fail = (message: string): never => {
    throw new GlobError(message, index);
  };
  if (source.length === 0) fail('a pattern cannot be empty');
  if (source.length > MAX_GLOB_LENGTH) fail(`a pattern has at most ${MAX_GLOB_LENGTH} characters`);
  const negated = source.startsWith('!') && !source.startsWith('!(');
  const exact = new Set<string>();
  const patterns: Pattern[] = [];
  for (const expanded of expandBraces(negated ? source.slice(1) : source, fail)) {
    if (!/[\\*?[(]/.test(expanded)) {
      // No wildcard, escape or extglob: a name.
      exact.add(expanded);
      continue;
    }
    const pattern = parsePattern(expanded, fail);
    const only = pattern.segments[0];
    if (pattern.segments.length === 1 && only?.literal !== undefined) exact.add(only.literal);
    else patterns.push(pattern);
  }
  return { negated, exact, patterns };
}

// ---- brace expansion -------------------------------------------------------------------------

/** The brace-free patterns `source` stands for (escapes and sets kept as written), deduplicated. */
function expandBraces(source: string, fail: (message: string) => never): string[] {
  let i = 0;
  const product = (heads: string[], tails: readonly string[]): string[] => {
    if (heads.length * tails.length > MAX_GLOB_EXPANSIONS) fail(`braces expand to more than ${MAX_GLOB_EXPANSIONS} alternatives`);
    return heads.flatMap((h) => tails.map((t) => h + t));
  };
  /** A sequence up to the end, or (inside braces) up to a top-level `,` or `}`. */
  const sequence = (inGroup: boolean): string[] => {
    let out = [''];
    while (i < source.length) {
      const c = source[i] as string;
      if (c === '\\') {
        if (i + 1 >= source.length) fail('a pattern cannot end with "\\"');
        out = out.map((s) => s + source.slice(i, i + 2));
        i += 2;
      } else if (c === '[') {
        const end = setEnd(source, i);
        if (end < 0) fail('"[" is never closed (write \\[ for the character itself)');
        out = out.map((s) => s + source.slice(i, end + 1));
        i = end + 1;
      } else if (c === '{') {
        i += 1;
        out = product(out, group());
      } else if (inGroup && (c === ',' || c === '}')) {
        break;
      } else if (c === '}') {
        fail('"}" has no "{" (write \\} for the character itself)');
      } else {
        let end = i + 1;
        while (end < source.length && !'\\[{},'.includes(source[end] as string)) end += 1;
        const text = source.slice(i, end);
        out = out.map((s) => s + text);
        i = end;
      }
    }
    return out;
  };
  /** The alternatives of a group whose `{` was just read; reads its `}`. */
  const group = (): string[] => {
    const start = i;
    const alternatives: string[][] = [];
    for (let count = 0; ; ) {
      const alternative = sequence(true);
      count += alternative.length;
      if (count > MAX_GLOB_EXPANSIONS) fail(`braces expand to more than ${MAX_GLOB_EXPANSIONS} alternatives`);
      alternatives.push(alternative);
      if (source[i] === ',') i += 1;
      else if (source[i] === '}') break;
      else fail('"{" is never closed (write \\{ for the character itself)');
    }
    i += 1;
    const only = alternatives[0] as string[];
    if (alternatives.length > 1) return [...new Set(alternatives.flat())];
    const range = rangeOf(source.slice(start, i - 1));
    if (range === 'too many') fail(`braces expand to more than ${MAX_GLOB_EXPANSIONS} alternatives`);
    // A group without a comma or a range is text, as in the shell: `{a}` matches "{a}".
    return range ?? only.map((s) => `\\{${s}\\}`);
  };
  const out = sequence(false);
  return [...new Set(out)];
}

/** The end (index of `]`) of the set opening at `start`, or -1 when it is never closed. */
function setEnd(source: string, start: number): number {
  let i = start + 1;
  if (source[i] === '!' || source[i] === '^') i += 1;
  if (source[i] === ']') i += 1;
  for (; i < source.length; i += 1) {
    if (source[i] === '\\') i += 1;
    else if (source[i] === ']') return i;
  }
  return -1;
}

/** `1..3` or `a..c` as its members (escaped where needed), 'too many', or undefined for no range. */
function rangeOf(body: string): string[] | 'too many' | undefined {
  const numbers = /^(-?\d{1,6})\.\.(-?\d{1,6})$/.exec(body);
  const letters = /^([a-zA-Z])\.\.([a-zA-Z])$/.exec(body);
  let from: number;
  let to: number;
  let show: (n: number) => string;
  if (numbers) {
    [from, to, show] = [Number(numbers[1]), Number(numbers[2]), String];
  } else if (letters) {
    [from, to, show] = [(letters[1] as string).charCodeAt(0), (letters[2] as string).charCodeAt(0), (n) => escapeChar(String.fromCharCode(n))];
  } else {
    return undefined;
  }
  if (Math.abs(to - from) + 1 > MAX_GLOB_EXPANSIONS) return 'too many';
  const step = from <= to ? 1 : -1;
  const out: string[] = [];
  for (let n = from; n !== to + step; n += step) out.push(show(n));
  return out;
}

function escapeChar(c: string): string {
  return /[\\*?[\]{}!]/.test(c) ? `\\${c}` : c;
}

// ---- patterns --------------------------------------------------------------------------------

/** A brace-free pattern as segments between its stars. */
function parsePattern(source: string, fail: (message: string) => never): Pattern {
  const segments: Segment[] = [];
  let atoms: Atom[] = [];
  const close = (): void => {
    const literal = atoms.every((a) => typeof a === 'number' && a >= 0) ? String.fromCharCode(...(atoms as number[])) : undefined;
    segments.push({ atoms, literal });
    atoms = [];
  };
  for (let i = 0; i < source.length; i += 1) {
    const c = source[i] as string;
    if ('@!+*?'.includes(c) && source[i + 1] === '(') fail(`extglobs such as "${c}(...)" are not supported (write \\( for the character itself)`);
    if (c === '\\') {
      i += 1;
      atoms.push(source.charCodeAt(i));
    } else if (c === '*') {
      if (source[i - 1] !== '*' || atoms.length > 0) close();
    } else if (c === '?') {
      atoms.push(ANY_CHAR);
    } else if (c === '[') {
      const end = setEnd(source, i);
      atoms.push(parseSet(source.slice(i + 1, end), fail));
      i = end;
    } else {
      atoms.push(source.charCodeAt(i));
    }
  }
  close();
  return { segments, length: segments.reduce((sum, s) => sum + s.atoms.length, 0) };
}

/** The body of a `[...]` set (between the brackets). */
function parseSet(body: string, fail: (message: string) => never): CharSet {
  let i = 0;
  const negated = body[0] === '!' || body[0] === '^';
  if (negated) i += 1;
  if (/\[[:.=]/.test(body)) fail('POSIX classes such as [[:alpha:]] are not supported');
  // Character codes, with -1 for an unescaped `-` (which may make a range).
  const chars: number[] = [];
  for (; i < body.length; i += 1) {
    if (body[i] === '\\') chars.push(body.charCodeAt(++i));
    else chars.push(body[i] === '-' ? -1 : body.charCodeAt(i));
  }
  const ranges: number[] = [];
  for (let k = 0; k < chars.length; k += 1) {
    const from = chars[k] as number;
    if (from !== -1 && chars[k + 1] === -1 && k + 2 < chars.length) {
      // `a-z`; a `-` first or last is the character itself.
      const to = chars[k + 2] as number;
      if (to === -1) fail('a range in [...] cannot end with "-" (write \\- for the character itself)');
      if (from > to) fail(`the range ${String.fromCharCode(from)}-${String.fromCharCode(to)} in [...] is reversed`);
      ranges.push(from, to);
      k += 2;
    } else {
      const code = from === -1 ? 45 : from;
      ranges.push(code, code);
    }
  }
  if (ranges.length === 0) fail('[] matches no character');
  return { ranges, negated };
}

// ---- matching --------------------------------------------------------------------------------

function matchPattern(p: Pattern, name: string): boolean {
  const { segments } = p;
  if (name.length < p.length) return false;
  const first = segments[0] as Segment;
  if (segments.length === 1) return name.length === first.atoms.length && matchAt(first, name, 0);
  const last = segments[segments.length - 1] as Segment;
  const end = name.length - last.atoms.length;
  if (!matchAt(first, name, 0) || !matchAt(last, name, end)) return false;
  let pos = first.atoms.length;
  for (let k = 1; k < segments.length - 1; k += 1) {
    const segment = segments[k] as Segment;
    const at = find(segment, name, pos, end);
    if (at < 0) return false;
    pos = at + segment.atoms.length;
  }
  return true;
}

/** The leftmost position in [from, end - length] where `segment` matches, or -1. */
function find(segment: Segment, name: string, from: number, end: number): number {
  const last = end - segment.atoms.length;
  if (segment.literal !== undefined) {
    const at = name.indexOf(segment.literal, from);
    return at >= 0 && at <= last ? at : -1;
  }
  if (last < from) return -1;
  segment.search ??= shiftAnd(segment.atoms);
  const search = segment.search;
  const { words, ascii, wide, state } = search;
  const top = words - 1;
  const topBit = 1 << ((segment.atoms.length - 1) & 31);
  state.fill(0);
  for (let pos = from; pos < end; pos += 1) {
    const code = name.charCodeAt(pos);
    const mask = code < 128 ? ascii : wide;
    const offset = code < 128 ? code * words : wideOffset(search, code);
    let carry = 1;
    for (let w = 0; w < words; w += 1) {
      const d = state[w] as number;
      state[w] = ((d << 1) | carry) & (mask[offset + w] as number);
      carry = d >>> 31;
    }
    if (((state[top] as number) & topBit) !== 0) return pos - segment.atoms.length + 1;
  }
  return -1;
}

function shiftAnd(atoms: readonly Atom[]): ShiftAnd {
  const words = (atoms.length + 31) >> 5;
  const ascii = masksOf(atoms, words, Array.from({ length: 128 }, (_, code) => code));
  const bounds = new Set<number>([128]);
  for (const atom of atoms) {
    const ranges = typeof atom === 'number' ? (atom >= 0 ? [atom, atom] : []) : atom.ranges;
    for (let k = 0; k < ranges.length; k += 2) {
      const [from, to] = [ranges[k] as number, ranges[k + 1] as number];
      if (to >= 128) bounds.add(Math.max(from, 128)).add(to + 1);
    }
  }
  const wideStarts = [...bounds].sort((x, y) => x - y);
  return { words, ascii, wideStarts, wide: masksOf(atoms, words, wideStarts), state: new Int32Array(words) };
}

/** The masks of `codes`, one after the other: bit j set where atom j accepts the code. */
function masksOf(atoms: readonly Atom[], words: number, codes: readonly number[]): Int32Array {
  const masks = new Int32Array(codes.length * words);
  for (const [i, code] of codes.entries()) {
    for (const [j, atom] of atoms.entries()) {
      const w = i * words + (j >> 5);
      if (accepts(atom, code)) masks[w] = (masks[w] as number) | (1 << (j & 31));
    }
  }
  return masks;
}

/** The offset in `search.wide` of the mask of `code` (128 or more): its interval's, by bisection. */
function wideOffset(search: ShiftAnd, code: number): number {
  const starts = search.wideStarts;
  let [lo, hi] = [0, starts.length - 1];
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if ((starts[mid] as number) <= code) lo = mid;
    else hi = mid - 1;
  }
  return lo * search.words;
}

function accepts(atom: Atom, code: number): boolean {
  if (atom === ANY_CHAR) return true;
  return typeof atom === 'number' ? atom === code : inSet(atom, code);
}

function matchAt(segment: Segment, name: string, at: number): boolean {
  if (segment.literal !== undefined) return name.startsWith(segment.literal, at);
  const { atoms } = segment;
  for (let k = 0; k < atoms.length; k += 1) if (!accepts(atoms[k] as Atom, name.charCodeAt(at + k))) return false;
  return true;
}

function inSet(set: CharSet, code: number): boolean {
  const { ranges } = set;
  let found = false;
  for (let k = 0; k < ranges.length && !found; k += 2) found = code >= (ranges[k] as number) && code <= (ranges[k + 1] as number);
  return found !== set.negated;
}
