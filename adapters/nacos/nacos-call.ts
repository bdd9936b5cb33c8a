import type { Priority } from './semaphore.js';

/** One call to the cluster, before endpoint, token and encoding are chosen. */
export interface NacosCall {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Below the context path, e.g. `/v1/ns/instance`. */
  path: string;
  params?: Record<string, string>;
  /** The parameters already encoded as form text; takes the place of `params`. */
  form?: string;
  /** How to present the token: `accessToken` query parameter (v1) or headers (v3). Absent: no token. */
  dialect?: 'v1' | 'v3' | undefined;
  priority?: Priority;
}

/** What the server answered, whatever the status. */
export interface NacosAnswer {
  status: number;
  body: string;
  /** `host:port` that answered. */
  endpoint: string;
}
