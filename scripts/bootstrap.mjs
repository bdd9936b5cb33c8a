// The single entry behind the README's two quick-start commands (`npm test`, `npm run demo`):
//
//   node scripts/bootstrap.mjs test [vitest args...]   lint, typecheck and run the tests
//   node scripts/bootstrap.mjs demo [demo args...]     run `regsync demo`
//   node scripts/bootstrap.mjs bench [bench args...]   build bench/ and run the benchmarks
//
// It first brings the checkout up to date: `npm ci` when node_modules is missing or older than
// package-lock.json, `npm run build` when dist/ (the compiled sources and the dashboard) is older
// than the sources. Plain Node ESM with node: builtins only, because it runs before node_modules
// may exist.
import { spawn, spawnSync } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import { constants } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureSystemPackages } from './system-packages.mjs';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const npx = process.platform === 'win32' ? 'npx.cmd' : 'npx';

function header(text) {
  console.log(`\n==> ${text}`);
}

/** Runs a command in the repo root with inherited stdio; returns its exit code (128+n when killed by signal n). */
function run(command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' });
  if (result.error) {
    console.error(`regsync bootstrap: could not run ${command}: ${result.error.message}`);
    return 127;
  }
  if (result.signal) return 128 + (constants.signals[result.signal] ?? 0);
  return result.status ?? 1;
}

function mtimeMs(path) {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Whether a file is compiled by the build: .ts files, tests excluded. */
function isBuiltSource(name) {
  return name.endsWith('.ts') && !name.endsWith('.test.ts');
}

/** Newest modification time of the files under `dir` that `accept` takes (default: what the build compiles). */
function newestSource(dir, accept = isBuiltSource) {
  let newest = 0;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return newest;
  }
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules') newest = Math.max(newest, newestSource(path, accept));
    } else if (accept(entry.name)) {
      newest = Math.max(newest, mtimeMs(path) ?? 0);
    }
  }
  return newest;
}

function ensureNodeModules() {
  const installed = mtimeMs(join(root, 'node_modules', '.package-lock.json'));
  const locked = mtimeMs(join(root, 'package-lock.json'));
  if (installed !== undefined && (locked === undefined || locked <= installed)) return 0;
  header(installed === undefined ? 'npm ci (node_modules is missing)' : 'npm ci (package-lock.json changed)');
  return run(npm, ['ci']);
}

function ensureBuild() {
  // The build writes the compiled sources first, then the dashboard: the oldest output is the one to compare.
  const outputs = [join(root, 'dist', 'src', 'cli', 'main.js'), join(root, 'dist', 'dashboard', 'index.html')].map(mtimeMs);
  const built = outputs.includes(undefined) ? undefined : Math.min(...outputs);
  const sources = Math.max(
    newestSource(join(root, 'src')),
    newestSource(join(root, 'adapters')),
    // The dashboard's page, style sheet and copy step too, not only its .ts files.
    newestSource(join(root, 'src', 'dashboard'), (name) => !name.endsWith('.test.ts')),
    mtimeMs(join(root, 'tsconfig.json')) ?? 0,
    mtimeMs(join(root, 'tsconfig.build.json')) ?? 0,
    mtimeMs(join(root, 'tsconfig.dashboard.json')) ?? 0,
  );
  if (built !== undefined && built >= sources) return 0;
  header(built === undefined ? 'npm run build (dist/ is missing or incomplete)' : 'npm run build (sources changed)');
  return run(npm, ['run', 'build']);
}

function test(args) {
  const steps = [
    ['system packages (node scripts/system-packages.mjs test)', () => ensureSystemPackages('test')],
    ['npx eslint .', () => run(npx, ['--no', '--', 'eslint', '.'])],
    ['npx tsc -p tsconfig.json --noEmit', () => run(npx, ['--no', '--', 'tsc', '-p', 'tsconfig.json', '--noEmit'])],
    [`npx vitest run${args.length ? ` ${args.join(' ')}` : ''}`, () => run(npx, ['--no', '--', 'vitest', 'run', ...args])],
  ];
  for (const [index, [title, step]] of steps.entries()) {
    header(`[${index + 1}/${steps.length}] ${title}`);
    const code = step();
    if (code !== 0) {
      console.error(`\nregsync bootstrap: "${title}" failed with exit code ${code}`);
      return code;
    }
  }
  return 0;
}

