/*
 * Nacos 3.x fuzzy-watch patterns and service keys (FuzzyGroupKeyPattern, NamingUtils.getServiceKey),
 * shared by the adapter (client) and the embedded registry (server). Pure functions; no regular
 * expression is built from input, so matching is linear in the lengths of pattern and name.
 */

/** Separates namespace, group pattern and service pattern in a `groupKeyPattern`. */
export const PATTERN_SPLITTER = '>>';
/** Separates namespace, group and name in a service key. */
export const KEY_SEPARATOR = '@@';
/** Nacos' name of the public namespace; a blank namespace counts as this one. */
const PUBLIC = 'public';
const STAR = '*';

/** A `groupKeyPattern`, split. */
export interface FuzzyPattern {
  namespace: string;
  groupPattern: string;
  servicePattern: string;
}

/**
 * The pattern text `<namespace>>><groupPattern>>><servicePattern>`, as the Java client builds it: a
 * blank namespace becomes `public`; a blank group or service pattern is refused (RangeError).
 */
export function fuzzyPattern(namespace: string, groupPattern: string, servicePattern: string): string {
  if (groupPattern.trim() === '' || servicePattern.trim() === '') throw new RangeError('a fuzzy-watch group or service pattern must not be blank');
  return `${namespace.trim() === '' ? PUBLIC : namespace}${PATTERN_SPLITTER}${groupPattern}${PATTERN_SPLITTER}${servicePattern}`;
}

/**
 * Splits a pattern text as Nacos does (Java `split(">>")`: leftmost non-overlapping separators,
 * trailing empty parts dropped, parts after the third ignored); undefined when fewer than three
 * parts remain (Nacos would fail on such a pattern while matching).
 */
export function parseFuzzyPattern(text: string): FuzzyPattern | undefined {
  const parts: string[] = [];
  let from = 0;
  for (;;) {
    const at = text.indexOf(PATTERN_SPLITTER, from);
    if (at < 0) {
      parts.push(text.slice(from));
      break;
    }
    parts.push(text.slice(from, at));
    from = at + PATTERN_SPLITTER.length;
  }
  while (parts.length > 0 && parts[parts.length - 1] === '') parts.pop();
  if (parts.length < 3) return undefined;
  return { namespace: parts[0] as string, groupPattern: parts[1] as string, servicePattern: parts[2] as string };
}

/**
 * Whether one part of a pattern matches a group or service name (Nacos `itemMatched`,
 * case-sensitive): no `*` is that exact name, `*` everything; otherwise every `*` is removed and
 * the rest must be contained (`*x*`), a suffix (`*x`) or a prefix (`x*`); a `*` only inside (`a*b`)
 * matches nothing.
 */
export function itemMatches(pattern: string, name: string): boolean {
  if (!pattern.includes(STAR)) return pattern === name;
  if (pattern === STAR) return true;
  const starts = pattern.startsWith(STAR);
  const ends = pattern.endsWith(STAR);
  const pure = pattern.split(STAR).join('');
  if (starts && ends) return name.includes(pure);
  if (starts) return name.endsWith(pure);
  if (ends) return name.startsWith(pure);
  return false;
}

/** Whether a service matches a parsed pattern: the namespace exactly (a blank one is `public`), group and name by {@link itemMatches}. */
export function patternMatches(pattern: FuzzyPattern, namespace: string, group: string, name: string): boolean {
  return pattern.namespace === (namespace === '' ? PUBLIC : namespace) && itemMatches(pattern.groupPattern, group) && itemMatches(pattern.servicePattern, name);
}

/** A service key `<namespace>@@<group>@@<name>`. */
export function fuzzyServiceKey(namespace: string, group: string, name: string): string {
  return `${namespace}${KEY_SEPARATOR}${group}${KEY_SEPARATOR}${name}`;
}

/** The parts of a service key; undefined when it has fewer than three. Group and name never hold `@@`, so the name is what follows the second one. */
export function parseServiceKey(key: string): { namespace: string; group: string; name: string } | undefined {
  const first = key.indexOf(KEY_SEPARATOR);
  if (first < 0) return undefined;
  const second = key.indexOf(KEY_SEPARATOR, first + KEY_SEPARATOR.length);
  if (second < 0) return undefined;
  return { namespace: key.slice(0, first), group: key.slice(first + KEY_SEPARATOR.length, second), name: key.slice(second + KEY_SEPARATOR.length) };
}
