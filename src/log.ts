import { pino, type Logger, type LevelWithSilent } from 'pino';

/**
 * The process logger: JSON lines on stderr (stdout stays free for command output), level from
 * `REGSYNC_LOG_LEVEL` (default `info`). Components take a child with their own fields.
 */
export function createLogger(level: LevelWithSilent | undefined = undefined): Logger {
  const fromEnv = process.env.REGSYNC_LOG_LEVEL as LevelWithSilent | undefined;
  return pino(
    {
      name: 'regsync',
      level: level ?? fromEnv ?? 'info',
      redact: { paths: ['password', '*.password', 'accessToken', '*.accessToken'], censor: '[redacted]' },
    },
    pino.destination(2),
  );
}

/** A logger that writes nothing, for embedding in tests. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
