import { registrationOf } from '../adapters/consul/consul-meta.js';
import { DEFAULT_CONSUL_OPTIONS } from '../adapters/consul/consul-options.js';
import { copyLikeInstance, serveWriteLoad, type WriteKind } from './write-generator.js';

/** The catalog registration regsync's adapter sends for copy `n` of `service`: the same body, byte for byte in shape. */
export function copyRegistration(service: string, n: number): string {
  const o = DEFAULT_CONSUL_OPTIONS;
  const body = registrationOf(service, copyLikeInstance(service, n), { node: o.nodeName, nodeAddress: o.nodeAddress });
  if (typeof body === 'string') throw new Error(body);
  return JSON.stringify(body);
}

/** Raw writes to a test Consul: `PUT /v1/catalog/register`, answered `true`. */
export const CONSUL_WRITES: WriteKind = {
  headers: { 'content-type': 'application/json', accept: 'application/json' },
  request: (service, n) => ({ method: 'PUT', path: '/v1/catalog/register', body: copyRegistration(service, n) }),
  stored: (status, text) => status === 200 && text === 'true',
};

serveWriteLoad(CONSUL_WRITES);
