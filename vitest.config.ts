import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'adapters/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 90_000,
    // Real servers are started per test file; two cores do not like many at once.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
