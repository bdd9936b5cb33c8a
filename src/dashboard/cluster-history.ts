/// <reference lib="dom" />
import { ApiRequestError, messageOf } from './api-client.js';
import { h, replace } from './dom.js';
import { formatCount } from './format.js';
import { lineChart } from './history-chart.js';
import type { ClusterErrorBucket, List } from './types.js';
import { section, type ViewContext } from './ui.js';

/**
 * A cluster's failed requests over the last hour: one chart (the task charts' drawing, a line per
 * minute's count) and a sentence with the hour's total by error code, most frequent first.
 */
export function clusterErrorChart(buckets: readonly ClusterErrorBucket[], now: number): HTMLElement {
  const byCode = new Map<string, number>();
  let total = 0;
  for (const b of buckets) {
    total += b.errors;
    for (const [code, n] of Object.entries(b.byCode)) byCode.set(code, (byCode.get(code) ?? 0) + n);
  }
  const codes = [...byCode].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([code, n]) => `${code} ${formatCount(n)}`);
  return h(
    'div',
    { class: 'history', id: 'cluster-errors', 'data-errors': total },
    lineChart('errors', 'Failed requests a minute', buckets, (b) => b.errors, formatCount, now),
    h('p', { class: 'muted' }, total === 0 ? 'No failed request in the last hour.' : `${formatCount(total)} failed requests in the last hour: ${codes.join(', ')}.`),
  );
}

/**
 * The section "Request errors, last hour" of one cluster (`#/clusters/:id`), as every process of
 * the deployment counted them (`GET /api/v1/clusters/:id/history`). The view owning it calls
 * {@link refresh} with its own.
 */
export class ClusterErrorsSection {
  private readonly body = h('div', { 'aria-live': 'polite' }, h('p', { class: 'loading' }, 'Loading…'));
  readonly el: HTMLElement = section('Request errors, last hour', this.body);

  constructor(
    private readonly ctx: ViewContext,
    private readonly clusterId: string,
  ) {}

  async refresh(): Promise<void> {
    try {
      const history = await this.ctx.api.get<List<ClusterErrorBucket>>(`clusters/${encodeURIComponent(this.clusterId)}/history`);
      replace(this.body, clusterErrorChart(history.items, Date.now()));
    } catch (err) {
      if (err instanceof ApiRequestError && err.status === 404) {
        // A server without the route, or a cluster deleted since.
        replace(this.body, h('p', { class: 'muted' }, err.code === 'cluster_not_found' ? `There is no cluster ${this.clusterId} (any more).` : 'This server keeps no request error history.'));
        return;
      }
      replace(this.body, h('p', { class: 'error' }, messageOf(err)));
    }
  }
}
