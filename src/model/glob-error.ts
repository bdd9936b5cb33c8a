/**
 * A glob that cannot be compiled: malformed (an unclosed `[` or `{`, a reversed range, a trailing
 * `\`), using syntax regsync does not implement (extglobs, POSIX classes), or beyond the limits
 * that keep matching cheap. Thrown by `compileGlobs`; the API turns it into a 400 naming the field.
 */
export class GlobError extends Error {
  override readonly name = 'GlobError';
  /** A stable code for callers and logs. */
  readonly code = 'invalid_pattern';

  constructor(
    message: string,
    /** Position of the offending pattern in the list compiled. */
    readonly index: number,
  ) {
    super(message);
  }
}
