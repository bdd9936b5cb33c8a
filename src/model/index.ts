export * from './types.js';
export * from './adapter.js';
export * from './write-failures.js';
export * from './kind.js';
export * from './cluster-config-error.js';
