import { readFileSync, writeFileSync } from 'node:fs';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { createLogger } from '../log.js';
import { startRegistry, type RunningRegistry } from '../registry/registry-server.js';
import { applyDeclarations, dryRunSummary, formatResult, readDeclarations } from './apply-command.js';
import { exportDeclarations } from './export-command.js';
import { runImportNacosSync, type ImportCommandOptions } from './import-nacos-sync.js';
import type { SqlDialect } from './import-nacos-sync-sql.js';
import { runDemo, type DemoOptions } from './demo.js';
import { runDns, type DnsCommandOptions } from './dns-command.js';
import { addProcessOptions, expandConfigFile, type ProcessCliOptions } from './process-config.js';
import type { DnsSettings } from '../dns/dns-config.js';
import { DeploymentMismatchError } from '../coord/index.js';
import { SchemaVersionError } from '../store/index.js';
import { startNode } from '../node.js';
import {
  apiSecurityOf,
  parseListen,
  parseRateLimit,
  runUp,
  runWorker,
  stopOnSignal,
  type ApiSecurityCliOptions,
  type ShardOptions,
  type UpOptions,
} from './up-command.js';
import { addCmdbOptions, startCmdbFromCli, type CmdbCliOptions } from './cmdb-options.js';
import { parsePort, parsePositiveInt, parseServerUrl } from './options.js';
import { addRedisOptions, redisSettingsOf, type RedisCommandOptions } from './redis-options.js';
import { addRegistryOptions, closeOnSignal, parseGrpcPort, registryOptionsFrom, type RegistryCliOptions } from './registry-command.js';
import { addSecretKeyOptions, secretBoxOfCli, type SecretKeyCliOptions } from './secret-key-options.js';
import { addSecretsCommand } from './secrets-command.js';
import { addStatusCommand } from './status-command.js';

/** regsync's version from its package.json, from the build (dist/src/cli) or the sources (src/cli). */
function version(): string {
  for (const rel of ['../../../package.json', '../../package.json']) {
    try {
      const pkg = JSON.parse(readFileSync(new URL(rel, import.meta.url), 'utf8')) as { name?: string; version?: string };
      if (pkg.name === 'regsync' && typeof pkg.version === 'string') return pkg.version;
    } catch {
      // Not at this level: try the next.
    }
  }
  return 'unknown';
}

/** `--shards`, `--replicas`, `--worker-id`, `--lease-ttl-ms`, the CMDB and the secret key options of the commands that run a worker. */
function addShardOptions(command: Command): Command {
  return addSecretKeyOptions(addCmdbOptions(command))
    .option('--shards <n>', 'shards of the deployment, fixed at its first start (default 8, or as stored)', parsePositiveInt)
    .option('--replicas <n>', 'workers serving each shard, fixed at first start (default 2, or as stored)', parsePositiveInt)
    .option('--worker-id <id>', 'this worker\'s id (default <hostname>-<pid>-<random>)')
    .option('--lease-ttl-ms <ms>', 'lease of a shard\'s leadership: how long a dead leader holds it (default 5000)', parsePositiveInt);
}

/**
 * `--api-tokens-file` and `--rate-limit` of the commands that run the REST API. Tokens also come
 * from `REGSYNC_API_TOKENS` (never from the command line, where `ps` would show them).
 */
function addApiSecurityOptions(command: Command): Command {
  return command
    .option(
      '--api-tokens-file <file>',
      'YAML/JSON list of {name, scope: read|admin, token} the REST API requires (also REGSYNC_API_TOKENS_FILE; more tokens in REGSYNC_API_TOKENS="name:scope:token,...")',
      process.env.REGSYNC_API_TOKENS_FILE || undefined,
    )
    .option('--rate-limit <n>', 'requests per minute the REST API takes from one client address (0: no limit)', parseRateLimit, 600)
    .option('--tls-cert <file>', 'serve the REST API over HTTPS with this certificate chain (PEM; with --tls-key)')
    .option('--tls-key <file>', 'the private key of --tls-cert (PEM)');
}

/** `--sql-dialect`: one of auto, mysql, h2. */
function parseSqlDialect(value: string): SqlDialect {
  if (value === 'auto' || value === 'mysql' || value === 'h2') return value;
  throw new InvalidArgumentError('must be auto, mysql or h2');
}

/**
 * Builds the `regsync` command tree. `fromFile` carries what a `--config` file holds beyond flags
 * (its `dns:` section), filled in by {@link run} before the command runs.
 */
