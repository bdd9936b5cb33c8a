/// <reference lib="dom" />
import { ApiRequestError } from './api-client.js';
import { cell, h, replace, table } from './dom.js';
import { formatAgo, formatCount, formatDuration } from './format.js';
import { historyCharts, type HistorySample } from './history-chart.js';
import { TaskForm, type StoredTask } from './task-form.js';
import { problems, taskActions } from './tasks-view.js';
import type { Cluster, List, ServicePage, ServiceStatus, SyncEvent, TaskSummary } from './types.js';
import { actionButton, Messages, type View, type ViewContext } from './ui.js';

/** Services shown per page: enough to scan, few enough to draw at once whatever the task's size. */
export const PAGE_SIZE = 100;
/** Recent events shown. */
const EVENTS = 30;

/**
 * `#/tasks/:id`: one task, its actions (with Edit, which opens the task's form), one page of its services (searchable, filtered by problem
 * or held deletion) with a Release button for each held mass deletion, and its recent events.
 */
export class TaskView implements View {
  private readonly messages = new Messages();
  private readonly facts = h('div', { class: 'facts' });
  private readonly actions = h('div', { class: 'actions' });
  private readonly search = h('input', { type: 'search', name: 'q', placeholder: 'Search services', 'aria-label': 'Search services', autocomplete: 'off' });
  private readonly only = h(
    'select',
    { name: 'only', 'aria-label': 'Show' },
    h('option', { value: '' }, 'all services'),
    h('option', { value: 'error' }, 'with problems'),
    h('option', { value: 'held' }, 'holding a deletion'),
  );
  private readonly pager = h('nav', { class: 'pager', 'aria-label': 'Service pages' });
  private readonly services = h('div', { 'aria-live': 'polite' }, h('p', { class: 'loading' }, 'Loading…'));
  private readonly events = h('div', {});
  private readonly history = h('div', {});
  /** The edit form, while it is open (the Edit action opens it, filled from the stored task). */
  private readonly editor = h('div', { class: 'task-editor', hidden: true });
  private form: TaskForm | undefined;
  private offset = 0;
  private searchTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(
    private readonly ctx: ViewContext,
    private readonly id: string,
  ) {}

  wants(event: SyncEvent): boolean {
    return event.taskId === undefined || event.taskId === this.id;
  }

  mount(root: HTMLElement): void {
    this.search.addEventListener('input', () => {
      if (this.searchTimer !== undefined) clearTimeout(this.searchTimer);
      this.searchTimer = setTimeout(() => {
        this.offset = 0;
        this.ctx.refresh();
      }, 250);
    });
    this.only.addEventListener('change', () => {
      this.offset = 0;
      this.ctx.refresh();
    });
    const filters = h('form', { class: 'filters', role: 'search' }, this.search, this.only);
    filters.addEventListener('submit', (event) => event.preventDefault());
    root.append(
      h('p', {}, h('a', { href: '#/tasks' }, '← All tasks')),
      h('section', {}, h('h2', {}, 'Task ', h('code', {}, this.id)), this.messages.el, this.facts, this.actions, this.editor),
      h('section', {}, h('h2', {}, 'Last hour'), this.history),
      h('section', {}, h('h2', {}, 'Services'), filters, this.pager, this.services),
      h('section', {}, h('h2', {}, 'Recent events'), this.events),
    );
  }

