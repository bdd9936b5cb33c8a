import type { FastifyInstance } from 'fastify';
import type { TaskSpec } from '../model/index.js';
import type { HistorySample } from '../store/task-history.js';
import { ApiError } from './api-error.js';
import { listOf, lookupParams } from './schemas.js';

/** Where `GET /api/v1/tasks/:id/history` reads a task's samples. */
export interface TaskHistorySource {
  read(taskId: string): Promise<HistorySample[]>;
}

/** One sample as the route answers it. */
export const historySampleView = {
  type: 'object',
  additionalProperties: false,
  required: ['at', 'copies', 'maxLagMs', 'failing', 'held'],
  properties: {
    at: { type: 'string', description: 'ISO-8601 time of the sample.' },
    copies: { type: 'integer', description: 'Copies in the destination (sum over the services).' },
    maxLagMs: { type: ['integer', 'null'], description: 'The largest lag of the services; null when none knows it.' },
    failing: { type: 'integer', description: 'Services whose last reconcile reported a problem.' },
    held: { type: 'integer', description: 'Services holding a mass deletion.' },
  },
} as const;

/**
 * `GET /api/v1/tasks/:id/history`: the task's samples of the last hour, oldest first
 * (`{items: [{at, copies, maxLagMs, failing, held}]}`), one per period the API role records
 * (see `TaskHistory`); empty while none was taken. Samples older than the task (of a task deleted
 * before under the same id, whose history has not expired yet) are left out. `task_not_found` for
 * an unknown task.
 */
export function registerHistoryRoutes(app: FastifyInstance, history: TaskHistorySource, store: { getTask(id: string): Promise<TaskSpec | undefined> }): void {
  app.get<{ Params: { id: string } }>(
    '/api/v1/tasks/:id/history',
    { schema: { params: lookupParams, response: { 200: listOf(historySampleView) } } },
    async (request) => {
      const { id } = request.params;
      const task = await store.getTask(id);
      if (task === undefined) throw new ApiError('task_not_found', `no task ${id}`);
      // A task deleted and created again under its id starts a new history.
      const since = Date.parse(task.createdAt);
      return { items: (await history.read(id)).filter((s) => !(Date.parse(s.at) < since)) };
    },
  );
}
