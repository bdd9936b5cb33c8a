// The last step of `npm run build:dashboard`, after `tsc -p tsconfig.dashboard.json` compiled the
// scripts into dist/dashboard/: copies the page and its style sheet next to them. Plain Node, no
// dependencies.
//
// It also removes dist/src/dashboard/, the copy of the same scripts that the main build
// (tsconfig.build.json takes all of src/) emits, so that dist/ holds one dashboard, the one served,
// but for the modules the command line shares with it (pure code, no DOM): `regsync status` draws
// the dashboard's topology model.
import { copyFileSync, existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..');
const out = join(root, 'dist', 'dashboard');

mkdirSync(out, { recursive: true });
for (const file of ['index.html', 'style.css']) copyFileSync(join(here, file), join(out, file));
const nodeCopy = join(root, 'dist', 'src', 'dashboard');
const shared = new Set(['topology-model.js']);
if (existsSync(nodeCopy)) for (const file of readdirSync(nodeCopy)) if (!shared.has(file)) rmSync(join(nodeCopy, file), { recursive: true, force: true });
