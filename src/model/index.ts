export * from './types.js';
export * from './adapter.js';
