import { copyLikeMetadata, ipOf, registerForm } from './instances.js';
import { serveWriteLoad, type WriteKind } from './write-generator.js';

/** Raw writes to a Nacos registry (see raw-write.ts): v1 registers of persistent instances, answered `ok`. */
export const NACOS_WRITES: WriteKind = {
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  request: (service, n) => ({ method: 'POST', path: '/nacos/v1/ns/instance', body: registerForm(service, ipOf(n), copyLikeMetadata(service)) }),
  stored: (status, text) => status === 200 && text === 'ok',
};

serveWriteLoad(NACOS_WRITES);
