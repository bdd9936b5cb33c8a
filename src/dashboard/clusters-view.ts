/// <reference lib="dom" />
import { ClusterErrorsSection } from './cluster-history.js';
import { cell, h, replace, table } from './dom.js';
import { ClusterForm } from './cluster-form.js';
import { formatCount, taskHref } from './format.js';
import type { Cluster, ClusterStatus, List } from './types.js';
import { actionButton, badge, Messages, section, type View, type ViewContext } from './ui.js';

/** How a cluster's reachability reads, and why. */
export function reachabilityBadge(status: ClusterStatus | undefined): HTMLElement {
  if (status === undefined || status.reachability === 'unknown') {
    return badge('unknown', 'idle', status && status.tasks.length > 0 ? 'no running task has synced with it yet' : 'no task uses it');
  }
  const counts = `${formatCount(status.reached)} service syncs reached it, ${formatCount(status.unreached)} could not`;
  const why = status.lastError === null ? counts : `${counts}; ${status.lastError}`;
  switch (status.reachability) {
    case 'ok':
      return badge('reachable', 'ok', why);
    case 'partial':
      return badge(`partly ${failureLabel(status.failure)}`, 'warn', why);
    case 'failing':
      return badge(failureLabel(status.failure), 'bad', why);
  }
}

/** The words for why a cluster was not reached. */
function failureLabel(failure: ClusterStatus['failure']): string {
  switch (failure) {
    case 'auth_failed':
      return 'auth failed';
    case 'not_connected':
      return 'not connected';
    case 'error':
      return 'failing';
    default:
      return 'unreachable';
  }
}

/**
 * `#/clusters`: every cluster with its endpoints, labels and reachability (as the reconciles of the
 * tasks using it found it), and the form that adds one or edits the one whose Edit was pressed.
 */
export class ClustersView implements View {
  private readonly messages = new Messages();
  private readonly list = h('div', { 'aria-live': 'polite' }, h('p', { class: 'loading' }, 'Loading…'));
  private scrolled = false;
  private readonly form: ClusterForm;
  private errors: ClusterErrorsSection | undefined;

  /** `selected`: the cluster to point out (`#/clusters/:id`, the topology's links). */
  constructor(
    private readonly ctx: ViewContext,
    private readonly selected?: string,
  ) {
    this.form = new ClusterForm(ctx);
  }

  mount(root: HTMLElement): void {
    if (this.selected !== undefined) this.errors = new ClusterErrorsSection(this.ctx, this.selected);
    root.append(section('Clusters', this.messages.el, this.list), ...(this.errors ? [this.errors.el] : []), h('section', {}, this.form.el));
  }

  /** Opens the form below on the cluster; disabled without the right to act. */
  private editButton(cluster: Cluster): HTMLButtonElement {
    const button = h('button', { type: 'button' }, 'Edit');
    if (!this.ctx.canWrite()) {
      button.disabled = true;
      button.title = 'needs an admin token';
    } else {
      button.addEventListener('click', () => void this.form.edit(cluster));
    }
    return button;
  }

  async refresh(): Promise<void> {
    void this.errors?.refresh();
    try {
      const [clusters, statuses] = await Promise.all([
        this.ctx.api.get<List<Cluster>>('clusters'),
        this.ctx.api.get<List<ClusterStatus>>('clusters:status'),
      ]);
      const byId = new Map(statuses.items.map((s) => [s.id, s]));
      const rows = clusters.items
        .sort((a, b) => a.id.localeCompare(b.id))
        .map((c) => {
          const status = byId.get(c.id);
          const tasks = status?.tasks ?? [];
          return h(
            'tr',
            { 'data-cluster': c.id, class: c.id === this.selected ? 'selected' : null, 'aria-current': c.id === this.selected ? 'true' : null },
            cell(c.id),
            cell(c.kind),
            cell(c.endpoints.join(', ') || '(from kubeconfig)', {}, 80),
            cell(c.namespace ?? '-'),
            cell(Object.entries(c.labels).map(([k, v]) => `${k}=${v}`).join(', ') || '-', {}, 80),
            h('td', { class: 'reachability' }, reachabilityBadge(status)),
            h('td', {}, ...(tasks.length === 0 ? ['-'] : tasks.flatMap((id, i) => [i > 0 ? ', ' : '', h('a', { href: taskHref(id) }, id)]))),
            h(
              'td',
              { class: 'actions' },
              this.editButton(c),
              actionButton(this.ctx, this.messages, 'Delete', () => this.ctx.api.delete(`clusters/${encodeURIComponent(c.id)}`), {
                danger: true,
                confirm: `Delete cluster ${c.id}?`,
                done: `cluster ${c.id} deleted`,
              }),
            ),
          );
        });
      replace(this.list, table(['Id', 'Kind', 'Endpoints', 'Namespace', 'Labels', 'Reachability', 'Used by', 'Actions'], rows, 'No clusters yet: add one below.', { id: 'clusters' }));
      if (!this.scrolled) this.list.querySelector('tr.selected')?.scrollIntoView({ block: 'center' });
      this.scrolled = true;
    } catch (err) {
      this.messages.showError(err);
    }
  }
}
