import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Histogram } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { DnsCatalogue } from '../../src/dns/catalogue.js';
import { DnsMetrics } from '../../src/dns/dns-metrics.js';
import type { DnsFeed } from '../../src/dns/feed.js';
import { RegsyncMetrics } from '../../src/metrics/index.js';
import { stringify } from 'yaml';
import { readYamlDocuments } from './kube-manifests.js';

/**
 * deploy/grafana/regsync-dashboard.json and deploy/prometheus/regsync-alerts.yaml, checked against
 * the code: every metric an expression names is one regsync exports (so that neither can drift
 * from the code), and both files have the structure Grafana and Prometheus load. Where promtool is
 * installed, it also parses every expression (the dashboard's as recording rules) and runs the
 * alerts' unit tests (deploy/prometheus/regsync-alerts.test.yaml); elsewhere those two tests are
 * skipped and the PromQL is checked for balanced brackets only.
 */
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const PROMTOOL = spawnSync('promtool', ['--version']).status === 0;

/** Runs promtool, failing with its output when it fails. */
function promtool(...args: string[]): string {
  try {
    return execFileSync('promtool', args, { cwd: REPO, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`promtool ${args.join(' ')} failed:\n${e.stdout ?? ''}${e.stderr ?? ''}`, { cause: err });
  }
}

/**
 * Every series name regsync exports: the registry of a process with every part registered (the
 * worker's and API's metrics, registry connections, the deployment gauges, the DNS server's, and
 * Node.js process metrics), histograms as their `_bucket`, `_sum` and `_count` series.
 */
function exportedNames(): Set<string> {
  const metrics = new RegsyncMetrics();
  metrics.watchConnections(() => new Map());
  metrics.watchDeployment({ shards: async () => 0, queueDepth: async () => 0, overview: async () => ({ tasks: [], clusters: [] }) });
  // Only read when scraped, which this test does not do.
  new DnsMetrics(metrics.registry, { catalogue: {} as DnsCatalogue, feed: {} as DnsFeed });
  const names = new Set<string>();
  for (const metric of metrics.registry.getMetricsAsArray()) {
    const name = (metric as unknown as { name: string }).name;
    if (metric instanceof Histogram) for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    else names.add(name);
  }
  return names;
}

const KEYWORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset', 'inf', 'nan']);

/**
 * The metric names a PromQL expression selects: identifiers left once strings, label matchers,
 * ranges, grouping label lists and function names are taken out.
 */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^{}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?/g)) {
    const [token, call] = [match[0].replace(/\s*\($/, ''), match[1]];
    if (call !== undefined || KEYWORDS.has(token.toLowerCase())) continue;
    names.add(token);
  }
  return [...names];
}

/** Throws unless every (, { and [ of `expr` closes in order (outside strings). */
function checkBrackets(expr: string): void {
  const pairs: Record<string, string> = { ')': '(', '}': '{', ']': '[' };
  const open: string[] = [];
  for (const ch of expr.replace(/"(?:[^"\\]|\\.)*"/g, '""')) {
    if (ch === '(' || ch === '{' || ch === '[') open.push(ch);
    else if (ch in pairs && open.pop() !== pairs[ch]) throw new Error(`unbalanced ${ch} in ${expr}`);
  }
  if (open.length > 0) throw new Error(`unclosed ${open.join('')} in ${expr}`);
}

interface GrafanaTarget {
  expr: string;
  legendFormat?: string;
  refId: string;
  datasource: { type: string; uid: string };
}
interface GrafanaPanel {
  id: number;
  type: string;
  title: string;
  gridPos: { x: number; y: number; w: number; h: number };
  datasource?: { type: string; uid: string };
  targets?: GrafanaTarget[];
}
interface Dashboard {
  uid: string;
  title: string;
  schemaVersion: number;
  templating: { list: Array<{ name: string; type: string; query: unknown; datasource?: unknown; definition?: string }> };
  panels: GrafanaPanel[];
}

