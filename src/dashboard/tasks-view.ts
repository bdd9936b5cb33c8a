/// <reference lib="dom" />
import { h, replace, table, cell, type Child } from './dom.js';
import { formatAgo, formatCount, formatDuration, taskHref, truncate } from './format.js';
import { abbreviateId, matchesTask, TASK_FILTER_STATES, tasksHref, type TaskFilter, type TaskFilterState } from './task-filter.js';
import { TaskForm } from './task-form.js';
import { buildTopology } from './topology-model.js';
import { TopologyPanel } from './topology-view.js';
import type { Cluster, ClusterStatus, List, TaskSummary } from './types.js';
import { actionButton, Messages, section, stateBadge, type View, type ViewContext } from './ui.js';

/** The buttons that pause or resume, resync and delete a task. */
export function taskActions(ctx: ViewContext, messages: Messages, task: TaskSummary, afterDelete?: () => void): HTMLElement[] {
  const path = `tasks/${encodeURIComponent(task.id)}`;
  return [
    task.state === 'paused'
      ? actionButton(ctx, messages, 'Resume', () => ctx.api.post(`${path}/resume`), { done: `task ${task.id} resumed` })
      : actionButton(ctx, messages, 'Pause', () => ctx.api.post(`${path}/pause`), { done: `task ${task.id} paused` }),
    actionButton(ctx, messages, 'Resync', () => ctx.api.post(`${path}/resync`), { done: `task ${task.id}: every service is being reconciled` }),
    actionButton(
      ctx,
      messages,
      'Delete',
      async () => {
        await ctx.api.delete(path);
        afterDelete?.();
      },
      { danger: true, confirm: `Delete task ${task.id}? Its copies are removed from ${task.destination}.`, done: `task ${task.id} deleted` },
    ),
  ];
}

/** `2 failing, 1 held`, or `-`. */
export function problems(task: Pick<TaskSummary, 'failing' | 'held' | 'error'>): string {
  const parts = [task.error !== null ? 'task error' : '', task.failing > 0 ? `${formatCount(task.failing)} failing` : '', task.held > 0 ? `${formatCount(task.held)} held` : ''];
  return parts.filter(Boolean).join(', ') || '-';
}

/** `text` cut to `max` characters, with a line-break opportunity after each slash (paths, ids). */
function breakingAtSlashes(text: string, max: number, attrs: Record<string, string>): HTMLTableCellElement {
  const parts: Child[] = [];
  truncate(text, max)
    .split('/')
    .forEach((part, i) => parts.push(i === 0 ? null : '/', i === 0 ? null : h('wbr'), part));
  return h('td', { ...attrs, title: text.length > max ? text : null }, ...parts);
}

/** What a bulk action is called, and how its notice words the outcome. */
const BULK = { pause: 'paused', resume: 'resumed', delete: 'deleted' } as const;
type BulkAction = keyof typeof BULK;

/**
 * `#/tasks`: every task with its service syncs summed up, its actions, and the form that adds one.
 * Above the table, a search and a state filter narrow the loaded list in the page (kept in the
 * address, `#/tasks?q=...&state=...`), and Pause, Resume and Delete act on the ticked rows at once
 * through `POST /api/v1/tasks:batch`, which changes all of them or none. The add form is the
 * {@link TaskForm} a task's page edits with.
 */
export class TasksView implements View {
  private readonly messages = new Messages();
  private readonly list = h('div', { 'aria-live': 'polite' }, h('p', { class: 'loading' }, 'Loading…'));
  private readonly filter: TaskFilter;
  /** Ticked task ids; only the shown ones are acted on. */
  private readonly selected = new Set<string>();
  private tasks: TaskSummary[] = [];
  private shown: TaskSummary[] = [];
  private readonly count = h('span', { class: 'selection', id: 'tasks-selected' });
  private readonly bulkButtons: Record<BulkAction, HTMLButtonElement>;
  private readonly form: TaskForm;
  private readonly topology = new TopologyPanel();