  async refresh(): Promise<void> {
    const path = `tasks/${encodeURIComponent(this.id)}`;
    const query = new URLSearchParams({ offset: String(this.offset), limit: String(PAGE_SIZE) });
    if (this.search.value.trim() !== '') query.set('q', this.search.value.trim());
    if (this.only.value !== '') query.set('only', this.only.value);
    try {
      const [summary, page, events, history] = await Promise.all([
        this.ctx.api.get<TaskSummary>(`${path}/summary`),
        this.ctx.api.get<ServicePage>(`${path}/services?${query.toString()}`),
        this.ctx.api.get<List<SyncEvent>>(`${path}/events?limit=${EVENTS}`).catch((err: unknown) => {
          // A server without the events route: say so instead of failing the page.
          if (err instanceof ApiRequestError && err.status === 404 && err.code === 'not_found') return undefined;
          throw err;
        }),
        this.ctx.api.get<List<HistorySample>>(`${path}/history`).catch((err: unknown) => {
          // A server without the history route: the section says so.
          if (err instanceof ApiRequestError && err.status === 404 && err.code === 'not_found') return undefined;
          throw err;
        }),
      ]);
      if (page.items.length === 0 && page.total > 0 && this.offset > 0) {
        // The page emptied (services went away): go back to the last one that has services.
        this.offset = Math.max(0, Math.floor((page.total - 1) / PAGE_SIZE) * PAGE_SIZE);
        this.ctx.refresh();
        return;
      }
      this.renderTask(summary);
      if (this.form !== undefined) await this.updateClusters(this.form);
      this.renderServices(summary, page);
      this.renderEvents(events);
      replace(this.history, history === undefined ? h('p', { class: 'muted' }, 'This server keeps no history.') : historyCharts(history.items, Date.now(), events?.items));
    } catch (err) {
      if (err instanceof ApiRequestError && err.code === 'task_not_found') {
        replace(this.facts, h('p', {}, `There is no task ${this.id} (any more).`));
        replace(this.actions);
        replace(this.services);
        replace(this.pager);
        replace(this.history);
        this.form = undefined;
        this.editor.hidden = true;
        replace(this.editor);
        return;
      }
      this.messages.showError(err);
    }
  }

  private renderTask(t: TaskSummary): void {
    const now = Date.now();
    const fact = (term: string, ...value: (Node | string)[]) => [h('dt', {}, term), h('dd', {}, ...value)];
    replace(
      this.facts,
      h(
        'dl',
        {},
        ...fact('State', h('span', { class: `badge state-${t.state}`, id: 'task-state' }, t.state)),
        ...fact('Copies', `${t.namespace}/${t.group}/${t.service} from ${t.source} to ${t.destination}`),
        ...fact('Service syncs', formatCount(t.serviceSyncs)),
        ...fact('Instances', `${formatCount(t.sourceInstances)} in ${t.source}, ${formatCount(t.destinationInstances)} copies in ${t.destination}`),
        ...fact('Max lag', formatDuration(t.maxLagMs)),
        ...fact('Last sync', formatAgo(t.lastSyncAt, now)),
        ...fact('Problems', problems(t)),
        ...(t.error !== null ? fact('Task error', h('span', { class: 'bad' }, t.error)) : []),
        ...(Object.keys(t.options).length > 0 ? fact('Options', h('code', {}, JSON.stringify(t.options))) : []),
        ...fact('Created', t.createdAt),
      ),
    );
    const path = `tasks/${encodeURIComponent(t.id)}`;
    replace(
      this.actions,
      ...taskActions(this.ctx, this.messages, t, () => this.ctx.navigate('#/tasks')),
      this.editButton(),
      t.held > 0
        ? actionButton(
            this.ctx,
            this.messages,
            `Release all held (${formatCount(t.held)})`,
            async () => {
              const res = await this.ctx.api.post<{ released: string[] }>(`${path}/release`);
              this.messages.showNotice(`released: ${res.released.join(', ') || 'nothing was held'}`);
            },
            { danger: true, confirm: `Apply every held mass deletion of task ${t.id}?` },
          )
        : null,
    );
  }

  /** Edit opens the form filled from the stored task (`GET /api/v1/tasks/:id`); Close folds it. */
  private editButton(): HTMLButtonElement {
    const open = this.form !== undefined;
    const button = h('button', { type: 'button', id: 'edit-task-toggle', 'aria-expanded': String(open) }, open ? 'Close the editor' : 'Edit');
    if (!this.ctx.canWrite()) {
      button.disabled = true;
      button.title = 'needs an admin token';
      return button;
    }
    button.addEventListener('click', () => {
      if (this.form !== undefined) {
        this.form = undefined;
        this.editor.hidden = true;
        replace(this.editor);
        this.ctx.refresh();
        return;
      }
      button.disabled = true;
      void this.openEditor().finally(() => this.ctx.refresh());
    });
    return button;
  }

  private async openEditor(): Promise<void> {
    try {
      const stored = await this.ctx.api.get<StoredTask>(`tasks/${encodeURIComponent(this.id)}`);
      const form = new TaskForm(this.ctx, { kind: 'edit', id: this.id }, () => this.messages.clear());
      await this.updateClusters(form);
      form.fill(stored);
      this.form = form;
      replace(this.editor, form.el);
      this.editor.hidden = false;
    } catch (err) {
      this.messages.showError(err);
    }
  }

