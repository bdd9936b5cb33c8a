import { fastify } from 'fastify';
import { installErrorHandling } from './error-handler.js';
import { createTaskBody } from './schemas.js';
import { silentLogger } from '../log.js';
import { DEFAULT_GROUP, DEFAULT_NAMESPACE, type TaskSpec } from '../model/index.js';
import { taskRuleProblem } from '../model/task-rules.js';

/** What a task body becomes, as far as it can be known without the server. */
export type LocalTaskSpec = Pick<TaskSpec, 'source' | 'destination' | 'namespace' | 'group' | 'service' | 'options'>;

/**
 * Checks task bodies the server cannot compare yet: those naming a cluster that the same `apply`
 * creates first. They are checked with the API's own schema and its own validator settings (an
 * app that never listens, asked with `inject`), so a misspelt key reads as it would from the
 * server (`options.fullSyncIntervalMS is not a known field`), then with the task rules the server
 * applies. The check runs before `apply` writes anything.
 *
 * Deliberately left out: whether another stored task syncs the same service (none can: a cluster
 * that is not stored has no task).
 */
export class TaskBodyCheck {
  private readonly app = fastify({
    ajv: { customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: false } },
  });

  constructor() {
    installErrorHandling(this.app, silentLogger(), 64 * 1024);
    this.app.post('/check', { schema: { body: createTaskBody } }, async () => ({}));
  }

  /**
   * The problem of `body` (undefined: none), its namespace defaulting to `sourceNamespace` as the
   * server's would; `spec` is what it describes when it has no problem.
   */
  async check(body: Record<string, unknown>, sourceNamespace: string | undefined): Promise<{ problem?: string; spec?: LocalTaskSpec }> {
    const res = await this.app.inject({ method: 'POST', url: '/check', payload: body });
    if (res.statusCode !== 200) {
      const message = (res.json() as { error?: { message?: string } }).error?.message ?? `invalid (${res.statusCode})`;
      return { problem: message };
    }
    if (body.source === body.destination) return { problem: `source and destination are both ${String(body.source)}; a task copies between two clusters` };
    const spec: LocalTaskSpec = {
      source: body.source as string,
      destination: body.destination as string,
      namespace: (body.namespace as string | undefined) ?? sourceNamespace ?? DEFAULT_NAMESPACE,
      group: (body.group as string | undefined) ?? DEFAULT_GROUP,
      service: body.service as string,
      options: (body.options as TaskSpec['options'] | undefined) ?? {},
    };
    const problem = taskRuleProblem(spec);
    return problem === undefined ? { spec } : { problem };
  }

  /** Frees the app. */
  async close(): Promise<void> {
    await this.app.close();
  }
}
