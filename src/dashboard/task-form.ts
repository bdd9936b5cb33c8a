/// <reference lib="dom" />
import { h, replace } from './dom.js';
import type { TaskSummary } from './types.js';
import { actionForm, field, valueOf, type ViewContext } from './ui.js';

/** The fields of a task that the form edits, as `GET /api/v1/tasks/:id` answers them. */
export type StoredTask = Pick<TaskSummary, 'id' | 'source' | 'destination' | 'service' | 'group' | 'namespace' | 'options'>;

/** Adds a new task (`POST /api/v1/tasks`), or replaces the stored task `id` (`PUT /api/v1/tasks/:id`). */
export type TaskFormMode = { kind: 'add' } | { kind: 'edit'; id: string };

/**
 * The form of a task's fields, shared by the Tasks page (add) and a task's page (edit): id, source
 * and destination (selects of the stored clusters), service, group, namespace and the options as
 * JSON, sent as the API's task body. The API checks everything (clusters, selector taken by another
 * task, rules) and its refusal shows under the form as the API words it.
 *
 * When editing, the id is read-only and the stored values are the form's defaults, so that a save
 * or a reset leaves the form showing what is stored. Deliberately left out: a field per option (the
 * options are many and the README documents them; JSON keeps them all reachable).
 */
export class TaskForm {
  readonly el: HTMLElement;
  private readonly id = h('input', { name: 'id', placeholder: 'derived when empty', autocomplete: 'off', pattern: '[a-z0-9]([a-z0-9-]*[a-z0-9])?' });
  private readonly source = h('select', { name: 'source', required: true });
  private readonly destination = h('select', { name: 'destination', required: true });
  private readonly service = h('input', { name: 'service', required: true, placeholder: 'orders, or * for every service', autocomplete: 'off' });
  private readonly group = h('input', { name: 'group', placeholder: 'DEFAULT_GROUP', autocomplete: 'off' });
  private readonly namespace = h('input', { name: 'namespace', placeholder: "the source's, or public", autocomplete: 'off' });
  private readonly options = h('textarea', { name: 'options', rows: 2, placeholder: '{"include": ["orders-*"]}' });
  private clusters: string[] = [];
  private stored: StoredTask | undefined;

  /** `onSaved` gets the task as the API stored it. */
  constructor(
    private readonly ctx: ViewContext,
    private readonly mode: TaskFormMode,
    onSaved?: (task: StoredTask) => void,
  ) {
    const editing = mode.kind === 'edit';
    if (editing) {
      this.id.defaultValue = mode.id;
      this.id.readOnly = true;
      this.id.removeAttribute('pattern');
    }
    this.el = actionForm(
      ctx,
      editing
        ? { id: 'edit-task', title: `Edit task ${mode.id}`, submitLabel: 'Save task' }
        : { id: 'add-task', title: 'Add a task', submitLabel: 'Add task' },
      [
        field('Id', this.id, editing ? 'a task keeps its id' : undefined),
        field('Source', this.source),
        field('Destination', this.destination),
        field('Service', this.service),
        field('Group', this.group),
        field('Namespace', this.namespace),
        field('Options (JSON)', this.options, 'optional; see the README for every option'),
      ],
      async (form) => {
        const saved = await this.send(taskBody(form));
        if (editing) this.fill(saved);
        onSaved?.(saved);
        return editing ? `task ${saved.id} saved` : `task ${saved.id} created`;
      },
    );
  }

  /** Keeps the source and destination choices in step with the stored clusters. */
  setClusters(ids: string[]): void {
    const sorted = [...ids].sort();
    if (sorted.join('\n') === this.clusters.join('\n')) return;
    this.clusters = sorted;
    this.fillSelect(this.source, this.stored?.source);
    this.fillSelect(this.destination, this.stored?.destination);
  }

  /** Makes `task` what the form shows and goes back to on reset (editing). */
  fill(task: StoredTask): void {
    this.stored = task;
    this.service.defaultValue = task.service;
    this.group.defaultValue = task.group;
    this.namespace.defaultValue = task.namespace;
    this.options.defaultValue = Object.keys(task.options).length > 0 ? JSON.stringify(task.options) : '';
    this.fillSelect(this.source, task.source);
    this.fillSelect(this.destination, task.destination);
    (this.el as HTMLFormElement).reset();
  }

  private async send(body: Record<string, unknown>): Promise<StoredTask> {
    if (this.mode.kind === 'add') return this.ctx.api.post<StoredTask>('tasks', body);
    const { id } = this.mode;
    return this.ctx.api.request<StoredTask>('PUT', `tasks/${encodeURIComponent(id)}`, { ...body, id });
  }

  /**
   * The cluster ids as options; `stored` is the default choice (kept even when its cluster is gone,
   * so that the API names the missing cluster), what the operator chose stays chosen.
   */
  private fillSelect(select: HTMLSelectElement, stored: string | undefined): void {
    const chosen = select.value;
    const ids = stored !== undefined && !this.clusters.includes(stored) ? [...this.clusters, stored] : this.clusters;
    replace(select, h('option', { value: '' }, 'choose a cluster'), ...ids.map((id) => h('option', { value: id, selected: id === stored }, id)));
    if (chosen !== '' && ids.includes(chosen)) select.value = chosen;
  }
}

/** The API's task body from the form: blank optional fields are left out (the API's defaults apply). */
function taskBody(form: HTMLFormElement): Record<string, unknown> {
  const body: Record<string, unknown> = { source: valueOf(form, 'source'), destination: valueOf(form, 'destination'), service: valueOf(form, 'service') };
  for (const name of ['id', 'group', 'namespace']) if (valueOf(form, name) !== '') body[name] = valueOf(form, name);
  const options = valueOf(form, 'options');
  if (options !== '') {
    try {
      body.options = JSON.parse(options) as unknown;
    } catch {
      throw new Error('options must be a JSON object, such as {"fullSyncIntervalMs": 60000}');
    }
  }
  return body;
}