  private async updateClusters(form: TaskForm): Promise<void> {
    form.setClusters((await this.ctx.api.get<List<Cluster>>('clusters')).items.map((c) => c.id));
  }

  private renderServices(t: TaskSummary, page: ServicePage): void {
    const now = Date.now();
    const path = `tasks/${encodeURIComponent(t.id)}`;
    const rows = page.items.map((s: ServiceStatus) =>
      h(
        'tr',
        { 'data-service': s.service, class: s.lastError !== null ? 'has-error' : null },
        h('td', {}, s.service, s.destination !== undefined ? h('small', { class: 'mapped' }, ` → ${s.destination}`) : null),
        cell(formatCount(s.sourceInstances), { class: 'num src', title: skippedText(s) }),
        cell(formatCount(s.destinationInstances), { class: 'num dst' }),
        cell(formatDuration(s.lagMs), { class: 'num lag' }),
        cell(formatAgo(s.lastSyncAt, now), { title: s.lastSyncAt ?? '' }),
        cell(s.lastError ?? '-', { class: 'last-error' }, 160),
        h(
          'td',
          { class: 'held' },
          s.held === null
            ? '-'
            : h(
                'span',
                {},
                `${formatCount(s.held.removes)} of ${formatCount(s.held.copies)} copies, since ${formatAgo(s.held.since, now)} (${s.held.confirm}) `,
                s.held.addresses && s.held.addresses.length > 0
                  ? h('small', { class: 'held-addresses' }, `Release removes ${s.held.addresses.join(', ')}${s.held.addresses.length < s.held.removes ? ', ...' : ''} `)
                  : null,
                actionButton(
                  this.ctx,
                  this.messages,
                  'Release',
                  () => this.ctx.api.post(`${path}/release`, { services: [s.service] }),
                  { danger: true, confirm: `Remove ${s.held.removes} copies of ${s.service} from ${t.destination}?`, done: `released ${s.service}` },
                ),
              ),
        ),
      ),
    );
    const filtered = this.search.value.trim() !== '' || this.only.value !== '';
    replace(
      this.services,
      table(
        ['Service', 'Source instances', 'Destination copies', 'Lag', 'Last sync', 'Last error', 'Held deletion'],
        rows,
        filtered ? 'No service matches.' : 'No service synced yet.',
        { id: 'services' },
      ),
    );
    const first = page.total === 0 ? 0 : this.offset + 1;
    const last = this.offset + page.items.length;
    const go = (offset: number) => () => {
      this.offset = offset;
      this.ctx.refresh();
    };
    replace(
      this.pager,
      h('button', { type: 'button', disabled: this.offset === 0, onclick: go(Math.max(0, this.offset - PAGE_SIZE)) }, '← Previous'),
      h('span', { class: 'range' }, `${formatCount(first)}–${formatCount(last)} of ${formatCount(page.total)}${filtered ? ' matching' : ''}`),
      h('button', { type: 'button', disabled: last >= page.total, onclick: go(this.offset + PAGE_SIZE) }, 'Next →'),
    );
  }

  private renderEvents(events: List<SyncEvent> | undefined): void {
    if (events === undefined) {
      replace(this.events, h('p', { class: 'muted' }, 'This server keeps no events.'));
      return;
    }
    const now = Date.now();
    replace(
      this.events,
      table(
        ['When', 'Kind', 'Service', 'What'],
        events.items.map((e) =>
          h('tr', { 'data-kind': e.kind }, cell(formatAgo(e.at, now), { title: e.at }), h('td', {}, h('span', { class: `badge kind-${e.kind}` }, e.kind)), cell(e.service ?? '-'), cell(e.message, {}, 200)),
        ),
        'No events yet.',
        { id: 'events' },
      ),
    );
  }
}

/** Why a service's source and copy counts differ, for the source cell's tooltip. */
function skippedText(s: ServiceStatus): string {
  const words: Record<string, string> = {
    marked: 'already passed through the destination (loop mark)',
    foreign: "another sync tool's copy",
    unhealthy: 'unhealthy',
    disabled: 'disabled',
    conflicting: 'address taken by an instance the task does not own',
  };
  const parts = Object.entries(s.skipped ?? {}).map(([k, n]) => `${n} ${words[k] ?? k}`);
  return parts.length === 0 ? '' : `not copied: ${parts.join('; ')}`;
}
