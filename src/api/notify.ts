import type { Logger } from 'pino';

/**
 * Tells the engine about a change the store already holds. A failure is logged, not answered:
 * the change is durable and the engine re-reads the store on its full-sync period anyway, while an
 * error status would make the client retry a change that already happened.
 */
export async function notifyEngine(
  log: Logger,
  what: { taskId?: string; clusterId?: string; call: string },
  call: () => Promise<void>,
): Promise<void> {
  try {
    await call();
  } catch (err) {
    log.warn({ err, ...what }, 'the engine was not told about a change; it picks it up at its next full sync');
  }
}
