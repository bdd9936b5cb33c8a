import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { makeTempDir, removeTempDir } from './server-process.js';

/** Where Debian's chromium package puts the browser the dashboard tests drive. */
export const CHROMIUM = '/usr/bin/chromium';

const SETUP = fileURLToPath(new URL('./setup-system.mjs', import.meta.url));

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