interface AlertRule {
  alert: string;
  expr: string;
  for: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

const dashboard = JSON.parse(readFileSync(join(REPO, 'deploy/grafana/regsync-dashboard.json'), 'utf8')) as Dashboard;
const rules = readYamlDocuments(join(REPO, 'deploy/prometheus/regsync-alerts.yaml'));
const readme = readFileSync(join(REPO, 'README.md'), 'utf8');

describe('metricNames', () => {
  it('finds the selected metrics and nothing else', () => {
    expect(
      metricNames(
        'histogram_quantile(0.99, sum by (task, le) (rate(regsync_x_bucket{a="b|c",job=~"$job"}[$__rate_interval]))) * on (task) group_left (name) max by (task, name) (regsync_task_info) > 30 or on (task) absent(up)',
      ),
    ).toEqual(['regsync_x_bucket', 'regsync_task_info', 'up']);
  });
});

describe('deploy/grafana/regsync-dashboard.json', () => {
  const panels = dashboard.panels.filter((p) => p.type !== 'row');
  const targets = panels.flatMap((p) => p.targets ?? []);

  it('queries only metrics regsync exports', () => {
    const known = exportedNames();
    const used = new Set(targets.flatMap((t) => metricNames(t.expr)));
    // The job variable's query names its metrics in a __name__ regex.
    for (const variable of dashboard.templating.list) {
      const alternatives = /__name__=~\\?"([^"\\]+)\\?"/.exec(variable.definition ?? '')?.[1];
      for (const name of alternatives?.split('|') ?? []) used.add(name);
    }
    expect(used.size).toBeGreaterThan(20);
    expect([...used].filter((name) => !known.has(name))).toEqual([]);
    for (const t of targets) checkBrackets(t.expr);
  });

  it('shows every panel the operators asked for', () => {
    const used = new Set(targets.flatMap((t) => metricNames(t.expr)));
    for (const name of [
      'regsync_reconciles_total',
      'regsync_propagation_lag_seconds_bucket',
      'regsync_service_syncs',
      'regsync_cluster_state',
      'regsync_instances_managed',
      'regsync_queue_depth',
      'regsync_shard_leader',
      'regsync_registry_connections',
      'regsync_heartbeats_total',
      'regsync_dns_queries_total',
      'regsync_dns_stale_answers_total',
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
    ]) {
      expect(used.has(name), name).toBe(true);
    }
    const failing = targets.find((t) => t.expr.includes('regsync_service_syncs{state="failing"}'));
    const held = targets.find((t) => t.expr.includes('regsync_service_syncs{state="held"}'));
    expect(failing && held).toBeTruthy();
  });

