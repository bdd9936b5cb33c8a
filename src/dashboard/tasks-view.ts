/// <reference lib="dom" />
import { h, replace, table, cell } from './dom.js';
import { formatAgo, formatCount, formatDuration, taskHref } from './format.js';
import { buildTopology } from './topology-model.js';
import { TopologyPanel } from './topology-view.js';
import type { Cluster, ClusterStatus, List, TaskSummary } from './types.js';
import { actionButton, actionForm, field, Messages, section, setOptions, stateBadge, valueOf, type View, type ViewContext } from './ui.js';

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

/** `#/tasks`: every task with its service syncs summed up, its actions, and the form that adds one. */
export class TasksView implements View {
  private readonly messages = new Messages();
  private readonly list = h('div', { 'aria-live': 'polite' }, h('p', { class: 'loading' }, 'Loading…'));
  private readonly source = h('select', { name: 'source', required: true });
  private readonly destination = h('select', { name: 'destination', required: true });
  private readonly topology = new TopologyPanel();

  constructor(private readonly ctx: ViewContext) {}

  mount(root: HTMLElement): void {
    const form = actionForm(
      this.ctx,
      { id: 'add-task', title: 'Add a task', submitLabel: 'Add task' },
      [
        field('Id', h('input', { name: 'id', placeholder: 'derived when empty', autocomplete: 'off', pattern: '[a-z0-9]([a-z0-9-]*[a-z0-9])?' })),
        field('Source', this.source),
        field('Destination', this.destination),
        field('Service', h('input', { name: 'service', required: true, placeholder: 'orders, or * for every service', autocomplete: 'off' })),
        field('Group', h('input', { name: 'group', placeholder: 'DEFAULT_GROUP', autocomplete: 'off' })),
        field('Namespace', h('input', { name: 'namespace', placeholder: "the source's, or public", autocomplete: 'off' })),
        field('Options (JSON)', h('textarea', { name: 'options', rows: 2, placeholder: '{"include": ["orders-*"]}' }), 'optional; see the README for every option'),
      ],
      async (f) => {
        const body: Record<string, unknown> = { source: valueOf(f, 'source'), destination: valueOf(f, 'destination'), service: valueOf(f, 'service') };
        for (const name of ['id', 'group', 'namespace']) if (valueOf(f, name) !== '') body[name] = valueOf(f, name);
        const options = valueOf(f, 'options');
        if (options !== '') {
          try {
            body.options = JSON.parse(options) as unknown;
          } catch {
            throw new Error('options must be a JSON object, such as {"fullSyncIntervalMs": 60000}');
          }
        }
        const created = await this.ctx.api.post<TaskSummary>('tasks', body);
        return `task ${created.id} created`;
      },
    );
    root.append(section('Topology', this.topology.el), section('Tasks', this.messages.el, this.list), h('section', {}, form));
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
      const ids = clusters.items.map((c) => c.id).sort();
      setOptions(this.source, ids, 'choose a cluster');
      setOptions(this.destination, ids, 'choose a cluster');
      this.render(tasks.items.sort((a, b) => a.id.localeCompare(b.id)));
    } catch (err) {
      this.messages.showError(err);
    }
  }

  private render(tasks: TaskSummary[]): void {
    const now = Date.now();
    const rows = tasks.map((t) =>
      h(
        'tr',
        { 'data-task': t.id },
        h('td', { class: 'id' }, h('a', { href: taskHref(t.id) }, t.id)),
        cell(`${t.source} → ${t.destination}`),
        cell(`${t.namespace}/${t.group}/${t.service}`, {}, 48),
        h('td', {}, stateBadge(t.state)),
        cell(formatCount(t.serviceSyncs), { class: 'num syncs' }),
        cell(formatCount(t.sourceInstances), { class: 'num src' }),
        cell(formatCount(t.destinationInstances), { class: 'num dst' }),
        cell(formatDuration(t.maxLagMs), { class: 'num lag' }),
        cell(formatAgo(t.lastSyncAt, now), { title: t.lastSyncAt ?? '' }),
        cell(problems(t), { class: t.failing > 0 || t.error !== null ? 'bad' : '' }),
        cell(t.lastError ?? '-', { class: 'last-error' }, 90),
        h('td', { class: 'actions' }, ...taskActions(this.ctx, this.messages, t)),
      ),
    );
    replace(
      this.list,
      table(
        ['Task', 'From → to', 'Selects', 'State', 'Service syncs', 'Source', 'Copies', 'Max lag', 'Last sync', 'Problems', 'Last error', 'Actions'],
        rows,
        'No tasks yet: add one below.',
        { id: 'tasks' },
      ),
    );
  }
}
