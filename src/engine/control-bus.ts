import { randomBytes } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { TaskControl } from './control.js';
import { redisKeys } from '../util/redis-keys.js';

/** What travels on the bus: one {@link TaskControl} call. */
export interface ControlMessage {
  /**
   * A {@link TaskControl} call, or `removalLapsed`: the sender of a `removeTask` of this task is gone
   * without saying how it ended (receivers make it up themselves: see {@link ControlBus.listen}).
   */
  op: 'taskChanged' | 'resync' | 'removeTask' | 'clusterChanged' | 'removalLapsed';
  id: string;
  /** The process that sent it (it applied the change itself). */
  from: string;
  /** Where receivers acknowledge, when the sender waits for them. */
  ack?: string;
  /** `removeTask`: the key the sender keeps while it removes the copies, and for a while after. */
  fence?: string;
}

/** How long a sender waits for every worker to let go of a task it removes. */
const REMOVE_ACK_TIMEOUT_MS = 10_000;

/**
 * How long the fence of a removal outlives its last renewal. The sender renews it while it removes
 * the copies and lets it lapse this long after; by then it has deleted or rewritten the task, or
 * started it again (a failed removal). A fence that lapses with the task still stored as running
 * means the sender died in between: the receivers start the task again themselves.
 */
const REMOVAL_FENCE_TTL_MS = 15_000;

/**
 * Tells every regsync process of a deployment what the REST API changed, over the Redis channel
 * `<p>:control`. The store stays the truth: a process that missed a message (it was restarting)
 * reads the store when it starts, and every full sync re-expands its tasks.
 *
 * `removeTask` waits (up to 10 s) until every live worker acknowledged that it stopped the task and
 * finished its reconciles, so that the copies removed afterwards are not written again by a
 * reconcile still under way elsewhere. While it removes the copies the sender holds a fence in
 * Redis (`<p>:removing:<task>`); a receiver that stopped the task for it waits for the fence to
 * lapse and then runs the task again if the store still says so, so that a sender that died mid-way
 * does not leave the task stopped everywhere.
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
    this.channel = redisKeys.controlChannel(prefix);
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
        const fence = redisKeys.removing(this.prefix, id);
        await this.redis.set(fence, this.id, 'PX', REMOVAL_FENCE_TTL_MS);
        const renew = setInterval(() => void this.redis.pexpire(fence, REMOVAL_FENCE_TTL_MS).catch(() => undefined), REMOVAL_FENCE_TTL_MS / 3);
        renew.unref();
        try {
          const expected = (await workers()).filter((w) => w !== this.id);
          const ack = redisKeys.ack(this.prefix, randomBytes(8).toString('hex'));
          await this.send({ op: 'removeTask', id, from: this.id, ack, fence });
          await this.awaitAcks(ack, expected, id);
          await local.removeTask(id);
        } finally {
          clearInterval(renew);
          // Counted from now: the caller's write (or restart) of the task comes next.
          await this.redis.pexpire(fence, REMOVAL_FENCE_TTL_MS).catch(() => undefined);
        }
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
      if (message.op === 'removeTask' && message.fence) this.awaitFence(message.fence, message.id, apply);
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

  /** Once `fence` lapsed, applies `removalLapsed` of the task (the receiver decides whether it still has to run). */
  private awaitFence(fence: string, taskId: string, apply: (message: ControlMessage) => Promise<void>): void {
    const check = async (): Promise<void> => {
      const left = await this.redis.pttl(fence);
      if (left !== -2) {
        // Still held (or, without an expiry, held by hand): look again once it can have lapsed.
        setTimeout(() => void check().catch(onError), left > 0 ? left + 100 : REMOVAL_FENCE_TTL_MS).unref();
        return;
      }
      await apply({ op: 'removalLapsed', id: taskId, from: this.id });
    };
    const onError = (err: unknown) => this.log.warn({ err, task: taskId }, 'cannot check the fence of a removal; the next full sync of a restart picks the task up');
    setTimeout(() => void check().catch(onError), REMOVAL_FENCE_TTL_MS).unref();
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