  it('reads task names from regsync_task_info wherever it plots tasks', () => {
    for (const t of targets) {
      // A panel with one line per task joins the name onto it, and never shows the bare id.
      expect(t.legendFormat ?? '', t.expr).not.toMatch(/\{\{\s*task\s*\}\}/);
      if (/by \(task\b/.test(t.expr)) {
        expect(t.expr, t.expr).toMatch(/\* on \(task\) group_left \(name\) max by \(task, name\) \(regsync_task_info\)/);
        expect(t.legendFormat).toBe('{{name}}');
      }
    }
  });

  it('is a dashboard Grafana imports: a Prometheus datasource variable, unique ids, panels on the 24-column grid', () => {
    expect(dashboard.uid).toBe('regsync');
    expect(dashboard.schemaVersion).toBeGreaterThanOrEqual(36);
    const ds = dashboard.templating.list.find((v) => v.name === 'datasource');
    expect(ds).toMatchObject({ type: 'datasource', query: 'prometheus' });
    const ids = dashboard.panels.map((p) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of dashboard.panels) {
      expect(p.gridPos.x + p.gridPos.w, p.title).toBeLessThanOrEqual(24);
      expect(p.gridPos.w * p.gridPos.h, p.title).toBeGreaterThan(0);
    }
    for (const p of panels) {
      expect(p.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      const refIds = (p.targets ?? []).map((t) => t.refId);
      expect(new Set(refIds).size, p.title).toBe(refIds.length);
      for (const t of p.targets ?? []) expect(t.datasource, p.title).toEqual({ type: 'prometheus', uid: '${datasource}' });
    }
    // No two panels overlap.
    const cells = new Set<string>();
    for (const p of dashboard.panels) {
      for (let x = p.gridPos.x; x < p.gridPos.x + p.gridPos.w; x += 1) {
        for (let y = p.gridPos.y; y < p.gridPos.y + p.gridPos.h; y += 1) {
          expect(cells.has(`${x},${y}`), `${p.title} overlaps at ${x},${y}`).toBe(false);
          cells.add(`${x},${y}`);
        }
      }
    }
  });
});

describe('with promtool', () => {
  it.skipIf(!PROMTOOL)('parses every dashboard expression', () => {
    const dir = mkdtempSync(join(tmpdir(), 'regsync-dashboard-'));
    try {
      const exprs = dashboard.panels.flatMap((p) => p.targets ?? []).map((t) => t.expr.replaceAll('$__rate_interval', '5m').replaceAll('$job', '.+'));
      const file = join(dir, 'dashboard-rules.yaml');
      writeFileSync(file, stringify({ groups: [{ name: 'dashboard', rules: exprs.map((expr, i) => ({ record: `dashboard:expr_${i}`, expr })) }] }));
      expect(promtool('check', 'rules', file)).toContain(`SUCCESS: ${exprs.length} rules found`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it.skipIf(!PROMTOOL)('checks the alert rules and passes their unit tests', () => {
    expect(promtool('check', 'rules', 'deploy/prometheus/regsync-alerts.yaml')).toContain('SUCCESS');
    expect(promtool('test', 'rules', 'deploy/prometheus/regsync-alerts.test.yaml')).toContain('SUCCESS');
  });
});

describe('deploy/prometheus/regsync-alerts.yaml', () => {
  it('is a Prometheus rule file: groups of rules with alert, expr, for, labels and annotations, nothing else', () => {
    expect(rules).toHaveLength(1);
    const file = rules[0] as { groups: Array<{ name: string; rules: AlertRule[] }> };
    expect(Object.keys(file)).toEqual(['groups']);
    const groupNames = file.groups.map((g) => g.name);
    expect(new Set(groupNames).size).toBe(groupNames.length);
    const alerts = file.groups.flatMap((g) => g.rules);
    const names = alerts.map((r) => r.alert);
    expect(new Set(names).size).toBe(names.length);
    for (const group of file.groups) {
      expect(Object.keys(group).sort()).toEqual(['name', 'rules']);
      for (const rule of group.rules) {
        expect(Object.keys(rule).sort(), rule.alert).toEqual(['alert', 'annotations', 'expr', 'for', 'labels']);
        expect(rule.alert).toMatch(/^Regsync[A-Z][A-Za-z]+$/);
        expect(typeof rule.expr).toBe('string');
        checkBrackets(rule.expr);
        expect(rule.for, rule.alert).toMatch(/^(?:[0-9]+[smh])+$/);
        expect(['critical', 'warning'], rule.alert).toContain(rule.labels.severity);
        for (const value of Object.values(rule.labels)) expect(typeof value).toBe('string');
        expect(Object.keys(rule.annotations).sort(), rule.alert).toEqual(['description', 'runbook', 'summary']);
        for (const value of Object.values(rule.annotations)) expect(typeof value).toBe('string');
        // The runbook is the README's alerts section, which names every alert.
        expect(rule.annotations.runbook, rule.alert).toMatch(new RegExp(`^README\\.md#alerts \\(${rule.alert}\\)`));
        expect(readme, rule.alert).toContain(`\`${rule.alert}\``);
      }
    }
    expect(readme).toMatch(/^#### Alerts$/m);
  });

  it('alerts on what the operators asked for, using only metrics regsync exports', () => {
    const alerts = (rules[0] as { groups: Array<{ rules: AlertRule[] }> }).groups.flatMap((g) => g.rules);
    const known = exportedNames();
    for (const rule of alerts) expect(metricNames(rule.expr).filter((name) => !known.has(name)), rule.alert).toEqual([]);
    const byName = new Map(alerts.map((r) => [r.alert, r]));
    const expectations: Array<[string, RegExp]> = [
      ['RegsyncNoWorker', /absent\(regsync_shard_leader\)/],
      ['RegsyncShardWithoutLeader', /sum by \(shard\) \(regsync_shard_leader\) < 1/],
      ['RegsyncServiceSyncsFailing', /regsync_service_syncs\{state="failing"\}/],
      ['RegsyncDeletionHeld', /regsync_service_syncs\{state="held"\}/],
      ['RegsyncTaskProblem', /regsync_task_problem/],
      ['RegsyncClusterUnreachable', /regsync_cluster_state\{state=~"unreachable\|auth_failed\|not_connected"\}/],
      ['RegsyncPropagationLagHigh', /histogram_quantile\(0\.99, .*regsync_propagation_lag_seconds_bucket/],
      ['RegsyncQueueDepthGrowing', /regsync_queue_depth/],
      ['RegsyncDnsServingStale', /regsync_dns_cluster_stale/],
    ];
    for (const [name, expr] of expectations) expect(byName.get(name)?.expr, name).toMatch(expr);
    expect(byName.get('RegsyncServiceSyncsFailing')?.for).toBe('10m');
    expect(byName.get('RegsyncClusterUnreachable')?.for).toBe('5m');
  });
});