  /** `filter`: the search and state the page opens with (from its address). */
  constructor(
    private readonly ctx: ViewContext,
    filter: TaskFilter = { search: '', state: '' },
  ) {
    this.filter = { ...filter };
    this.form = new TaskForm(ctx, { kind: 'add' });
    this.bulkButtons = {
      pause: this.bulkButton('pause', 'Pause'),
      resume: this.bulkButton('resume', 'Resume'),
      delete: this.bulkButton('delete', 'Delete'),
    };
  }

  mount(root: HTMLElement): void {
    const search = h('input', {
      type: 'search',
      id: 'tasks-search',
      placeholder: 'id, source, destination or service',
      'aria-label': 'Search tasks',
      autocomplete: 'off',
      value: this.filter.search,
      onInput: (event: Event) => {
        this.filter.search = (event.target as HTMLInputElement).value;
        this.filterChanged();
      },
    });
    const state = h(
      'select',
      {
        id: 'tasks-state',
        'aria-label': 'Filter by state',
        onChange: (event: Event) => {
          this.filter.state = (event.target as HTMLSelectElement).value as TaskFilterState;
          this.filterChanged();
        },
      },
      h('option', { value: '' }, 'every state'),
      ...TASK_FILTER_STATES.map((s) => h('option', { value: s, selected: s === this.filter.state }, s)),
    );
    const toolbar = h(
      'div',
      { class: 'filters tasks-toolbar' },
      search,
      state,
      h('span', { class: 'bulk', role: 'group', 'aria-label': 'Act on the selected tasks' }, this.count, this.bulkButtons.pause, this.bulkButtons.resume, this.bulkButtons.delete),
    );
    root.append(section('Topology', this.topology.el), section('Tasks', toolbar, this.messages.el, this.list), h('section', {}, this.form.el));
    this.updateBulk();
  }

  async refresh(): Promise<void> {
    try {
      const [tasks, clusters, statuses] = await Promise.all([
        this.ctx.api.get<List<TaskSummary>>('tasks:summary'),
        this.ctx.api.get<List<Cluster>>('clusters'),
        // Without reachability the picture still shows clusters and tasks.
        this.ctx.api.get<List<ClusterStatus>>('clusters:status').catch(() => undefined),
      ]);
      this.topology.render(buildTopology(clusters.items, statuses?.items, tasks.items));
      this.form.setClusters(clusters.items.map((c) => c.id));
      this.tasks = tasks.items.sort((a, b) => a.id.localeCompare(b.id));
      const known = new Set(this.tasks.map((t) => t.id));
      for (const id of this.selected) if (!known.has(id)) this.selected.delete(id);
      this.render();
    } catch (err) {
      this.messages.showError(err);
    }
  }

  /**
   * Redraws the rows and keeps the filter in the address (`#/tasks?q=orders&state=failing`), so that
   * a filtered list can be linked and survives a reload. `replaceState` changes the address without
   * a `hashchange` (which would mount the page again) and without a history entry per keystroke.
   */
  private filterChanged(): void {
    const href = tasksHref(this.filter);
    if (location.hash !== href) history.replaceState(history.state, '', href);
    this.render();
  }

  /** The ticked ids among the shown rows, in the table's order. */
  private chosen(): string[] {
    return this.shown.filter((t) => this.selected.has(t.id)).map((t) => t.id);
  }

  private bulkButton(action: BulkAction, label: string): HTMLButtonElement {
    const button = h('button', { type: 'button', class: action === 'delete' ? 'danger' : null, 'data-bulk': action }, label);
    button.addEventListener('click', () => {
      const ids = this.chosen();
      if (ids.length === 0 || !this.ctx.canWrite()) return;
      const what = ids.length === 1 ? `task ${ids[0]}` : `${ids.length} tasks`;
      if (action === 'delete' && !window.confirm(`Delete ${what} (${ids.join(', ')})? Their copies are removed from their destinations.`)) return;
      for (const b of Object.values(this.bulkButtons)) b.disabled = true;
      button.setAttribute('aria-busy', 'true');
      this.ctx.api
        .post('tasks:batch', { action, tasks: ids })
        .then(() => {
          if (action === 'delete') for (const id of ids) this.selected.delete(id);
          this.messages.showNotice(`${what} ${BULK[action]}`);
        })
        .catch((err: unknown) => this.messages.showError(err))
        .finally(() => {
          button.removeAttribute('aria-busy');
          this.updateBulk();
          this.ctx.refresh();
        });
    });
    return button;
  }

