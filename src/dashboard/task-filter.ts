import type { TaskSummary } from './types.js';

/** The states the task list filters by; a task may be in several (running and holding, say). */
export const TASK_FILTER_STATES = ['running', 'paused', 'failing', 'held'] as const;

/** One of {@link TASK_FILTER_STATES}, or `''` for every task. */
export type TaskFilterState = (typeof TASK_FILTER_STATES)[number] | '';

/** What the operator typed and chose above the task list. */
export interface TaskFilter {
  /** Case-insensitive substring of the id, source, destination or service; blank matches all. */
  search: string;
  state: TaskFilterState;
}

type Filterable = Pick<TaskSummary, 'id' | 'source' | 'destination' | 'service' | 'state' | 'failing' | 'held' | 'error'>;

/**
 * Whether a task is shown under `filter`. `failing` covers a task error as well as failing
 * service syncs, so that a task the table marks red is never hidden by the `failing` filter.
 */
export function matchesTask(task: Filterable, filter: TaskFilter): boolean {
  const needle = filter.search.trim().toLowerCase();
  if (needle !== '' && ![task.id, task.source, task.destination, task.service].some((text) => text.toLowerCase().includes(needle))) return false;
  switch (filter.state) {
    case 'running':
      return task.state === 'running';
    case 'paused':
      return task.state === 'paused';
    case 'failing':
      return task.state === 'error' || task.error !== null || task.failing > 0;
    case 'held':
      return task.held > 0;
    default:
      return true;
  }
}

/**
 * A long id cut in its middle (`orders-east-…-payments`): ids often differ only at their end, so
 * both ends stay readable in a narrow column. Ids of `max` characters or fewer are kept whole.
 */
export function abbreviateId(id: string, max = 24): string {
  if (id.length <= max) return id;
  const tail = Math.floor((max - 1) / 3);
  return `${id.slice(0, max - 1 - tail)}…${id.slice(id.length - tail)}`;
}

/**
 * The filter a task list's address asks for (`q` and `state` of `#/tasks?q=orders&state=failing`).
 * An unknown state is every state, so that a stale or mistyped link still lists tasks.
 */
export function taskFilterOf(params: URLSearchParams): TaskFilter {
  const state = params.get('state') ?? '';
  return { search: params.get('q') ?? '', state: (TASK_FILTER_STATES as readonly string[]).includes(state) ? (state as TaskFilterState) : '' };
}

/** The address of the task list under `filter`: `#/tasks`, or `#/tasks?q=orders&state=failing`. */
export function tasksHref(filter: TaskFilter): string {
  const params = new URLSearchParams();
  if (filter.search !== '') params.set('q', filter.search);
  if (filter.state !== '') params.set('state', filter.state);
  const query = params.toString();
  return query === '' ? '#/tasks' : `#/tasks?${query}`;
}
