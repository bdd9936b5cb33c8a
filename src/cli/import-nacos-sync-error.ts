/**
 * A nacos-sync export that cannot be read, or (with `--strict`) a row that cannot be imported.
 * The message names the file, and the line and column (or field) at fault, so that an operator
 * can open the export there.
 */
export class ImportNacosSyncError extends Error {
  override readonly name = 'ImportNacosSyncError';
  /** A stable code for callers and logs. */
  readonly code = 'import-nacos-sync';
}
