import { PATTERN_HINTS } from './patterns.js';

/** One schema violation as Ajv reports it (the part used here). */
export interface SchemaViolation {
  keyword: string;
  instancePath: string;
  params: Record<string, unknown>;
  message?: string;
  /** Set when the key of an object (not its value) broke a `propertyNames` rule. */
  propertyName?: string;
}

/**
 * A validation message that names the field: `body.endpoints[1] must be host:port ...`,
 * `body.colour is not a known field`, `body.kind is required`. Values are never quoted, so a
 * mistyped password cannot end up in a response or a log.
 */
export function describeViolation(context: string, violation: SchemaViolation): string {
  const where = context + violation.instancePath
    .split('/')
    .slice(1)
    .map((segment) => {
      const s = segment.replace(/~1/g, '/').replace(/~0/g, '~');
      return /^\d+$/.test(s) ? `[${s}]` : `.${s}`;
    })
    .join('');
  if (violation.propertyName !== undefined) {
    return `${where} key ${JSON.stringify(violation.propertyName)} ${violation.message ?? 'is invalid'}`;
  }
  switch (violation.keyword) {
    case 'additionalProperties':
      return `${where}.${String(violation.params.additionalProperty)} is not a known field`;
    case 'required':
      return `${where}.${String(violation.params.missingProperty)} is required`;
    case 'enum':
      return `${where} must be one of ${(violation.params.allowedValues as unknown[]).map(String).join(', ')}`;
    case 'pattern':
      return `${where} ${PATTERN_HINTS[String(violation.params.pattern)] ?? 'has the wrong format'}`;
    default:
      return `${where} ${violation.message ?? 'is invalid'}`;
  }
}
