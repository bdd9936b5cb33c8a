import { describe, expect, it } from 'vitest';
import { arrowPath, buildTopology, bundleEdges, bundleLabel, circleLayout, edgeTone, findHub, NODE_SIZE, type TaskInput } from './topology-model.js';

const task = (id: string, source: string, destination: string, extra: Partial<TaskInput> = {}): TaskInput => ({
  id,
  source,
  destination,
  state: 'running',
  error: null,
  destinationInstances: 2,
  maxLagMs: 1200,
  failing: 0,
  held: 0,
  ...extra,
});

describe('edgeTone', () => {
  it('is failing for a task error or a failure other than a held deletion, held for held deletions only', () => {
    expect(edgeTone({ state: 'running', error: null, failing: 0, held: 0 })).toBe('running');
    expect(edgeTone({ state: 'error', error: 'rules are wrong', failing: 0, held: 0 })).toBe('failing');
    expect(edgeTone({ state: 'error', error: null, failing: 2, held: 1 })).toBe('failing');
    // The summary counts a held deletion among the failing services.
    expect(edgeTone({ state: 'error', error: null, failing: 1, held: 1 })).toBe('held');
    expect(edgeTone({ state: 'paused', error: 'old', failing: 3, held: 1 })).toBe('paused');
  });
});

describe('buildTopology', () => {
  it('makes a node per cluster (with its health) and an edge per task, sorted', () => {
    const topology = buildTopology(
      [{ id: 'b', kind: 'nacos' }, { id: 'a', kind: 'zookeeper' }],
      [{ id: 'a', reachability: 'ok' }],
      [task('t2', 'b', 'a', { state: 'paused' }), task('t1', 'a', 'b', { state: 'error', failing: 1 })],
    );
    expect(topology.nodes).toEqual([
      { id: 'a', kind: 'zookeeper', health: 'ok' },
      { id: 'b', kind: 'nacos', health: 'unknown' },
    ]);
    expect(topology.edges.map((e) => [e.task, e.source, e.destination, e.state, e.tone, e.copies])).toEqual([
      ['t1', 'a', 'b', 'running', 'failing', 2],
      ['t2', 'b', 'a', 'paused', 'paused', 2],
    ]);
  });

  it('gives a cluster a task names but the list lacks a node of kind ?, and no health without statuses', () => {
    const topology = buildTopology([{ id: 'a', kind: 'nacos' }], undefined, [task('t', 'a', 'gone')]);
    expect(topology.nodes).toEqual([
      { id: 'a', kind: 'nacos', health: null },
      { id: 'gone', kind: '?', health: null },
    ]);
  });
});

describe('bundleEdges and bundleLabel', () => {
  it('bundles the tasks of one direction between one pair, worst first, and keeps the opposite direction apart', () => {
    const { edges } = buildTopology([], [], [
      task('a1', 'a', 'b'),
      task('a2', 'a', 'b', { state: 'error', failing: 1 }),
      task('a3', 'a', 'b', { state: 'paused' }),
      task('back', 'b', 'a', { maxLagMs: null, destinationInstances: 0 }),
    ]);
    const bundles = bundleEdges(edges);
    expect(bundles.map((b) => [b.source, b.destination, b.tone, b.edges.map((e) => e.task)])).toEqual([
      ['a', 'b', 'failing', ['a2', 'a1', 'a3']],
      ['b', 'a', 'running', ['back']],
    ]);
    expect(bundleLabel(bundles[0]!)).toBe('3 tasks · 1 failing · 1 paused');
    expect(bundleLabel(bundles[1]!)).toBe('copies 0');
    expect(bundleLabel(bundleEdges([edges[0]!])[0]!)).toBe('copies 2 · lag 1.2 s');
    expect(bundleLabel(bundleEdges([edges[1]!])[0]!)).toBe('copies 2 · lag 1.2 s · failing');
  });
});

