import { readFileSync } from 'node:fs';
import { Agent, request } from 'undici';
import { readLimited } from '../../src/util/read-limited.js';
import { ConsulConfigError } from './consul-config-error.js';
import type { ConsulClusterConfig, ConsulEndpoint } from './consul-options.js';
import { ConsulRequestError } from './consul-request-error.js';

/** One answer of Consul: its status, its JSON body, and its `X-Consul-Index` when it sent one. */
export interface ConsulAnswer {
  status: number;
  body: unknown;
  index: number | undefined;
  /** `X-Consul-Results-Filtered-By-ACLs: true`: the token may not see some of what the read lists. */
  filtered: boolean;
}

/** What one call asks. */
export interface ConsulCall {
  method: 'GET' | 'PUT';
  path: string;
  query?: Record<string, string> | undefined;
  body?: unknown;
  /** Longest wait for the whole answer; default the cluster's `requestTimeoutMs`. */
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
  /** A blocking query: sent over connections of its own, so that no read or write waits behind one. */
  blocking?: boolean | undefined;
}

/** Largest answer read (a catalog of many services is a few MB; parsing more would hold the event loop). */
const MAX_ANSWER_BYTES = 16 * 1024 * 1024;
/** Codes of Node's TLS errors: a certificate not trusted, expired, for another name; a handshake refused. */
const TLS_CODE = /^(?:ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)|CERT/;

/** Connections kept to each agent for reads and writes: the most of them in flight to one (blocking queries have connections of their own). */
export const CONSUL_CONNECTIONS = 64;
/** While no endpoint answers and something waits for one to (see {@link ConsulHttp.whenReached}): the period of the one probe. */
const REACH_PROBE_MS = 1_000;

/**
 * Consul's HTTP API for one cluster: the ACL token on every request (`X-Consul-Token`), the
 * datacenter, Enterprise namespace and partition only when configured, TLS as configured, and
 * failover: a request no endpoint answered is tried on the next one, and the endpoint that last
 * answered is tried first. An answer with an error status is not retried elsewhere (another agent
 * would answer the same) and rejects with a {@link ConsulRequestError} naming it.
 *
 * It also knows whether the cluster answers: once a call found no endpoint answering, callers
 * waiting in a backoff (the blocking loops) may ask to be woken by the first answer again
 * ({@link whenReached}); meanwhile one cheap probe (`GET /v1/status/leader`) goes out every
 * second, so that the watches resume within about a second of the cluster coming back, however
 * long their backoff has grown, and a cluster that is down costs one request a second, not one
 * per watch.
 */
