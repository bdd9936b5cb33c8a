import { Agent, request } from 'undici';
import { readLimited } from '../../src/util/read-limited.js';
import type { EurekaClusterConfig } from './eureka-options.js';
import { EurekaRequestError } from './eureka-request-error.js';

/** One answer: its status and its JSON body (undefined when empty). */
export interface EurekaAnswer {
  status: number;
  body: unknown;
}

/** Largest answer read: a whole registry of many thousand instances is a few MB. */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;

/**
 * Eureka's REST API for one cluster: JSON asked for (`Accept: application/json`, else Eureka
 * answers XML), basic credentials when configured, and failover over the cluster's peers: a
 * request no endpoint answered is tried on the next, and the last one that answered goes first.
 * `expect` lists the statuses that are answers (a 404 is one for a renewal); any other rejects.
 */
export class EurekaHttp {
  private readonly dispatcher = new Agent({ connections: 64, keepAliveTimeout: 30_000 });
  private current = 0;
  private readonly authorization: string | undefined;

  constructor(
    private readonly clusterId: string,
    private readonly config: EurekaClusterConfig,
  ) {
    const c = config.credentials;
    this.authorization = c === undefined ? undefined : `Basic ${Buffer.from(`${c.username}:${c.password}`).toString('base64')}`;
  }

  async call(method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, expect: readonly number[], body?: unknown): Promise<EurekaAnswer> {
    const what = `${method} ${path}`;
    const { endpoints, options } = this.config;
    let last: unknown;
    for (let attempt = 0; attempt < endpoints.length; attempt += 1) {
      const at = (this.current + attempt) % endpoints.length;
      const endpoint = endpoints[at] as { host: string; port: number };
      const host = endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host;
      const headers: Record<string, string> = { accept: 'application/json' };
      if (this.authorization !== undefined) headers.authorization = this.authorization;
      if (body !== undefined) headers['content-type'] = 'application/json';
      let status: number;
      let text: string;
      try {
        const res = await request(`${options.scheme}://${host}:${endpoint.port}${options.contextPath}${path}`, {
          dispatcher: this.dispatcher,
          method,
          headers,
          body: body === undefined ? undefined : JSON.stringify(body),
          headersTimeout: options.requestTimeoutMs,
          bodyTimeout: options.requestTimeoutMs,
          signal: AbortSignal.timeout(options.requestTimeoutMs),
        });
        status = res.statusCode;
        const read = await readLimited(res.body, MAX_ANSWER_BYTES);
        if (read === undefined) throw new EurekaRequestError('eureka-bad-answer', this.clusterId, what, `answer larger than ${MAX_ANSWER_BYTES} bytes`, status);
        text = read;
      } catch (err) {
        if (err instanceof EurekaRequestError) throw err;
        const timedOut = (err as { name?: string }).name === 'TimeoutError' || /timeout/i.test((err as { code?: string }).code ?? '');
        last = new EurekaRequestError(
          timedOut ? 'eureka-timeout' : 'eureka-unreachable',
          this.clusterId,
          what,
          timedOut ? `no answer from ${host}:${endpoint.port} within ${options.requestTimeoutMs} ms` : `${host}:${endpoint.port}: ${(err as { code?: string }).code ?? (err as Error).message}`,
          undefined,
          { cause: err },
        );
        continue;
      }
      this.current = at;
      if (!expect.includes(status)) {
        const detail = `${status} ${text.trim().slice(0, 300) || 'no message'}`;
        const code = status === 401 || status === 403 ? 'eureka-auth-failed' : status >= 500 ? 'eureka-server-error' : 'eureka-refused';
        throw new EurekaRequestError(code, this.clusterId, what, detail, status);
      }
      if (text === '' || status === 404) return { status, body: undefined };
      try {
        return { status, body: JSON.parse(text) };
      } catch {
        throw new EurekaRequestError('eureka-bad-answer', this.clusterId, what, `answer is not JSON: ${JSON.stringify(text.slice(0, 80))}`, status);
      }
    }
    throw last;
  }

  async close(): Promise<void> {
    await this.dispatcher.destroy();
  }
}
