/**
 * The service selector of Nacos 2.x/3.x: parsing of the `selector` JSON a service carries and the
 * evaluation of its `label` type against consumer and provider labels. Pure: no I/O, no clock; the
 * label lookups are passed in.
 */

/** A service selector as the registry stores it. `none` (the default) selects every provider. */
export type ServiceSelector =
  | { readonly type: 'none' }
  | {
      readonly type: 'label';
      /** The expression as given (whitespace kept), reported back by `GET /service`. */
      readonly expression: string;
      /** The label names the expression compares, in expression order, without duplicates. */
      readonly labels: readonly string[];
    };

export const NONE_SELECTOR: ServiceSelector = Object.freeze({ type: 'none' });

/** Where the labels of an IP come from: a CMDB (see `CmdbCache` in src/cmdb), or nothing. */
export interface LabelSource {
  labelsOf(ip: string): Readonly<Record<string, string>>;
}

/** What the selector needs to know about a provider. */
export interface SelectorProvider {
  ip: string;
  metadata: Readonly<Record<string, string>>;
}

/**
 * A selector that cannot be used; `clause` is the offending part of the expression (empty when the
 * problem is the JSON or the type). The HTTP layer answers 400 with the message.
 */
export class SelectorError extends Error {
  override readonly name = 'SelectorError';
  constructor(
    readonly clause: string,
    message: string,
  ) {
    super(message);
  }
}

const CONSUMER_PREFIX = 'CONSUMER.label.';
const PROVIDER_PREFIX = 'PROVIDER.label.';

/**
 * The label names of an expression: clauses joined by `&`, each `CONSUMER.label.X = PROVIDER.label.X`
 * with the same X on both sides; whitespace anywhere is ignored (Nacos deletes it before parsing).
 * A blank expression compares nothing (the selector then selects every provider, as in Nacos).
 * Anything else, an empty clause included (`a & & b`, a trailing `&`), throws {@link SelectorError}
 * naming the clause.
 */
export function parseLabelExpression(expression: string): string[] {
  const compact = expression.replace(/\s+/g, '');
  if (compact === '') return [];
  const labels: string[] = [];
  for (const clause of compact.split('&')) {
    const label = labelOfClause(clause);
    if (!labels.includes(label)) labels.push(label);
  }
  return labels;
}

function labelOfClause(clause: string): string {
  const fail = (why: string): never => {
    throw new SelectorError(clause, `Selector parses failed: clause '${clause}' ${why}; expected CONSUMER.label.X = PROVIDER.label.X joined by &`);
  };
  if (clause === '') fail('is empty');
  const parts = clause.split('=');
  if (parts.length !== 2) fail(parts.length < 2 ? 'has no =' : 'has more than one =');
  const [left, right] = parts as [string, string];
  if (!left.startsWith(CONSUMER_PREFIX)) fail(`does not start with ${CONSUMER_PREFIX}`);
  if (!right.startsWith(PROVIDER_PREFIX)) fail(`does not compare with ${PROVIDER_PREFIX}`);
  const consumerLabel = left.slice(CONSUMER_PREFIX.length);
  const providerLabel = right.slice(PROVIDER_PREFIX.length);
  if (consumerLabel === '' || providerLabel === '') fail('names no label');
  if (consumerLabel !== providerLabel) fail(`compares different labels (${consumerLabel}, ${providerLabel})`);
  return consumerLabel;
}

/**
 * Parses the `selector` parameter of the service API: JSON `{"type":"label","expression":"..."}` or
 * `{"type":"none"}`; blank means none. Like Nacos it also accepts the JSON URL-encoded once more.
 * Throws {@link SelectorError} for text that is not a JSON object, a missing or unknown type, or an
 * expression that does not parse.
 */
export function parseSelector(text: string | undefined): ServiceSelector {
  if (text === undefined || text.trim() === '') return NONE_SELECTOR;
  const raw = parseJsonObject(text);
  const type = raw.type;
  if (type === 'none') return NONE_SELECTOR;
  if (type !== 'label') {
    throw new SelectorError('', `not match any type of selector! (type ${JSON.stringify(type ?? null)}; known: label, none)`);
  }
  const expression = raw.expression;
  if (expression !== undefined && expression !== null && typeof expression !== 'string') {
    throw new SelectorError('', 'selector expression must be a string');
  }
  const given = expression ?? '';
  return { type: 'label', expression: given, labels: parseLabelExpression(given) };
}

function parseJsonObject(text: string): Record<string, unknown> {
  for (const candidate of [text, safeDecode(text)]) {
    if (candidate === undefined) continue;
    try {
      const value: unknown = JSON.parse(candidate);
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
    } catch {
      // try the next form
    }
  }
  throw new SelectorError('', `selector format incorrect: expected a JSON object like {"type":"label","expression":"..."}`);
}

function safeDecode(text: string): string | undefined {
  try {
    const decoded = decodeURIComponent(text);
    return decoded === text ? undefined : decoded;
  } catch {
    return undefined;
  }
}

/** The selector as `GET /nacos/v1/ns/service` shows it (Jackson's view of Nacos' selector classes). */
export function selectorView(selector: ServiceSelector): Record<string, unknown> {
  if (selector.type === 'none') return { type: 'none' };
  return { type: 'label', expression: selector.expression, labels: [...selector.labels], contextType: 'CMDB' };
}

/**
 * The providers a consumer sees, with Nacos 2.x label-selector semantics: a provider is kept only if,
 * for every label of the selector, the consumer's value is non-blank and equal to the provider's. If
 * that keeps nobody, if the selector compares no label, if there is no consumer IP, or if a lookup
 * throws, every provider is returned: a selector narrows, it never empties a list.
 *
 * Consumer labels come from `cmdb.labelsOf(consumerIp)` (none without a CMDB). A provider's value for
 * label X is the CMDB's when the CMDB has X for the provider's IP, else its metadata `X` (copies made by
 * regsync carry the CMDB labels of their origin as plain metadata keys). Unlike Nacos, a provider the
 * CMDB does not know is therefore not dropped outright.
 */
export function selectProviders<T extends SelectorProvider>(
  selector: ServiceSelector,
  consumerIp: string | undefined,
  providers: readonly T[],
  cmdb: LabelSource | undefined,
): T[] {
  if (selector.type !== 'label' || selector.labels.length === 0) return [...providers];
  if (consumerIp === undefined || consumerIp.trim() === '') return [...providers];
  try {
    const consumer = cmdb?.labelsOf(consumerIp) ?? {};
    const wanted = selector.labels.map((label) => ({ label, value: ownValue(consumer, label) }));
    if (wanted.some((w) => w.value === undefined || w.value.trim() === '')) return [...providers];
    const kept = providers.filter((p) => {
      const known = cmdb?.labelsOf(p.ip) ?? {};
      return wanted.every((w) => (ownValue(known, w.label) ?? ownValue(p.metadata, w.label)) === w.value);
    });
    return kept.length > 0 ? kept : [...providers];
  } catch {
    return [...providers];
  }
}

function ownValue(record: Readonly<Record<string, string>>, key: string): string | undefined {
  return Object.hasOwn(record, key) ? record[key] : undefined;
}
