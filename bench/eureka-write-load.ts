import { infoOf } from '../adapters/eureka/eureka-meta.js';
import { DEFAULT_EUREKA_OPTIONS } from '../adapters/eureka/eureka-options.js';
import { copyLikeInstance, serveWriteLoad, type WriteKind } from './write-generator.js';

/** The InstanceInfo regsync's adapter registers for copy `n` of `service` (`infoOf`, the default options). */
export function copyInfo(service: string, n: number): string {
  const o = DEFAULT_EUREKA_OPTIONS;
  return JSON.stringify(infoOf(service, copyLikeInstance(service, n), { renewalIntervalS: o.renewalIntervalS, leaseDurationS: o.leaseDurationS, dataCenterName: o.dataCenterName, now: Date.now() }));
}

/** Raw writes to a test Eureka: `POST <contextPath>/apps/{APP}`, answered 204. */
export const EUREKA_WRITES: WriteKind = {
  headers: { 'content-type': 'application/json', accept: 'application/json' },
  request: (service, n) => ({ method: 'POST', path: `${DEFAULT_EUREKA_OPTIONS.contextPath}/apps/${encodeURIComponent(service.toUpperCase())}`, body: copyInfo(service, n) }),
  stored: (status) => status === 204,
};

serveWriteLoad(EUREKA_WRITES);