export class ConsulHttp {
  private readonly dispatcher: Agent;
  private readonly blockingDispatcher: Agent;
  private current = 0;
  /** The last call found no endpoint answering (refused, reset, timed out), and none answered since. */
  private unreached = false;
  private readonly waiting = new Set<() => void>();
  private probe: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly clusterId: string,
    private readonly config: ConsulClusterConfig,
  ) {
    const o = config.options;
    const file = (setting: string, path: string | undefined): string | undefined => {
      if (path === undefined) return undefined;
      try {
        return readFileSync(path, 'utf8');
      } catch (err) {
        throw new ConsulConfigError(clusterId, `options.${setting}`, `cannot read ${path}: ${(err as Error).message}`);
      }
    };
    const connect = {
      timeout: Math.min(o.requestTimeoutMs, 10_000),
      ...(o.scheme === 'https'
        ? {
            ca: file('tlsCaFile', o.tlsCaFile),
            cert: file('tlsCertFile', o.tlsCertFile),
            key: file('tlsKeyFile', o.tlsKeyFile),
            servername: o.tlsServerName,
            rejectUnauthorized: !o.tlsSkipVerify,
          }
        : {}),
    };
    this.dispatcher = new Agent({ connections: CONSUL_CONNECTIONS, keepAliveTimeout: 30_000, connect });
    // A blocking query holds its connection until the data moves or `wait` passes (HTTP/1.1, one
    // request per connection): each has one of its own here, up to maxBlockingQueries (a Consul
    // agent accepts at most `limits.http_max_conns_per_client`, default 200, from one address).
    this.blockingDispatcher = new Agent({ connections: Math.max(1, o.maxBlockingQueries), keepAliveTimeout: 30_000, connect });
  }

  /** The query parameters every read carries (datacenter, namespace, partition, stale). */
  readQuery(): Record<string, string> {
    const o = this.config.options;
    return {
      ...(o.datacenter !== undefined ? { dc: o.datacenter } : {}),
      ...(o.consulNamespace !== undefined ? { ns: o.consulNamespace } : {}),
      ...(o.partition !== undefined ? { partition: o.partition } : {}),
      ...(o.stale ? { stale: '' } : {}),
    };
  }

  async call(call: ConsulCall): Promise<ConsulAnswer> {
    const what = `${call.method} ${call.path}`;
    const endpoints = this.config.endpoints;
    let last: unknown;
    for (let attempt = 0; attempt < endpoints.length; attempt += 1) {
      const at = (this.current + attempt) % endpoints.length;
      try {
        const answer = await this.send(endpoints[at] as ConsulEndpoint, call, what);
        this.current = at;
        this.answered();
        return answer;
      } catch (err) {
        if (!(err instanceof ConsulRequestError) || (err.code !== 'consul-unreachable' && err.code !== 'consul-timeout')) {
          // An error status is an answer: the cluster is there.
          if (err instanceof ConsulRequestError && err.status !== undefined) this.answered();
          throw err;
        }
        if (call.signal?.aborted) throw new ConsulRequestError('consul-closed', this.clusterId, what, 'closed');
        last = err;
      }
    }
    this.unreached = true;
    throw last;
  }

  /**
   * Calls `wake` once an endpoint answers again, when the last call found none answering (else
   * never: answers a no-op); until then a probe goes out every second. Answers a function that
   * cancels the wait.
   */
  whenReached(wake: () => void): () => void {
    if (!this.unreached || this.closed) return () => {};
    this.waiting.add(wake);
    if (this.probe === undefined) {
      this.probe = setInterval(() => void this.call({ method: 'GET', path: '/v1/status/leader' }).catch(() => undefined), REACH_PROBE_MS);
      this.probe.unref();
    }
    return () => {
      this.waiting.delete(wake);
      if (this.waiting.size === 0) this.stopProbe();
    };
  }

  private answered(): void {
    if (!this.unreached) return;
    this.unreached = false;
    this.stopProbe();
    const woken = [...this.waiting];
    this.waiting.clear();
    for (const wake of woken) wake();
  }

  private stopProbe(): void {
    clearInterval(this.probe);
    this.probe = undefined;
  }

  private async send(endpoint: ConsulEndpoint, call: ConsulCall, what: string): Promise<ConsulAnswer> {
    const host = endpoint.host.includes(':') ? `[${endpoint.host}]` : endpoint.host;
    const query = new URLSearchParams(call.query ?? {}).toString().replace(/=(?=&|$)/g, '');
    const url = `${this.config.options.scheme}://${host}:${endpoint.port}${call.path}${query === '' ? '' : `?${query}`}`;
    const timeoutMs = Math.ceil(call.timeoutMs ?? this.config.options.requestTimeoutMs);
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = call.signal === undefined ? timeout : AbortSignal.any([timeout, call.signal]);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.config.token !== undefined) headers['x-consul-token'] = this.config.token;
    if (call.body !== undefined) headers['content-type'] = 'application/json';
    let status: number;
    let text: string;
    let index: number | undefined;
    let filtered: boolean;
    try {
      const res = await request(url, {
        dispatcher: call.blocking === true ? this.blockingDispatcher : this.dispatcher,
        method: call.method,
        headers,
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      status = res.statusCode;
      const body = await readLimited(res.body, MAX_ANSWER_BYTES);
      if (body === undefined) throw new ConsulRequestError('consul-bad-answer', this.clusterId, what, `answer larger than ${MAX_ANSWER_BYTES} bytes`, status);
      text = body;
      const header = res.headers['x-consul-index'];
      const raw = Array.isArray(header) ? header[0] : header;
      index = raw === undefined || !/^\d{1,19}$/.test(raw) ? undefined : Number(raw);
      filtered = res.headers['x-consul-results-filtered-by-acls'] === 'true';
    } catch (err) {
      if (err instanceof ConsulRequestError) throw err;
      if (call.signal?.aborted) throw new ConsulRequestError('consul-closed', this.clusterId, what, 'closed', undefined, { cause: err });
      if (timeout.aborted) throw new ConsulRequestError('consul-timeout', this.clusterId, what, `no answer from ${host}:${endpoint.port} within ${timeoutMs} ms`, undefined, { cause: err });
      const code = (err as { code?: string }).code;
      // A certificate refused says why in its message ("unable to verify the first certificate").
      const reason = code === undefined ? (err as Error).message : TLS_CODE.test(code) ? `${code} (${(err as Error).message})` : code;
      throw new ConsulRequestError('consul-unreachable', this.clusterId, what, `${host}:${endpoint.port}: ${reason}`, undefined, { cause: err });
    }
    if (status >= 400) {
      const detail = `${status} ${text.trim().slice(0, 300) || 'no message'}`;
      const code = status === 403 ? 'consul-auth-failed' : status >= 500 ? 'consul-server-error' : 'consul-refused';
      throw new ConsulRequestError(code, this.clusterId, what, detail, status);
    }
    let body: unknown = text;
    if (text !== '') {
      try {
        body = JSON.parse(text);
      } catch {
        throw new ConsulRequestError('consul-bad-answer', this.clusterId, what, `answer is not JSON: ${JSON.stringify(text.slice(0, 80))}`, status);
      }
    }
    return { status, body, index, filtered };
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopProbe();
    this.waiting.clear();
    await Promise.all([this.dispatcher.destroy(), this.blockingDispatcher.destroy()]);
  }
}
