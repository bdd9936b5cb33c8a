import type { Command } from 'commander';
import { PREVIOUS_SECRET_KEY_FILE_ENV, SECRET_KEY_FILE_ENV, secretBoxFrom, type SecretBox } from '../secrets/index.js';

/** The secret key options of every command that reads or writes clusters in Redis. */
export interface SecretKeyCliOptions {
  /** `--secret-key-file` (default `REGSYNC_SECRET_KEY_FILE`). */
  secretKeyFile?: string | undefined;
  /** `--previous-secret-key-file` (default `REGSYNC_SECRET_KEY_PREVIOUS_FILE`). */
  previousSecretKeyFile?: string | undefined;
  /** Where `REGSYNC_SECRET_KEY` and `REGSYNC_SECRET_KEY_PREVIOUS` are read; default `process.env`. */
  secretKeyEnv?: Readonly<Record<string, string | undefined>> | undefined;
}

/**
 * Adds `--secret-key-file` and `--previous-secret-key-file` (`up`, `worker`, `api`, `dns`,
 * `secrets`). The key itself may also come from `REGSYNC_SECRET_KEY`, never from the command line,
 * where `ps` would show it.
 */
export function addSecretKeyOptions(command: Command): Command {
  return command
    .option(
      '--secret-key-file <file>',
      `file holding the key cluster secrets are encrypted with in Redis: 32 bytes as base64 or hex (also ${SECRET_KEY_FILE_ENV}, or the key itself in REGSYNC_SECRET_KEY)`,
      process.env[SECRET_KEY_FILE_ENV] || undefined,
    )
    .option(
      '--previous-secret-key-file <file>',
      `file holding a previous key, only read while rotating (also ${PREVIOUS_SECRET_KEY_FILE_ENV}, or keys in REGSYNC_SECRET_KEY_PREVIOUS, comma-separated)`,
      process.env[PREVIOUS_SECRET_KEY_FILE_ENV] || undefined,
    );
}

/**
 * The secret box the options and the environment give; throws a `SecretKeyError` naming the
 * source (never the key) before anything starts.
 */
export function secretBoxOfCli(opts: SecretKeyCliOptions): SecretBox {
  return secretBoxFrom({ keyFile: opts.secretKeyFile, previousKeyFile: opts.previousSecretKeyFile, env: opts.secretKeyEnv ?? process.env });
}