describe('circleLayout and arrowPath', () => {
  it('puts every node at its own place inside the drawing, boxes not overlapping, for rings and hubs up to 24 clusters', () => {
    for (const n of [2, 3, 5, 8, 12, 24]) {
      const ids = Array.from({ length: n }, (_, i) => `c${i}`);
      const { width, height, positions } = circleLayout(ids);
      const points = ids.map((id) => positions.get(id)!);
      for (const p of points) {
        expect(p.x - NODE_SIZE.width / 2).toBeGreaterThanOrEqual(0);
        expect(p.x + NODE_SIZE.width / 2).toBeLessThanOrEqual(width);
        expect(p.y - NODE_SIZE.height / 2).toBeGreaterThanOrEqual(0);
        expect(p.y + NODE_SIZE.height / 2).toBeLessThanOrEqual(height);
      }
      for (let i = 0; i < n; i++) {
        for (let j = i + 1; j < n; j++) {
          const [p, q] = [points[i]!, points[j]!];
          const apart = Math.abs(p.x - q.x) >= NODE_SIZE.width || Math.abs(p.y - q.y) >= NODE_SIZE.height;
          expect(apart, `${n} nodes: c${i} and c${j} overlap`).toBe(true);
        }
      }
    }
  });

  it('puts the hub of a star in the middle, its boxes clear of the others; a ring has no hub', () => {
    const clusters = ['hub', 'a', 'b', 'c', 'd', 'e'].map((id) => ({ id, kind: 'nacos' }));
    const star = buildTopology(clusters, [], [...'abcde'].map((id) => task(`to-${id}`, 'hub', id)).concat(task('back', 'a', 'hub')));
    expect(findHub(star)).toBe('hub');
    const ring = buildTopology(clusters, [], [task('1', 'hub', 'a'), task('2', 'a', 'b'), task('3', 'b', 'c'), task('4', 'c', 'd'), task('5', 'd', 'e'), task('6', 'e', 'hub')]);
    expect(findHub(ring)).toBeUndefined();
    expect(findHub(buildTopology(clusters.slice(0, 3), [], [task('1', 'hub', 'a'), task('2', 'hub', 'b')]))).toBeUndefined();

    const { width, height, positions } = circleLayout(star.nodes.map((n) => n.id), 960, 'hub');
    expect(positions.get('hub')).toEqual({ x: width / 2, y: height / 2 });
    const hub = positions.get('hub')!;
    for (const id of 'abcde') {
      const p = positions.get(id)!;
      expect(Math.abs(p.x - hub.x) >= NODE_SIZE.width || Math.abs(p.y - hub.y) >= NODE_SIZE.height, `${id} overlaps the hub`).toBe(true);
    }
  });

  it('bends the two directions between a pair to opposite sides, starting and ending outside the boxes', () => {
    const a = { x: 100, y: 100 };
    const b = { x: 500, y: 100 };
    const there = arrowPath(a, b);
    const back = arrowPath(b, a);
    // Left to right bends down (its right), right to left bends up.
    expect(there.label.y).toBeGreaterThan(100 + 10);
    expect(back.label.y).toBeLessThan(100 - 10);
    for (const [p, box] of [[there.start, a], [there.end, b], [back.start, b], [back.end, a]] as const) {
      const outside = Math.abs(p.x - box.x) > NODE_SIZE.width / 2 || Math.abs(p.y - box.y) > NODE_SIZE.height / 2;
      expect(outside).toBe(true);
    }
    // Alone between its pair, an arrow bends away from the middle of the drawing, whichever way it goes.
    expect(arrowPath(a, b, { x: 300, y: 400 }).label.y).toBeLessThan(100 - 10);
    expect(arrowPath(b, a, { x: 300, y: 400 }).label.y).toBeLessThan(100 - 10);
    expect(arrowPath(a, b, { x: 300, y: -200 }).label.y).toBeGreaterThan(100 + 10);
    expect(there.d).toMatch(/^M [\d.]+ [\d.]+ Q [\d.]+ [\d.]+ [\d.]+ [\d.]+$/);
  });
});
