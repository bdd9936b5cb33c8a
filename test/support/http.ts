/** Parameters as tests write them. */
export type ParamValues = Record<string, string | number | boolean>;

/** Encodes parameters as a query string or form body, the way Nacos clients send them. */
export function formOf(params: ParamValues): URLSearchParams {
  return new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)]));
}

/** What {@link apiWithToken}'s calls answer: the status and the parsed body (`{}` when empty). */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read API answers loosely
export type ApiAnswer = { status: number; body: any };

/**
 * A caller of regsync's REST API with a bearer token, for tests that check what a page does not
 * show: `base()` is read at each call (the server starts after the caller is made).
 */
export function apiWithToken(base: () => string, token: string): (method: string, path: string, body?: unknown) => Promise<ApiAnswer> {
  return async (method, path, body) => {
    const res = await fetch(`${base()}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: text === '' ? {} : JSON.parse(text) };
  };
}
