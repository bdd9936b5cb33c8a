/**
 * The state in Redis has a layout this regsync cannot use: written by a newer regsync, or
 * unreadable. Thrown at start, before anything is read or written, so that an old process never
 * misreads (or overwrites) state a newer one wrote.
 */
export class SchemaVersionError extends Error {
  override readonly name = 'SchemaVersionError';
  /** A stable code for callers and logs. */
  readonly code = 'schema-version';

  constructor(
    /** The key that holds the version (`<prefix>:schema`). */
    readonly key: string,
    /** What is stored there, as read. */
    readonly stored: string,
    /** The newest version this regsync knows. */
    readonly known: number,
  ) {
    const version = /^\d+$/.test(stored) ? Number(stored) : undefined;
    super(
      version === undefined
        ? `${key} holds "${stored.slice(0, 40)}", not a schema version: this Redis (or key prefix) holds something other than regsync state; use another --prefix or Redis`
        : `${key} says the state in Redis has schema version ${version}, and this regsync knows versions up to ${known}: ` +
            'a newer regsync wrote it. Run the newer regsync on every process (a rolling upgrade never goes back), or use another --prefix or Redis.',
    );
  }
}
