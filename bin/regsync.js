#!/usr/bin/env node
// Entry point of the `regsync` command; the TypeScript sources are compiled to dist/ by `npm run build`
// (run automatically by `npm ci` through the `prepare` script).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const main = fileURLToPath(new URL('../dist/src/cli/main.js', import.meta.url));
if (!existsSync(main)) {
  console.error('regsync: dist/ is missing; run `npm run build` (or `npm ci`) in the checkout first.');
  process.exit(1);
}
const { run } = await import(main);
await run(process.argv);
