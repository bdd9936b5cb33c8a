/** Why a CMDB plug-in failed; see {@link CmdbPluginError}. */
export type CmdbPluginErrorCode =
  /** The module could not be found or imported. */
  | 'load_failed'
  /** The module exports no `createCmdbProvider` function (nor a default export of one). */
  | 'no_factory'
  /** `createCmdbProvider` threw or rejected. */
  | 'factory_failed'
  /** What `createCmdbProvider` returned is not a provider (a method is missing or not a function). */
  | 'invalid_provider'
  /** A provider method threw, rejected or answered something of the wrong shape. */
  | 'call_failed';

/**
 * A CMDB plug-in that cannot be loaded or that failed a call. The message names the module as the
 * configuration gave it, so the operator knows which plug-in to look at; the plug-in's own error is
 * the `cause`.
 */
export class CmdbPluginError extends Error {
  constructor(
    /** The module as configured (path or package name). */
    readonly module: string,
    readonly code: CmdbPluginErrorCode,
    readonly problem: string,
    options?: { cause?: unknown },
  ) {
    super(`CMDB plug-in ${module}: ${problem}`, options);
    this.name = 'CmdbPluginError';
  }
}
