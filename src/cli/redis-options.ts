import { Option, type Command } from 'commander';
import type { NodeOptions } from '../node.js';
import { redisClientSettings, type RedisCliOptions } from '../node/redis-target.js';
import { parseDuration } from './options.js';

/** The `--redis-*` options as commander hands them over (see {@link addRedisOptions}). */
export interface RedisCommandOptions extends RedisCliOptions {
  /** `--redis-grace`, ms (commands that run a worker). */
  redisGrace?: number | undefined;
}

/**
 * Adds the Redis connection flags every command that uses Redis takes: TLS files (`--redis-ca`,
 * `--redis-cert`, `--redis-key`, `--redis-tls-servername`) and the start bound
 * (`--redis-connect-timeout`); with `worker`, also `--redis-grace`. The URL forms are `--redis`'s
 * own (see `parseRedisUrl`).
 */
export function addRedisOptions(command: Command, worker = false): Command {
  // Shown as the flag is written (5s), not as the milliseconds it parses to.
  const connectTimeout = new Option('--redis-connect-timeout <duration>', 'how long the first Redis connection may take before the command exits with an error')
    .argParser(parseDuration)
    .default(5_000, '5s');
  command
    .option('--redis-ca <file>', 'CA certificates (PEM) that sign the Redis servers\' certificates, for rediss:// (default: the system\'s)')
    .option('--redis-cert <file>', 'client certificate (PEM) for Redis servers that ask for one (with --redis-key)')
    .option('--redis-key <file>', 'private key (PEM) of --redis-cert')
    .option('--redis-tls-servername <name>', 'name checked against the Redis server\'s certificate and sent as SNI (default: the host connected to)')
    .addOption(connectTimeout);
  if (worker) {
    command.option(
      '--redis-grace <duration>',
      'how long a shard leader keeps beating its copies while Redis does not answer (a failover), past its lease; 0: none (default: three lease TTLs)',
      (value: string) => (value.trim() === '0' ? 0 : parseDuration(value)),
    );
  }
  return command;
}

/** The Redis settings of a command's process from its flags; reads the TLS files (once, now). */
export function redisSettingsOf(opts: RedisCommandOptions): Pick<NodeOptions, 'redis' | 'redisGraceMs'> {
  return {
    redis: redisClientSettings(opts),
    ...(opts.redisGrace !== undefined ? { redisGraceMs: opts.redisGrace } : {}),
  };
}
