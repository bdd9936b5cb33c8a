import { describe, expect, it } from 'vitest';
import { reachFailureOf, type Problem } from './service-status.js';

const problem = (cause: string | undefined, message = 'cannot read source a: boom'): Problem => ({ code: 'source_unreadable', side: 'source', cluster: 'a', message, ...(cause ? { cause } : {}) });

describe('reachFailureOf', () => {
  it('tells refused credentials, no connection yet, no answer and other errors apart', () => {
    expect(reachFailureOf(problem('nacos-auth-failed'))).toBe('auth_failed');
    expect(reachFailureOf(problem('kubernetes-http-error', 'cannot read source a: GET /api/v1/services: 403 Forbidden'))).toBe('auth_failed');
    expect(reachFailureOf(problem('kubernetes-not-ready'))).toBe('not_connected');
    expect(reachFailureOf(problem('zookeeper-closed'))).toBe('not_connected');
    expect(reachFailureOf(problem('nacos-unreachable'))).toBe('unreachable');
    expect(reachFailureOf(problem('zookeeper-unavailable'))).toBe('unreachable');
    expect(reachFailureOf(problem('kubernetes-timeout'))).toBe('unreachable');
    expect(reachFailureOf(problem('nacos-bad-response'))).toBe('error');
    expect(reachFailureOf(problem(undefined))).toBe('error');
  });
});
