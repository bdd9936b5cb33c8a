import type { Redis } from 'ioredis';
import type { RedisTarget } from './redis-target.js';
import { RedisUnreachableError, type RedisFailure } from './redis-unreachable-error.js';

/** Codes of Node's TLS errors that no retry mends (a plain server, a certificate the CA does not sign). */
const TLS_CODES = /^(ERR_SSL_|ERR_TLS_|EPROTO$|DEPTH_ZERO_SELF_SIGNED_CERT$|SELF_SIGNED_CERT_IN_CHAIN$|UNABLE_TO_VERIFY_LEAF_SIGNATURE$|UNABLE_TO_GET_ISSUER_CERT|CERT_)/;
/** Redis reply codes (the first word of an error reply) meaning the user or password is refused. */
const AUTH_REPLIES = /^(WRONGPASS|NOAUTH|NOPERM)\b|^ERR (invalid password|AUTH|Client sent AUTH)/;

/**
 * Waits until `redis` is ready (connected, authenticated, the master found through the sentinels),
 * for at most `timeoutMs`; else rejects with a {@link RedisUnreachableError} saying what failed.
 * Failures retrying cannot mend reject at once: a wrong password or user (WRONGPASS, NOAUTH), a TLS
 * handshake that fails or is not answered (`rediss://` to a plain Redis), a master name the
 * sentinels do not know. The connection is left as it is: the caller closes it.
 */
export function waitForRedis(redis: Redis, target: RedisTarget, timeoutMs: number): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    let last: { failure: RedisFailure; detail: string; err: unknown } | undefined;
    let noMaster: string | undefined;
    const done = (err?: RedisUnreachableError): void => {
      clearTimeout(timer);
      redis.off('ready', onReady);
      redis.off('error', onError);
      redis.off('sentinelError', onSentinelError);
      if (err) reject(err);
      else resolve();
    };
    const fail = (failure: RedisFailure, detail: string, cause?: unknown): void => done(new RedisUnreachableError(target.masked, failure, detail, cause === undefined ? undefined : { cause }));
    const onReady = (): void => done();
    const onError = (err: Error): void => {
      last = { ...describe(err, target), err };
      if (last.failure === 'no-sentinel' && noMaster !== undefined) last = { failure: 'no-master', detail: noMaster, err };
      if (last.failure === 'auth' || last.failure === 'tls' || last.failure === 'no-master') fail(last.failure, last.detail, err);
    };
    const onSentinelError = (err: Error): void => {
      // Older sentinels answer nil, newer ones "ERR No such master with that name".
      if (/invalid reply: null|No such master with that name/.test(err.message) && target.sentinel) {
        noMaster = `the sentinels (${hostList(target)}) know no master named ${JSON.stringify(target.sentinel.masterName)}`;
      }
    };
    const timer = setTimeout(() => {
      const seen = last ? `: ${last.detail}` : '';
      if (last && last.failure !== 'other' && last.failure !== 'timeout') fail(last.failure, last.detail, last.err);
      else fail('timeout', `not ready within ${timeoutMs} ms${seen}`, last?.err);
    }, timeoutMs);
    timer.unref();
    redis.on('ready', onReady);
    redis.on('error', onError);
    redis.on('sentinelError', onSentinelError);
  });
}

/** What an ioredis connection error means, for a human and for {@link RedisUnreachableError.failure}. */
function describe(err: Error, target: RedisTarget): { failure: RedisFailure; detail: string } {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  const message = err.message;
  if (AUTH_REPLIES.test(message)) return { failure: 'auth', detail: `authentication failed (${message})` };
  if (TLS_CODES.test(code) || /\b(SSL|TLS)\b|certificate/i.test(message)) return { failure: 'tls', detail: `TLS handshake failed (${message})` };
  if (target.tls && code === 'ETIMEDOUT') {
    return { failure: 'tls', detail: `TLS handshake not answered (${message}); is ${hostList(target)} a TLS port?` };
  }
  if (message.startsWith('All sentinels are unreachable')) {
    // ioredis reports a failed TLS handshake with a sentinel as a closed connection only.
    const tlsHint = target.sentinel?.tls ? '; the sentinels are asked over TLS: check --redis-ca, or add ?sentinelTls=false if they speak plain' : '';
    return { failure: 'no-sentinel', detail: `no sentinel answered (${hostList(target)})${lastError(message)}${tlsHint}` };
  }
  if (code === 'ECONNREFUSED') return { failure: 'refused', detail: `connection refused (${message})` };
  if (code === 'ETIMEDOUT') return { failure: 'timeout', detail: `connect timed out (${message})` };
  return { failure: 'other', detail: message };
}

function lastError(message: string): string {
  const at = message.indexOf('Last error: ');
  return at >= 0 ? `: ${message.slice(at + 'Last error: '.length)}` : '';
}

function hostList(target: RedisTarget): string {
  const hosts = target.sentinel?.hosts ?? (target.node ? [target.node] : []);
  return hosts.map((h) => (h.host.includes(':') ? `[${h.host}]:${h.port}` : `${h.host}:${h.port}`)).join(', ');
}
