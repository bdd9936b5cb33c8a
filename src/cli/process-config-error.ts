/** A `--config` file regsync cannot use: unreadable, not YAML, or a key no option of the command has. */
export class ProcessConfigError extends Error {
  override readonly name = 'ProcessConfigError';
  /** A stable code for callers and logs. */
  readonly code = 'process-config-invalid';

  constructor(
    readonly file: string,
    /** The key at fault; empty for the whole file. */
    readonly key: string,
    detail: string,
    options?: ErrorOptions,
  ) {
    super(`${file}${key === '' ? '' : `: ${key}`}: ${detail}`, options);
  }
}
