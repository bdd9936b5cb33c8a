/**
 * Logging in to a Nacos cluster failed: wrong user or password, or a server that refuses to log in.
 * Separate from {@link NacosRequestError} because it needs an operator (fix the credentials), not a
 * retry. Carries the user name, never the password.
 */
export class NacosAuthError extends Error {
  override readonly name = 'NacosAuthError';
  readonly code = 'nacos-auth-failed';

  constructor(
    readonly clusterId: string,
    readonly username: string,
    readonly endpoint: string,
    readonly status: number | undefined,
    detail: string,
    options?: { cause?: unknown },
  ) {
    const at = status === undefined ? '' : ` HTTP ${status}`;
    super(`nacos cluster ${clusterId}: login as '${username}' at ${endpoint} failed:${at} ${detail}`, options);
  }
}
