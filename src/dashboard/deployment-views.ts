/// <reference lib="dom" />
import { ApiRequestError } from './api-client.js';
import { cell, h, replace, table } from './dom.js';
import { formatAgo, formatCount, formatDuration } from './format.js';
import type { CmdbStatus, List, Shards, Worker } from './types.js';
import { badge, Messages, section, type View, type ViewContext } from './ui.js';

/** A route the server does not have (an API process started without a deployment view). */
function missingRoute(err: unknown): boolean {
  return err instanceof ApiRequestError && err.status === 404 && err.code === 'not_found';
}

const shardList = (shards: number[]): string => (shards.length === 0 ? '-' : shards.join(', '));

/** `#/shards`: each shard's leader and replicas, lease and queue depth; the live workers. */
export class DeploymentView implements View {
  readonly pollAlways = true;
  private readonly messages = new Messages();
  private readonly shards = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
  private readonly workers = h('div', {});

  constructor(private readonly ctx: ViewContext) {}

  mount(root: HTMLElement): void {
    root.append(section('Shards', this.messages.el, this.shards), section('Workers', this.workers));
  }

  async refresh(): Promise<void> {
    try {
      const [shards, workers] = await Promise.all([this.ctx.api.get<Shards>('shards'), this.ctx.api.get<List<Worker>>('workers')]);
      replace(
        this.shards,
        h('p', {}, `${formatCount(shards.shards)} shards, ${formatCount(shards.replicas)} replicas each.`),
        table(
          ['Shard', 'Leader', 'Fencing token', 'Lease left', 'Led for', 'Replicas', 'Queue depth', 'Service syncs'],
          shards.items.map((s) =>
            h(
              'tr',
              { 'data-shard': s.shard },
              cell(String(s.shard), { class: 'num' }),
              h('td', {}, s.leader ?? badge('no leader', 'bad')),
              cell(s.token === null ? '-' : String(s.token), { class: 'num' }),
              cell(formatDuration(s.leaseTtlLeftMs), { class: 'num' }),
              cell(formatDuration(s.leaseAgeMs), { class: 'num' }),
              cell(s.replicas.join(', ') || '-'),
              cell(formatCount(s.queueDepth), { class: 'num queue' }),
              cell(formatCount(s.serviceSyncs), { class: 'num' }),
            ),
          ),
          'No shards.',
          { id: 'shards' },
        ),
      );
      const now = Date.now();
      replace(
        this.workers,
        table(
          ['Worker', 'Host', 'PID', 'Started', 'Roles', 'Leads', 'Serves'],
          workers.items.map((w) =>
            h(
              'tr',
              { 'data-worker': w.id },
              cell(w.id),
              cell(w.host),
              cell(String(w.pid), { class: 'num' }),
              cell(formatAgo(w.startedAt, now), { title: w.startedAt }),
              cell(w.roles.join(', ')),
              cell(shardList(w.leads)),
              cell(shardList(w.serves)),
            ),
          ),
          'No live worker: nothing syncs.',
          { id: 'workers' },
        ),
      );
    } catch (err) {
      if (missingRoute(err)) {
        replace(this.shards, h('p', { class: 'muted' }, 'This API process shows no shards (it was started without a deployment).'));
        replace(this.workers);
        return;
      }
      this.messages.showError(err);
    }
  }
}

/** `#/cmdb`: the CMDB each worker reads labels from, whether it answers, and when it last did. */
export class CmdbView implements View {
  readonly pollAlways = true;
  private readonly messages = new Messages();
  private readonly list = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));

  constructor(private readonly ctx: ViewContext) {}

  mount(root: HTMLElement): void {
    root.append(section('CMDB', this.messages.el, this.list));
  }

  async refresh(): Promise<void> {
    try {
      const cmdb = await this.ctx.api.get<List<CmdbStatus>>('cmdb');
      const now = Date.now();
      const at = (ms: number | undefined) => (ms === undefined ? '-' : formatAgo(new Date(ms).toISOString(), now));
      replace(
        this.list,
        table(
          ['Worker', 'Provider', 'State', 'Last problem', 'Last refresh', 'Last event poll', 'IPs known'],
          cmdb.items.map((c) =>
            h(
              'tr',
              { 'data-worker': c.worker },
              cell(c.worker),
              cell(c.provider),
              h('td', {}, c.ok ? badge('ok', 'ok') : badge('failing', 'bad')),
              cell(c.lastError ? `${c.lastError.message} (${c.lastError.source}, ${at(c.lastError.at)})` : '-', {}, 160),
              cell(at(c.lastRefreshAt)),
              cell(at(c.lastEventPollAt)),
              cell(formatCount(c.entities), { class: 'num' }),
            ),
          ),
          'No worker reads a CMDB (start regsync with --cmdb, --cmdb-url or --cmdb-config).',
          { id: 'cmdb' },
        ),
      );
    } catch (err) {
      if (missingRoute(err)) {
        replace(this.list, h('p', { class: 'muted' }, 'This API process shows no CMDB (it was started without a deployment).'));
        return;
      }
      this.messages.showError(err);
    }
  }
}