/**
 * Runs `node bin/regsync.js demo ...args`, forwarding SIGINT/SIGTERM; resolves with its exit code.
 * The demo runs its own redis-server unless it is given `--redis <url>`: the system-package step
 * the tests run brings it first, so that the first command of the quick start works on a machine
 * with nothing but Node.js.
 */
async function demo(args) {
  const ownRedis = !args.some((arg) => arg === '--redis' || arg.startsWith('--redis='));
  if (ownRedis) {
    header('system packages (node scripts/system-packages.mjs demo)');
    const code = ensureSystemPackages('demo');
    if (code !== 0) return code;
  }
  return runNode([join(root, 'bin', 'regsync.js'), 'demo', ...args], 'the demo');
}

/** Newest of the benchmark's inputs: bench/, the test support it uses, the sources, the tsconfigs. */
function newestBenchInput() {
  return Math.max(
    newestSource(join(root, 'bench')),
    newestSource(join(root, 'test', 'support')),
    newestSource(join(root, 'src')),
    newestSource(join(root, 'adapters')),
    mtimeMs(join(root, 'tsconfig.json')) ?? 0,
    mtimeMs(join(root, 'tsconfig.bench.json')) ?? 0,
  );
}

/**
 * `npm run bench`: redis-server must be there (the benchmark starts its own), bench/ is compiled
 * into dist/ with tsconfig.bench.json when it changed, then `node dist/bench/run.js ...args` runs.
 */
async function bench(args) {
  header('system packages (node scripts/system-packages.mjs bench)');
  let code = ensureSystemPackages('bench');
  if (code !== 0) return code;
  const built = mtimeMs(join(root, 'dist', 'bench', 'run.js'));
  if (built === undefined || built < newestBenchInput()) {
    header('npx tsc -p tsconfig.bench.json');
    code = run(npx, ['--no', '--', 'tsc', '-p', 'tsconfig.bench.json']);
    if (code !== 0) return code;
  }
  // The gRPC adapter loads its .proto from beside its compiled module.
  code = run(process.execPath, [join(root, 'scripts', 'copy-protos.mjs')]);
  if (code !== 0) return code;
  header(`node dist/bench/run.js${args.length ? ` ${args.join(' ')}` : ''}`);
  return runNode([join(root, 'dist', 'bench', 'run.js'), ...args], 'the benchmarks');
}

/** Runs `node ...nodeArgs` in the repo root, forwarding SIGINT/SIGTERM; resolves with its exit code (as demo() does). */
function runNode(nodeArgs, what) {
  return new Promise((resolveExit) => {
    const child = spawn(process.execPath, nodeArgs, {
      cwd: root,
      stdio: 'inherit',
    });
    const forward = (signal) => {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    };
    process.on('SIGINT', forward);
    process.on('SIGTERM', forward);
    child.once('error', (error) => {
      console.error(`regsync bootstrap: could not start ${what}: ${error.message}`);
      resolveExit(1);
    });
    child.once('exit', (code, signal) => {
      process.off('SIGINT', forward);
      process.off('SIGTERM', forward);
      resolveExit(code ?? 128 + (constants.signals[signal] ?? 0));
    });
  });
}

async function main(argv) {
  const [command, ...args] = argv;
  if (command !== 'test' && command !== 'demo' && command !== 'bench') {
    console.error('usage: node scripts/bootstrap.mjs test [vitest args...] | demo [demo args...] | bench [bench args...]');
    return 2;
  }
  const major = Number(process.versions.node.split('.')[0]);
  if (major < 20) {
    console.error(`regsync needs Node.js 20 or newer; this is ${process.version}`);
    return 1;
  }
  let code = ensureNodeModules();
  if (code === 0) code = ensureBuild();
  if (code !== 0) return code;
  if (command === 'bench') return bench(args);
  return command === 'test' ? test(args) : await demo(args);
}

process.exitCode = await main(process.argv.slice(2));
