// Copies the adapters' .proto interface definitions next to their compiled modules in dist/, which
// load them at run time (tsc copies only what it compiles). Run by `npm run build` and before the
// benchmarks. Plain Node, no dependencies.
import { copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

function* protos(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* protos(path);
    else if (entry.name.endsWith('.proto')) yield path;
  }
}

for (const file of protos(join(root, 'adapters'))) {
  const target = join(root, 'dist', relative(root, file));
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(file, target);
}
