// Makes sure the system packages an entry of scripts/bootstrap.mjs needs are present, and installs
// what is missing: the same step for `npm run demo`, `npm test` and `npm run bench`, each asking for
// its own part of one list (the demo needs only redis-server; the tests need everything).
//
//   redis-server, redis-sentinel   the local Redis of `regsync up` and the demo; the tests' Redis and Sentinels
//   ZooKeeper                      Debian's /usr/share/java/zookeeper.jar (and java) for the ZooKeeper tests
//   dig (dnsutils)                 the DNS interface is tested with Debian's dig
//   chromium                       /usr/bin/chromium, which playwright-core drives in the dashboard's browser
//                                  tests (Debian's build: Playwright's own download comes from elsewhere)
//
// Plain Node ESM with node: builtins only, because it runs before `npm ci` may have happened.
//
//   node scripts/system-packages.mjs [test|demo|bench]
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
 * Each thing an entry may need: how to find it (its path, or undefined) and the Debian package that
 * brings it, in install order; `comesWith`: a package that brings it too. The zookeeper package
 * depends on default-jre, so java only needs its own package when ZooKeeper is there but java is not
 * (default-jre-headless is the part of default-jre that provides it).
 */
const REQUIREMENTS = [
  { name: 'redis-server', find: () => findExecutable('redis-server'), package: 'redis-server' },
  { name: 'redis-sentinel', find: () => findExecutable('redis-sentinel'), package: 'redis-sentinel' },
  { name: 'zookeeper', find: () => (existsSync(ZOOKEEPER_JAR) ? ZOOKEEPER_JAR : undefined), package: 'zookeeper' },
  { name: 'java', find: () => findExecutable('java'), package: 'default-jre-headless', comesWith: 'zookeeper' },
  { name: 'dig', find: () => findExecutable('dig'), package: 'dnsutils' },
  { name: 'chromium', find: () => (existsSync(CHROMIUM) ? CHROMIUM : undefined), package: 'chromium' },
];

/**
 * What each entry of scripts/bootstrap.mjs needs. The demo runs its own redis-server and nothing
 * else of the system (its registries are embedded); the benchmarks drive no browser.
 */
export const NEEDS = {
  test: REQUIREMENTS.map((r) => r.name),
  bench: REQUIREMENTS.map((r) => r.name).filter((name) => name !== 'chromium'),
  demo: ['redis-server'],
};

function requirementsOf(purpose) {
  const names = NEEDS[purpose];
  if (!names) throw new Error(`unknown purpose ${purpose}: one of ${Object.keys(NEEDS).join(', ')}`);
  return REQUIREMENTS.filter((r) => names.includes(r.name));
}

/**
 * The Debian packages that would provide what `purpose` needs and is missing, in install order;
 * empty when all is present.
 *
 * @param {keyof typeof NEEDS} [purpose]
 * @returns {string[]}
 */
export function missingSystemPackages(purpose = 'test') {
  const missing = requirementsOf(purpose)
    .filter((r) => r.find() === undefined)
    .map((r) => r.package);
  return missing.filter((pkg) => {
    const requirement = REQUIREMENTS.find((r) => r.package === pkg);
    return !(requirement?.comesWith && missing.includes(requirement.comesWith));
  });
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
 * Checks for what `purpose` needs; installs what is missing with apt-get when running as root on a
 * machine that has apt-get, otherwise prints `regsync <purpose> needs: apt-get install -y ...`.
 *
 * @param {keyof typeof NEEDS} [purpose]
 * @returns {number} 0 when everything is present (possibly after installing), 1 otherwise; meant as exit code.
 */
export function ensureSystemPackages(purpose = 'test') {
  let missing = missingSystemPackages(purpose);
  if (missing.length === 0) {
    const found = requirementsOf(purpose).map((r) => `${r.name} ${r.find()}`);
    console.log(`regsync ${purpose}: system packages present (${found.join(', ')})`);
    return 0;
  }
  const isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  if (isRoot && findExecutable('apt-get')) {
    install(missing);
    missing = missingSystemPackages(purpose);
    if (missing.length === 0) {
      console.log(`regsync ${purpose}: system packages installed`);
      return 0;
    }
  }
  console.error(`regsync ${purpose} needs: apt-get install -y ${missing.join(' ')}`);
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
  process.exitCode = ensureSystemPackages(process.argv[2] ?? 'test');
}
