/// <reference lib="dom" />
import { ClusterErrorsSection } from './cluster-history.js';
import { cell, h, replace, table } from './dom.js';
import { formatCount, parseEndpoints, parseLabels, taskHref } from './format.js';
import type { Cluster, ClusterStatus, Kind, List } from './types.js';
import { actionButton, actionForm, badge, field, Messages, section, valueOf, type View, type ViewContext } from './ui.js';

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
 * tasks using it found it), and the form that adds one.
 */
export class ClustersView implements View {
  private readonly messages = new Messages();
  private readonly list = h('div', { 'aria-live': 'polite' }, h('p', { class: 'loading' }, 'Loading…'));
  private scrolled = false;
  private errors: ClusterErrorsSection | undefined;

  /** `selected`: the cluster to point out (`#/clusters/:id`, the topology's links). */
  constructor(
    private readonly ctx: ViewContext,
    private readonly selected?: string,
  ) {}

  mount(root: HTMLElement): void {
    // The choices come from the server, which knows which kinds it serves.
    const kind = h('select', { name: 'kind', required: true });
    const endpoints = h('input', { name: 'endpoints', autocomplete: 'off', placeholder: '10.1.0.10:8848, 10.1.0.11:8848' });
    void this.loadKinds(kind, endpoints);
    const form = actionForm(
      this.ctx,
      { id: 'add-cluster', title: 'Add a cluster', submitLabel: 'Add cluster' },
      [
        field('Id', h('input', { name: 'id', required: true, autocomplete: 'off', placeholder: 'shanghai' })),
        field('Kind', kind),
        field('Endpoints', endpoints, 'host:port, separated by commas or spaces'),
        field('Namespace', h('input', { name: 'namespace', autocomplete: 'off', placeholder: 'public' })),
        field('User name', h('input', { name: 'username', autocomplete: 'off' })),
        field('Password', h('input', { name: 'password', type: 'password', autocomplete: 'new-password' })),
        field('Labels', h('input', { name: 'labels', autocomplete: 'off', placeholder: 'region=east, site=x11' }), 'key=value, separated by commas'),
      ],
      async (f) => {
        const body: Record<string, unknown> = { id: valueOf(f, 'id'), kind: valueOf(f, 'kind'), endpoints: parseEndpoints(valueOf(f, 'endpoints')) };
        for (const name of ['namespace', 'username']) if (valueOf(f, name) !== '') body[name] = valueOf(f, name);
        // Not trimmed: a password is what it is.
        const password = (f.elements.namedItem('password') as HTMLInputElement).value;
        if (password !== '') body.password = password;
        const labels = parseLabels(valueOf(f, 'labels'));
        if (Object.keys(labels).length > 0) body.labels = labels;
        const created = await this.ctx.api.post<Cluster>('clusters', body);
        return `cluster ${created.id} added`;
      },
    );
    if (this.selected !== undefined) this.errors = new ClusterErrorsSection(this.ctx, this.selected);
    root.append(section('Clusters', this.messages.el, this.list), ...(this.errors ? [this.errors.el] : []), h('section', {}, form));
  }

  /** Fills the kind choices from `GET kinds`; the endpoints' placeholder follows the chosen kind's default port. */
  private async loadKinds(select: HTMLSelectElement, endpoints: HTMLInputElement): Promise<void> {
    try {
      const kinds = (await this.ctx.api.get<List<Kind>>('kinds')).items;
      replace(select, ...kinds.map((k) => h('option', { value: k.name }, k.label)));
      const follow = (): void => {
        const chosen = kinds.find((k) => k.name === select.value);
        if (chosen) endpoints.placeholder = chosen.endpointsRequired ? `10.1.0.10:${chosen.defaultPort}, 10.1.0.11:${chosen.defaultPort}` : '(optional)';
      };
      select.addEventListener('change', follow);
      follow();
    } catch (err) {
      this.messages.showError(err);
    }
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
