// Makes sure the system packages the tests need are present: redis-server, redis-sentinel, dig (dnsutils), ZooKeeper (Debian's
// /usr/share/java/zookeeper.jar), java, and Debian's chromium (/usr/bin/chromium), which
// playwright-core drives in the dashboard's browser test (Debian's build, because Playwright's own
// browser download comes from a host outside the package registries). Plain Node ESM with node:
// builtins only, because it runs before `npm ci` may have happened.
//
//   node test/support/setup-system.mjs
//
// As root on a Debian/Ubuntu machine it installs what is missing with apt-get; otherwise it prints the
// apt-get line to run and exits 1. It never touches anything when everything is already present.
import { spawnSync } from 'node:child_process';
import { accessSync, constants, existsSync, readdirSync, realpathSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ZOOKEEPER_JAR = '/usr/share/java/zookeeper.jar';
/** Where Debian's chromium package puts the browser; test/e2e/dashboard.test.ts launches it from here. */
export const CHROMIUM = '/usr/bin/chromium';

/** The absolute path of an executable on PATH, or undefined. */
function findExecutable(name) {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * The Debian packages that would provide what is missing, in install order; empty when all is present.
 * The zookeeper package depends on default-jre, so java only needs its own package when ZooKeeper is
 * there but java is not (default-jre-headless is the part of default-jre that provides it).
 *
 * @param {{chromium?: boolean}} [options] `chromium: false` leaves the browser out (the benchmarks need none).
 * @returns {string[]}
 */
export function missingSystemPackages({ chromium = true } = {}) {
  const missing = [];
  if (!findExecutable('redis-server')) missing.push('redis-server');
  // The Sentinel failover tests run Debian's redis-sentinel (a primary, a replica, three sentinels).
  if (!findExecutable('redis-sentinel')) missing.push('redis-sentinel');
  const zookeeperMissing = !existsSync(ZOOKEEPER_JAR);
  if (zookeeperMissing) missing.push('zookeeper');
  if (!findExecutable('java') && !zookeeperMissing) missing.push('default-jre-headless');
  if (chromium && !existsSync(CHROMIUM)) missing.push('chromium');
  // The DNS interface is tested with Debian's dig.
  if (!findExecutable('dig')) missing.push('dnsutils');
  return missing;
}

function run(command, args) {
  const result = spawnSync(command, args, {
    stdio: 'inherit',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (result.error) {
    console.error(`regsync: could not run ${command}: ${result.error.message}`);
    return false;
  }
  return result.status === 0;
}

/** True when apt knows an installable version of every package (apt lists present and current enough). */
function aptKnows(packages) {
  const listsDir = '/var/lib/apt/lists';
  let hasLists;
  try {
    hasLists = readdirSync(listsDir).some((name) => name.endsWith('_Packages') || name.includes('_Packages.'));
  } catch {
    hasLists = false;
  }
  if (!hasLists) return false;
  return packages.every((pkg) => {
    const policy = spawnSync('apt-cache', ['policy', pkg], { encoding: 'utf8' });
    const candidate = /Candidate:\s*(\S+)/.exec(policy.stdout ?? '');
    return policy.status === 0 && candidate !== null && candidate[1] !== '(none)';
  });
}

function install(packages) {
  let updated = false;
  if (!aptKnows(packages)) {
    console.log('regsync: apt-get update');
    if (!run('apt-get', ['update'])) return false;
    updated = true;
  }
  const installArgs = ['install', '-y', '--no-install-recommends', ...packages];
  console.log(`regsync: apt-get ${installArgs.join(' ')}`);
  if (run('apt-get', installArgs)) return true;
  if (updated) return false;
  // Stale package lists (e.g. 404s for superseded versions): refresh once and retry.
  console.log('regsync: apt-get install failed; running apt-get update and trying again');
  return run('apt-get', ['update']) && run('apt-get', installArgs);
}

/**
 * Checks for redis-server, redis-sentinel, ZooKeeper, java, chromium and dig; installs what is missing with apt-get when running as root
 * on a machine that has apt-get, otherwise prints `regsync tests need: apt-get install -y ...`.
 *
 * @param {{chromium?: boolean}} [options] see {@link missingSystemPackages}.
 * @returns {number} 0 when everything is present (possibly after installing), 1 otherwise; meant as exit code.
 */
export function ensureSystemPackages(options = {}) {
  let missing = missingSystemPackages(options);
  if (missing.length === 0) {
    console.log(
      `regsync tests: system packages present (redis-server ${findExecutable('redis-server')}, redis-sentinel ${findExecutable('redis-sentinel')}, ` +
        `zookeeper ${ZOOKEEPER_JAR}, java ${findExecutable('java')}, dig ${findExecutable('dig')}` +
        `${options.chromium === false ? '' : `, chromium ${CHROMIUM}`})`,
    );
    return 0;
  }
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (isRoot && findExecutable('apt-get')) {
    install(missing);
    missing = missingSystemPackages(options);
    if (missing.length === 0) {
      console.log('regsync tests: system packages installed');
      return 0;
    }
  }
  console.error(`regsync tests need: apt-get install -y ${missing.join(' ')}`);
  return 1;
}

function invokedDirectly() {
  if (!process.argv[1]) return false;
  try {
    return realpathSync(process.argv[1]) === realpathSync(fileURLToPath(import.meta.url));
  } catch {
    return false;
  }
}

if (invokedDirectly()) {
  process.exitCode = ensureSystemPackages();
}
