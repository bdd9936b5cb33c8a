export * from './types.js';
export * from './adapter.js';
export * from './write-failures.js';
export * from './service-status.js';
export * from './write-refused-error.js';
export * from './reconcile-reason.js';
export * from './kind.js';
export * from './cluster-config-error.js';