export function buildProgram(fromFile: { dns?: Partial<DnsSettings> | undefined } = {}): Command {
  const program = new Command('regsync')
    .description('Registry synchronization daemon: register once, read everywhere.')
    .version(version())
    .showHelpAfterError();

  addCmdbOptions(
    addRegistryOptions(
      program.command('registry').description('run the embedded Nacos-compatible registry (v1 and v3 naming API, SDK gRPC, UDP push, label selectors)'),
      8848,
    ),
  ).action(async (opts: RegistryCliOptions & CmdbCliOptions) => {
    const logger = createLogger();
    const cmdb = await startCmdbFromCli(opts, logger);
    let registry: RunningRegistry;
    try {
      registry = await startRegistry({ ...registryOptionsFrom(opts, logger), ...(cmdb ? { cmdb: cmdb.cache } : {}) });
    } catch (err) {
      await cmdb?.close();
      throw err;
    }
    const grpc = registry.grpcEndpoint ? ` and gRPC ${registry.grpcEndpoint}` : '';
    process.stdout.write(`regsync registry listening on ${registry.url}${grpc}${cmdb ? ` (CMDB: ${cmdb.describe})` : ''}\n`);
    closeOnSignal(registry, logger, async () => {
      await cmdb?.close();
    });
  });

  addShardOptions(
    addApiSecurityOptions(
      addRedisOptions(addProcessOptions(program.command('up')), true)
        .description('run the REST API and a sync worker in one process')
        .option('--listen <host:port>', 'where the REST API listens', '127.0.0.1:8080')
        .option('--redis <url>', 'Redis holding tasks, status and queues (also REGSYNC_REDIS_URL); without it a local redis-server is started')
        .option('--data-dir <dir>', 'data of the local redis-server', '.regsync')
        .option('--dns-listen <host:port>', 'also run the DNS interface here (UDP and TCP), e.g. 127.0.0.1:5353')
        .option('--dns-config <file>', 'DNS settings file (YAML: zone, clusters, ttl, aliases, site, upstreams; see README); runs the DNS interface')
        .option('--dns-zone <zone>', 'zone the DNS interface answers (default regsync.internal)')
        .option('--dns-clusters <ids>', 'comma-separated clusters the DNS interface serves (default all)')
        .option('--dns-upstream <list>', 'comma-separated resolvers (ip[:port]) for names outside the zone (default none: REFUSED)'),
    ),
  ).action(async (opts: UpOptions & ProcessCliOptions) => {
    const logger = createLogger(opts.logLevel);
    const handle = await runUp({ ...opts, apiTokensEnv: process.env.REGSYNC_API_TOKENS, dnsSection: fromFile.dns }, logger);
    const dns = handle.dns ? `; DNS on ${handle.dns.host}:${handle.dns.port}` : '';
    const redis = handle.localRedis ? `; local redis-server ${handle.localRedis.url} (data in ${handle.localRedis.dataDir})` : '';
    process.stdout.write(`regsync up: REST API listening on ${handle.node.url} (worker ${handle.node.id})${dns}${redis}\n`);
    stopOnSignal(() => handle.close(), logger);
  });

  addShardOptions(
    addRedisOptions(addProcessOptions(program.command('worker')), true)
      .description('run a sync worker (no HTTP): serves and leads shards of the deployment in Redis')
      .requiredOption('--redis <url>', 'Redis holding tasks, status and queues (also REGSYNC_REDIS_URL)', process.env.REGSYNC_REDIS_URL)
      .option('--metrics-listen <host:port>', 'serve Prometheus metrics (GET /metrics) and GET /healthz here (default: off)')
      .option('--metrics-token-file <file>', 'require this bearer token on /metrics (also REGSYNC_METRICS_TOKEN; /healthz stays open)'),
  ).action(async (opts: ShardOptions & ProcessCliOptions & { redis: string; metricsListen?: string; metricsTokenFile?: string }) => {
    const logger = createLogger(opts.logLevel);
    const { node, close } = await runWorker({ ...opts, metricsTokenEnv: process.env.REGSYNC_METRICS_TOKEN }, logger);
    const metrics = node.metricsUrl ? `; metrics on ${node.metricsUrl}/metrics` : '';
    process.stdout.write(`regsync worker ${node.id} running (${node.deployment.shards} shards, ${node.deployment.replicas} replicas)${metrics}\n`);
    stopOnSignal(close, logger);
  });

  addSecretKeyOptions(addApiSecurityOptions(
    addRedisOptions(addProcessOptions(program.command('api')))
      .description('run the REST API only (no sync work); any number of them against one Redis')
      .option('--listen <host:port>', 'where the REST API listens', '127.0.0.1:8080')
      .requiredOption('--redis <url>', 'Redis holding tasks, status and queues (also REGSYNC_REDIS_URL)', process.env.REGSYNC_REDIS_URL),
  ))
    .action(async (opts: { listen: string; redis: string } & ApiSecurityCliOptions & ProcessCliOptions & SecretKeyCliOptions & RedisCommandOptions) => {
      const logger = createLogger(opts.logLevel);
      const listen = parseListen(opts.listen);
      const security = apiSecurityOf({ ...opts, apiTokensEnv: process.env.REGSYNC_API_TOKENS });
      const node = await startNode({ redisUrl: opts.redis, roles: ['api'], listen, logger, prefix: opts.prefix, ...security, ...redisSettingsOf(opts), secrets: secretBoxOfCli(opts) });
      process.stdout.write(`regsync api: REST API listening on ${node.url}\n`);
      stopOnSignal(() => node.close(), logger);
    });

  addSecretKeyOptions(addCmdbOptions(
    addRedisOptions(addProcessOptions(program.command('dns')))
      .description('run the DNS interface: every service of the stored clusters, answered over UDP and TCP (same site first with a CMDB)')
      .requiredOption('--redis <url>', 'Redis of the deployment whose clusters are served (also REGSYNC_REDIS_URL)', process.env.REGSYNC_REDIS_URL)
      .option('--listen <host:port>', 'where to answer, UDP and TCP (default 127.0.0.1:5353)')
      .option('--zone <zone>', 'the zone answered (default regsync.internal)')
      .option('--clusters <ids>', 'comma-separated clusters to serve (default all)')
      .option('--upstream <list>', 'comma-separated resolvers (ip[:port]) for names outside the zone (default none: REFUSED)')
      .option('--dns-config <file>', 'DNS settings file (YAML: zone, clusters, ttl, aliases, site, upstreams; see README); flags win over it')
      .option('--metrics-listen <host:port>', 'serve GET /metrics, /healthz and /status here (default: off)')
      .option('--metrics-token-file <file>', 'require this bearer token on /metrics and /status (also REGSYNC_METRICS_TOKEN; /healthz stays open)'),
  )).action(async (opts: DnsCommandOptions & ProcessCliOptions) => {
    const logger = createLogger(opts.logLevel);
    const handle = await runDns({ ...opts, dnsSection: fromFile.dns, metricsTokenEnv: process.env.REGSYNC_METRICS_TOKEN }, logger);
    const metrics = handle.metrics ? `; metrics and status on ${handle.metrics.url}` : '';
    process.stdout.write(`regsync dns: zone ${handle.dns.catalogue.zone} on ${handle.dns.host}:${handle.dns.port} (UDP and TCP)${metrics}\n`);
    stopOnSignal(() => handle.close(), logger);
  });

  program
    .command('apply')
    .description('create or update clusters and tasks from YAML files (idempotent); every entry is checked before the first write')
    .requiredOption('-f, --file <path>', 'a YAML file or a directory of them (CMDB data files in it are skipped)')
    .option('--server <url>', 'the regsync REST API: http(s)://host:port, or host:port for http (also REGSYNC_API)', parseServerUrl, process.env.REGSYNC_API ?? 'http://127.0.0.1:8080')
    .option('--dry-run', 'print what would change against what is stored, and write nothing')
    .option('--prune', 'also delete stored clusters and tasks the files do not name (only of the kinds the files declare; never a cluster a remaining task uses)')
    .option('--exit-code', 'with --dry-run: exit with code 2 when changes are pending')
    .action(async (opts: { file: string; server: string; dryRun?: boolean; prune?: boolean; exitCode?: boolean }) => {
      const note = (line: string) => process.stderr.write(`${line}\n`);
      const decl = readDeclarations(opts.file);
      for (const line of decl.skipped ?? []) note(line);
      // A token comes from the environment only: command lines end up in shell histories and process lists.
      const dryRun = opts.dryRun === true;
      const results = await applyDeclarations(parseServerUrl(opts.server), decl, { token: process.env.REGSYNC_API_TOKEN, dryRun, prune: opts.prune === true, note });
      for (const r of results) process.stdout.write(`${formatResult(r, dryRun)}\n`);
      if (dryRun) {
        process.stdout.write(`${dryRunSummary(results)}\n`);
        if (opts.exitCode && results.some((r) => r.action !== 'unchanged')) process.exitCode = 2;
      }
    });

  program
    .command('export')
    .description('write the stored clusters and tasks as YAML that `regsync apply` takes back unchanged (passwords are never exported)')
    .option('--server <url>', 'the regsync REST API: http(s)://host:port, or host:port for http (also REGSYNC_API)', parseServerUrl, process.env.REGSYNC_API ?? 'http://127.0.0.1:8080')
    .option('-o, --output <file>', 'write to this file instead of stdout')
    .action(async (opts: { server: string; output?: string }) => {
      const text = await exportDeclarations(parseServerUrl(opts.server), process.env.REGSYNC_API_TOKEN);
      if (opts.output === undefined) process.stdout.write(text);
      else writeFileSync(opts.output, text);
    });

  program
    .command('import-nacos-sync')
    .description('read nacos-sync\'s cluster and task tables (a SQL dump, or CSV files) and write them as YAML for `regsync apply`, or apply them')
    .argument('<files...>', 'a SQL dump (mysqldump, H2 SCRIPT) of the cluster and task tables, or one .csv/.tsv file per table with a header row')
    .option('-o, --output <file>', 'write the YAML to this file instead of stdout')
    .option('--apply', 'apply the clusters and tasks to the regsync at --server instead of writing YAML, as `regsync apply` does')
    .option('--server <url>', 'with --apply: the regsync REST API: http(s)://host:port, or host:port for http (also REGSYNC_API)', parseServerUrl, process.env.REGSYNC_API ?? 'http://127.0.0.1:8080')
    .option('--dry-run', 'with --apply: print what would change against what is stored, and write nothing')
    .option('--strict', 'refuse the whole import when any row cannot be imported (default: report each on stderr and skip it)')
    .option('--include-passwords', 'write cluster passwords into the YAML (default: ${NACOS_SYNC_PASSWORD_<NAME>_<KIND>} references that apply fills from its environment)')
    .option('--sql-dialect <dialect>', 'how the dump\'s strings escape: auto, mysql (backslash escapes) or h2 (quotes doubled only)', parseSqlDialect, 'auto')
    .action(async (files: string[], opts: Omit<ImportCommandOptions, 'token'>) => {
      // A token comes from the environment only, as for `apply`.
      await runImportNacosSync(files, { ...opts, server: parseServerUrl(opts.server), token: process.env.REGSYNC_API_TOKEN }, {
        out: (text) => process.stdout.write(text),
        err: (line) => process.stderr.write(`${line}\n`),
      });
    });

  addSecretsCommand(program, () => createLogger());
  addStatusCommand(program);

  program
    .command('demo')
    .description('two embedded registries (shanghai, beijing) synced both ways by a local regsync')
    .option('--shanghai-port <port>', 'HTTP port of the shanghai registry', parsePort, 8848)
    .option('--beijing-port <port>', 'HTTP port of the beijing registry', parsePort, 8849)
    .option('--shanghai-grpc-port <port>', 'gRPC port of the shanghai registry (default: its HTTP port + 1000; off: none)', parseGrpcPort)
    .option('--beijing-grpc-port <port>', 'gRPC port of the beijing registry (default: its HTTP port + 1000; off: none)', parseGrpcPort)
    .option('--listen <host:port>', 'where the REST API listens', '127.0.0.1:8080')
    .option('--dns-listen <host:port>', 'where the DNS interface answers (off: none)', '127.0.0.1:5353')
    .option('--data-dir <dir>', 'data of the demo\'s local redis-server, emptied at every start', '.regsync/demo')
    .option('--redis <url>', 'use this Redis instead of a local redis-server')
    .action(async (opts: DemoOptions) => {
      await runDemo(opts);
    });

  return program;
}

/** Runs the command line; exits non-zero with a one-line message on bad input or startup failure. */
export async function run(argv: string[]): Promise<void> {
  const fromFile: { dns?: Partial<DnsSettings> | undefined } = {};
  const program = buildProgram(fromFile);
  program.exitOverride();
  try {
    const expanded = expandConfigFile(program, argv);
    fromFile.dns = expanded.dns;
    await program.parseAsync(expanded.argv);
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode);
    const message = err instanceof Error ? err.message : String(err);
    process.stderr.write(`regsync: ${message}\n`);
    process.exit(err instanceof DeploymentMismatchError || err instanceof SchemaVersionError ? 2 : 1);
  }
}