  /** The selection count and whether the bulk buttons may act. */
  private updateBulk(): void {
    const n = this.chosen().length;
    this.count.textContent = n === 0 ? 'none selected' : `${n} selected`;
    for (const button of Object.values(this.bulkButtons)) {
      button.disabled = n === 0 || !this.ctx.canWrite();
      button.title = this.ctx.canWrite() ? (n === 0 ? 'tick tasks first' : '') : 'needs an admin token';
    }
  }

  private render(): void {
    const now = Date.now();
    this.shown = this.tasks.filter((t) => matchesTask(t, this.filter));
    const rows = this.shown.map((t) => {
      const tick = h('input', { type: 'checkbox', class: 'select', 'aria-label': `Select ${t.id}`, checked: this.selected.has(t.id) });
      tick.addEventListener('change', () => {
        if (tick.checked) this.selected.add(t.id);
        else this.selected.delete(t.id);
        syncAll();
        this.updateBulk();
      });
      const short = abbreviateId(t.id);
      return h(
        'tr',
        { 'data-task': t.id },
        h('td', { class: 'select' }, tick),
        h('td', { class: 'id' }, h('a', { href: taskHref(t.id), title: short === t.id ? null : t.id, 'aria-label': short === t.id ? null : t.id }, short)),
        cell(`${t.source} → ${t.destination}`, { class: 'route' }),
        breakingAtSlashes(`${t.namespace}/${t.group}/${t.service}`, 48, { class: 'selects' }),
        h('td', {}, stateBadge(t.state)),
        cell(formatCount(t.serviceSyncs), { class: 'num syncs' }),
        cell(formatCount(t.sourceInstances), { class: 'num src' }),
        cell(formatCount(t.destinationInstances), { class: 'num dst' }),
        cell(formatDuration(t.maxLagMs), { class: 'num lag' }),
        cell(formatAgo(t.lastSyncAt, now), { class: 'ago', title: t.lastSyncAt ?? '' }),
        cell(problems(t), { class: t.failing > 0 || t.error !== null ? 'bad problems' : 'problems' }),
        breakingAtSlashes(t.lastError ?? '-', 90, { class: 'last-error' }),
        h('td', { class: 'actions' }, ...taskActions(this.ctx, this.messages, t)),
      );
    });
    const all = h('input', { type: 'checkbox', id: 'tasks-select-all', 'aria-label': 'Select every shown task', disabled: this.shown.length === 0 });
    const syncAll = (): void => {
      const n = this.chosen().length;
      all.checked = n > 0 && n === this.shown.length;
      all.indeterminate = n > 0 && n < this.shown.length;
    };
    all.addEventListener('change', () => {
      for (const t of this.shown) {
        if (all.checked) this.selected.add(t.id);
        else this.selected.delete(t.id);
      }
      this.list.querySelectorAll<HTMLInputElement>('tbody input.select').forEach((box) => (box.checked = all.checked));
      syncAll();
      this.updateBulk();
    });
    syncAll();
    this.updateBulk();
    const empty = this.tasks.length === 0 ? 'No tasks yet: add one below.' : 'No task matches the search and filter.';
    replace(
      this.list,
      table(
        [all, 'Task', 'From → to', 'Selects', 'State', 'Service syncs', 'Source', 'Copies', 'Max lag', 'Last sync', 'Problems', 'Last error', 'Actions'],
        rows,
        empty,
        { id: 'tasks' },
      ),
    );
  }
}
