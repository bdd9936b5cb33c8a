import type { Logger } from 'pino';
import type { WatchEvent } from '../../src/model/index.js';

/** One caller of `watch`. */
export interface Watcher {
  onChange: (event?: WatchEvent) => void;
}

/**
 * Calls every watcher of a service with `event`. A watcher removed by an earlier one in the loop
 * is not called any more; one that throws is logged and does not disturb the others.
 */
export function callWatchers(watchers: Set<Watcher>, event: WatchEvent | undefined, log: Logger, service: string): void {
  for (const watcher of [...watchers]) {
    if (!watchers.has(watcher)) continue;
    try {
      watcher.onChange(event);
    } catch (err) {
      log.error({ err, service }, 'a watcher of a nacos service threw');
    }
  }
}
