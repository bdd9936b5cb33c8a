export * from './types.js';
export * from './adapter.js';
export * from './write-failures.js';
