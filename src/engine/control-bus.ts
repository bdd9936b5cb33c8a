import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { TaskControl } from './control.js';

/** What travels on the bus: one {@link TaskControl} call. */
export interface ControlMessage {
  op: 'taskChanged' | 'resync' | 'removeTask' | 'clusterChanged';
  id: string;
  /** The process that sent it (it applied the change itself). */
  from: string;
  /** Where receivers acknowledge, when the sender waits for them. */
  ack?: string;
}

/** How long a sender waits for every worker to let go of a task it removes. */
const REMOVE_ACK_TIMEOUT_MS = 10_000;

/**
 * Tells every regsync process of a deployment what the REST API changed, over the Redis channel
 * `<p>:control`. The store stays the truth: a process that missed a message (it was restarting)
 * reads the store when it starts, and every full sync re-expands its tasks.
 *
 * `removeTask` waits (up to 10 s) until every live worker acknowledged that it stopped the task and
 * finished its reconciles, so that the copies removed afterwards are not written again by a
 * reconcile still under way elsewhere.
 */
export class ControlBus {
  readonly id: string;
  private readonly channel: string;

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly log: Logger,
    id?: string,
  ) {
    this.id = id ?? randomBytes(6).toString('hex');
    this.channel = `${prefix}:control`;
  }

  /**
   * A {@link TaskControl} that applies every call to `local` (this process's engine) and sends it
   * to the other processes; `workers()` answers the ids of the live workers other than this one.
   */
  control(local: TaskControl, workers: () => Promise<string[]>): TaskControl {
    return {
      taskChanged: async (id) => {
        await this.send({ op: 'taskChanged', id, from: this.id });
        await local.taskChanged(id);
      },
      resync: async (id) => {
        await this.send({ op: 'resync', id, from: this.id });
        await local.resync(id);
      },
      clusterChanged: async (id) => {
        await this.send({ op: 'clusterChanged', id, from: this.id });
        await local.clusterChanged(id);
      },
      removeTask: async (id) => {
        const expected = (await workers()).filter((w) => w !== this.id);
        const ack = `${this.prefix}:ack:${randomBytes(8).toString('hex')}`;
        await this.send({ op: 'removeTask', id, from: this.id, ack });
        await this.awaitAcks(ack, expected, id);
        await local.removeTask(id);
      },
    };
  }

  /**
   * Applies messages from other processes to `apply`; acknowledges those that ask for it, as
   * `worker`. `subscriber` must be a connection of its own.
   */
  async listen(subscriber: Redis, worker: string, apply: (message: ControlMessage) => Promise<void>): Promise<void> {
    subscriber.on('message', (channel: string, raw: string) => {
      if (channel !== this.channel) return;
      let message: ControlMessage;
      try {
        message = JSON.parse(raw) as ControlMessage;
      } catch {
        this.log.warn({ raw }, 'unreadable control message ignored');
        return;
      }
      if (message.from === this.id) return;
      void apply(message)
        .catch((err: unknown) => this.log.warn({ err, op: message.op, id: message.id }, 'control message failed'))
        .then(async () => {
          if (!message.ack) return;
          await this.redis.multi().rpush(message.ack, worker).pexpire(message.ack, 60_000).exec();
        })
        .catch((err: unknown) => this.log.warn({ err }, 'cannot acknowledge a control message'));
    });
    await subscriber.subscribe(this.channel);
  }

  private async send(message: ControlMessage): Promise<void> {
    await this.redis.publish(this.channel, JSON.stringify(message));
  }

  private async awaitAcks(ack: string, expected: readonly string[], taskId: string): Promise<void> {
    if (expected.length === 0) return;
    const deadline = Date.now() + REMOVE_ACK_TIMEOUT_MS;
    for (;;) {
      const acked = new Set(await this.redis.lrange(ack, 0, -1));
      const missing = expected.filter((w) => !acked.has(w));
      if (missing.length === 0) break;
      if (Date.now() >= deadline) {
        this.log.warn({ task: taskId, missing }, 'workers did not confirm that they stopped the task; removing its copies anyway');
        break;
      }
      await delay(25);
    }
    await this.redis.del(ack);
  }
}
