import { describe, it } from 'vitest';
import { apiHarnessPerTest, expectError, type ApiHarness } from '../../test/support/api-harness.js';

let h: ApiHarness;
apiHarnessPerTest((harness) => {
  h = harness;
});

describe('GET /api/v1/dns', () => {
  it('says that no DNS server runs in a process without one, and how to start one', async () => {
    const res = await h.inject({ method: 'GET', url: '/api/v1/dns' });
    expectError(res, 404, 'dns_not_running', /regsync up --dns-listen/);
  });
});
