import { describe, expect, it } from 'vitest';
import { buildTopology, formatStatusDot, formatStatusText, type TaskInput } from './status-command.js';

const task = (id: string, source: string, destination: string, extra: Partial<TaskInput> = {}): TaskInput => ({
  id,
  source,
  destination,
  state: 'running',
  error: null,
  destinationInstances: 2,
  maxLagMs: 1_200,
  failing: 0,
  held: 0,
  ...extra,
});

const ring = buildTopology(
  [
    { id: 'a', kind: 'nacos' },
    { id: 'b', kind: 'zookeeper' },
    { id: 'c', kind: 'nacos' },
  ],
  [
    { id: 'a', reachability: 'ok' },
    { id: 'b', reachability: 'partial' },
    { id: 'c', reachability: 'failing' },
  ],
  [
    task('a-to-b', 'a', 'b', { maxLagMs: 850 }),
    task('b-to-c', 'b', 'c', { state: 'error', failing: 1, destinationInstances: 0, maxLagMs: null }),
    task('c-to-a', 'c', 'a', { state: 'paused' }),
    task('held-one', 'a', 'c', { state: 'error', failing: 1, held: 1 }),
  ],
);

describe('the graph model', () => {
  it('gives each task its tone as the dashboard does (the same model)', () => {
    const clusters = [{ id: 'b', kind: 'nacos' }, { id: 'a', kind: 'zookeeper' }];
    const statuses = [{ id: 'a', reachability: 'failing' as const }];
    const tasks = [
      task('z', 'a', 'b'),
      task('y', 'b', 'a', { state: 'error', failing: 2, held: 1 }),
      task('x', 'a', 'gone', { state: 'error', failing: 1, held: 1 }),
      task('w', 'b', 'a', { state: 'paused', error: 'old' }),
      task('v', 'b', 'a', { state: 'error', error: 'rules', failing: 0 }),
    ];
    expect(buildTopology(clusters, statuses, tasks).edges.map((e) => e.tone)).toEqual(['running', 'held', 'failing', 'paused', 'failing']);
  });
});

describe('regsync status as text', () => {
  it('prints a line per cluster with kind and health, and a line per task with state, copies, lag and its mark', () => {
    expect(formatStatusText(ring)).toBe(
      [
        'cluster  a  nacos      reachable',
        'cluster  b  zookeeper  partly-unreachable',
        'cluster  c  nacos      unreachable',
        'a -> b  a-to-b    running  copies 2  lag 850ms',
        'a -> c  held-one  running  copies 2  lag 1.2s  held',
        'b -> c  b-to-c    running  copies 0  lag -  failing',
        'c -> a  c-to-a    paused   copies 2  lag 1.2s',
        '',
      ].join('\n'),
    );
  });

  it('says when there is nothing', () => {
    expect(formatStatusText(buildTopology([], [], []))).toBe('no clusters\nno tasks\n');
  });
});

describe('regsync status as DOT', () => {
  it('writes a digraph with a node per cluster and an edge per task, coloured as the dashboard colours them', () => {
    const dot = formatStatusDot(ring);
    expect(dot.startsWith('digraph regsync {\n')).toBe(true);
    expect(dot.endsWith('}\n')).toBe(true);
    expect(dot).toContain('  "a" [label="a\\nnacos, reachable", color="#1b7f3b", class="health-ok"];');
    expect(dot).toContain('  "c" [label="c\\nnacos, unreachable", color="#b3261e", class="health-failing"];');
    expect(dot).toContain('  "a" -> "b" [label="a-to-b\\ncopies 2 lag 850 ms", color="#1b7f3b", fontcolor="#1b7f3b", class="tone-running"];');
    expect(dot).toContain('  "b" -> "c" [label="b-to-c\\ncopies 0 failing", color="#b3261e", fontcolor="#b3261e", class="tone-failing", penwidth=2];');
    expect(dot).toContain('  "a" -> "c" [label="held-one\\ncopies 2 lag 1.2 s held", color="#9a6400", fontcolor="#9a6400", class="tone-held"];');
    expect(dot).toContain('class="tone-paused", style=dashed];');
    expect(dot.match(/ -> /g)).toHaveLength(4);
  });

  it('quotes ids, so that a quote or a backslash in one cannot break out of its string', () => {
    const dot = formatStatusDot(buildTopology([{ id: 'x"];evil\\', kind: 'nacos' }], undefined, []));
    expect(dot).toContain('  "x\\"];evil\\\\" [label="x\\"];evil\\\\\\nnacos", color="#6b7780", class="health-unknown"];');
  });
});
