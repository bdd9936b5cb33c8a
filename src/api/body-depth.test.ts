import { describe, expect, it } from 'vitest';
import { apiHarnessPerTest, expectError, type ApiHarness } from '../../test/support/api-harness.js';
import { depthExceeds, MAX_BODY_DEPTH } from './body-depth.js';

let h: ApiHarness;
apiHarnessPerTest((harness) => {
  h = harness;
});

/** `{"a":{"a":...{}}}`, `depth` objects deep, as text (`JSON.stringify` of such a value overflows the stack itself). */
function nestedJson(depth: number): string {
  return `${'{"a":'.repeat(depth - 1)}{}${'}'.repeat(depth - 1)}`;
}

const DEEP = 5_000;

const json = (method: 'POST' | 'PUT', url: string, payload: string) =>
  h.inject({ method, url, headers: { 'content-type': 'application/json' }, payload });

describe('bodies nested too deep', () => {
  it('answer 400 invalid_request on every native route that stores something, and nothing is stored', async () => {
    await h.store.putCluster({ id: 'a', kind: 'nacos', endpoints: ['10.0.0.1:8848'], labels: {}, options: {} });
    await h.store.putCluster({ id: 'b', kind: 'nacos', endpoints: ['10.0.0.2:8848'], labels: {}, options: {} });
    const before = await h.snapshot();
    const deep = nestedJson(DEEP);
    expect(deep.length).toBeLessThan(32 * 1024);
    const cases: [string, 'POST' | 'PUT', string, string][] = [
      ['cluster options', 'POST', '/api/v1/clusters', `{"id":"c","kind":"nacos","endpoints":["10.0.0.1:8848"],"options":{"apiVersion":${deep}}}`],
      ['cluster options (PUT)', 'PUT', '/api/v1/clusters/a', `{"kind":"nacos","endpoints":["10.0.0.1:8848"],"options":${deep}}`],
      ['cluster labels', 'POST', '/api/v1/clusters', `{"id":"c","kind":"nacos","endpoints":["10.0.0.1:8848"],"labels":{"x":${deep}}}`],
      ['task options', 'POST', '/api/v1/tasks', `{"source":"a","destination":"b","service":"s","options":{"mapping":{"rename":${deep}}}}`],
      ['a task replace', 'PUT', '/api/v1/tasks/t1', `{"source":"a","destination":"b","service":"s","options":${deep}}`],
      ['a batch', 'POST', '/api/v1/tasks:batch', `{"action":"create","items":[${deep}]}`],
    ];
    for (const [what, method, url, payload] of cases) {
      const res = await json(method, url, payload);
      expectError(res, 400, 'invalid_request', new RegExp(`nested more than ${MAX_BODY_DEPTH} levels deep`));
      expect(res.statusCode, what).toBe(400);
    }
    expect(await h.snapshot()).toEqual(before);
    expect(h.control.calls).toEqual([]);
  });

  it('answer 400 on the nacos-sync routes too, in their shape', async () => {
    const before = await h.snapshot();
    const deep = nestedJson(DEEP);
    for (const [url, payload] of [
      ['/v1/cluster/add', `{"clusterName":"x","clusterType":"NACOS","connectKeyList":["10.0.0.1:8848"],"namespace":${deep}}`],
      ['/v1/task/add', `{"sourceClusterId":"a","destClusterId":"b","serviceName":"s","groupName":${deep}}`],
    ] as const) {
      const res = await json('POST', url, payload);
      expect(res.statusCode, url).toBe(400);
      expect(res.json()).toMatchObject({ success: false, resultMessage: expect.stringMatching(/nested more than \d+ levels deep/) });
    }
    expect(await h.snapshot()).toEqual(before);
  });

  it('leave bodies of the deepest valid shape alone', async () => {
    const res = await json(
      'POST',
      '/api/v1/clusters',
      JSON.stringify({ id: 'k', kind: 'kubernetes', endpoints: [], options: { namespaceMap: { apps: { namespace: 'apps', group: 'g' } } } }),
    );
    expect(res.statusCode, res.payload).toBe(201);
  });
});

describe('depthExceeds', () => {
  it('counts objects and arrays, checks any depth without recursion', () => {
    expect(depthExceeds('text', 1)).toBe(false);
    expect(depthExceeds({}, 1)).toBe(false);
    expect(depthExceeds({ a: {} }, 1)).toBe(true);
    expect(depthExceeds({ a: [1, { b: 'x' }] }, 3)).toBe(false);
    expect(depthExceeds({ a: [1, { b: {} }] }, 3)).toBe(true);
    let deep: unknown = {};
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(depthExceeds(deep, MAX_BODY_DEPTH)).toBe(true);
  });
});
