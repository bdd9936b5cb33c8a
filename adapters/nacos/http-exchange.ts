import type { Dispatcher } from 'undici';

/** One HTTP answer: status and the whole body as text. */
export interface Exchange {
  status: number;
  body: string;
}

/**
 * Sends one request through `dispatcher` and resolves with the status and the whole body as UTF-8
 * text. A thin handler over `dispatch` rather than `request()`, whose per-answer body stream and
 * its bookkeeping cost more than a Nacos call's small answer is worth (a cold sync sends tens of
 * thousands). Rejects with undici's error when the request fails (connect, timeouts, reset).
 */
export function exchange(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions): Promise<Exchange> {
  return new Promise<Exchange>((resolve, reject) => {
    let status = 0;
    let first: Buffer | undefined;
    let more: Buffer[] | undefined;
    dispatcher.dispatch(options, {
      // undici takes a handler for its controller-based API only when this method is present.
      onRequestStart() {},
      onResponseStart(_controller, statusCode) {
        status = statusCode;
      },
      onResponseData(_controller, chunk) {
        if (first === undefined) first = chunk;
        else (more ??= [first]).push(chunk);
      },
      onResponseEnd() {
        const body = more ? Buffer.concat(more) : first;
        resolve({ status, body: body === undefined ? '' : body.toString('utf8') });
      },
      onResponseError(_controller, err) {
        reject(err);
      },
    });
  });
}

/**
 * `application/x-www-form-urlencoded` text of `params` (also used as a query string). Same meaning
 * as `URLSearchParams#toString()`, a fraction of its cost; spaces become `%20`, which every form
 * decoder reads as a space.
 */
export function encodeForm(params: Readonly<Record<string, string>>): string {
  let out = '';
  for (const key in params) {
    const value = params[key];
    if (value === undefined) continue;
    out += `${out === '' ? '' : '&'}${encodeURIComponent(key)}=${encodeURIComponent(value)}`;
  }
  return out;
}
