import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { makeTempDir, removeTempDir } from './server-process.js';

/** Where Debian's chromium package puts the browser the dashboard tests drive. */
export const CHROMIUM = '/usr/bin/chromium';

const SETUP = fileURLToPath(new URL('../../scripts/system-packages.mjs', import.meta.url));
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
/** A build lock older than this was left by a run that died: taken over. */
const STALE_LOCK_MS = 120_000;

/** Newest modification time of the dashboard's sources, and oldest of the assets built from them (0: none built). */
function dashboardTimes(): { source: number; built: number } {
  const dir = join(ROOT, 'src', 'dashboard');
  let source = 0;
  for (const f of readdirSync(dir)) if (!f.endsWith('.test.ts')) source = Math.max(source, statSync(join(dir, f)).mtimeMs);
  const out = join(ROOT, 'dist', 'dashboard');
  const built = ['main.js', 'index.html', 'style.css'].map((f) => join(out, f));
  return { source, built: built.every((f) => existsSync(f)) ? Math.min(...built.map((f) => statSync(f).mtimeMs)) : 0 };
}

/**
 * Builds the dashboard's assets (`npm run build:dashboard`) when a source is newer than what
 * dist/dashboard holds, one test file at a time (a lock directory under dist/): a file rebuilding
 * the assets while another file's page loads them would serve half-written scripts. In a full run
 * the test command has built them already, and no file rebuilds.
 */
export function buildDashboard(): void {
  mkdirSync(join(ROOT, 'dist'), { recursive: true });
  const lock = join(ROOT, 'dist', '.dashboard-build.lock');
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const taken = statSync(lock, { throwIfNoEntry: false })?.mtimeMs;
      if (taken !== undefined && Date.now() - taken > STALE_LOCK_MS) rmSync(lock, { recursive: true, force: true });
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    }
  }
  try {
    const { source, built } = dashboardTimes();
    if (built > source) return;
    const run = spawnSync('npm', ['run', '--silent', 'build:dashboard'], { cwd: ROOT, encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`npm run build:dashboard failed:\n${run.stdout}\n${run.stderr}`);
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/**
 * Whether the browser is missing (after asking test support to install it, which it does as root);
 * says so on stderr, naming `what` is skipped, so a test file can `describe.skipIf` on it.
 */
export function chromiumMissing(what: string): boolean {
  if (!existsSync(CHROMIUM)) spawnSync(process.execPath, [SETUP], { stdio: 'inherit' });
  const missing = !existsSync(CHROMIUM);
  if (missing) console.warn(`${what} skipped: ${CHROMIUM} is missing and could not be installed (as root: apt-get install -y chromium)`);
  return missing;
}

/** A headless Chromium with a profile of its own, and its first page. */
export interface OpenBrowser {
  context: BrowserContext;
  page: Page;
  /** Closes the browser and removes its profile. */
  close(): Promise<void>;
}

/**
 * Starts headless Chromium on loopback with a fresh profile, a page of `viewport` size that
 * collects its uncaught errors into `pageErrors`; with `acceptDialogs`, every `window.confirm` is
 * answered yes (the operator confirms deletions).
 */
export async function openChromium(viewport: { width: number; height: number }, pageErrors: string[], options: { acceptDialogs?: boolean } = {}): Promise<OpenBrowser> {
  const profile = makeTempDir('regsync-chromium-');
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
    viewport,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(20_000);
  page.on('pageerror', (err) => pageErrors.push(err.message));
  if (options.acceptDialogs) page.on('dialog', (dialog) => void dialog.accept());
  return {
    context,
    page,
    async close() {
      await context.close();
      removeTempDir(profile);
    },
  };
}
