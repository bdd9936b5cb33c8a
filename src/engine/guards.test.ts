import { describe, expect, it } from 'vitest';
import { emptySourceGuard, heldDrop, instanceLimitGuard, massDeletionGuard, slide, type MassDeletionSettings, type PlannedRemoval } from './guards.js';

const settings: MassDeletionSettings = { percent: 50, minCopies: 4, windowMs: 60_000, confirmMs: 3_000, confirm: 'read' };
const plan = (removes: number, copies: number, extra: Partial<PlannedRemoval> = {}): PlannedRemoval => ({ removes, copies, released: false, held: undefined, ...extra });

describe('instanceLimitGuard', () => {
  it('refuses only above the limit', () => {
    expect(instanceLimitGuard(10, 10, 'a')).toBeUndefined();
    expect(instanceLimitGuard(11, 10, 'a')).toMatchObject({ verdict: 'refuse', reason: expect.stringContaining('lists 11 instances') });
  });
});

describe('emptySourceGuard', () => {
  it('proceeds for a non-empty read or a source that never listed anything', () => {
    expect(emptySourceGuard(3, 5, 100, 200, 3_000)).toEqual({ verdict: 'proceed', emptySince: undefined, confirmed: false });
    expect(emptySourceGuard(0, 0, undefined, 200, 3_000)).toEqual({ verdict: 'proceed', emptySince: undefined, confirmed: false });
  });

  it('holds from the first empty read, waits out the rest, and confirms after confirmMs', () => {
    expect(emptySourceGuard(0, 5, undefined, 1_000, 3_000)).toEqual({ verdict: 'hold', emptySince: 1_000, requeueAfterMs: 3_000 });
    expect(emptySourceGuard(0, 5, 1_000, 2_500, 3_000)).toEqual({ verdict: 'hold', emptySince: 1_000, requeueAfterMs: 1_500 });
    expect(emptySourceGuard(0, 5, 1_000, 4_000, 3_000)).toEqual({ verdict: 'proceed', emptySince: undefined, confirmed: true });
  });

  it('starts over from a first empty read recorded in the future (a clock that went back)', () => {
    expect(emptySourceGuard(0, 5, 9_000, 4_000, 3_000)).toEqual({ verdict: 'hold', emptySince: 4_000, requeueAfterMs: 3_000 });
  });
});

describe('slide', () => {
  it('keeps a decreasing run of counts within the window, the first being the maximum', () => {
    let w = slide([], 0, 60_000, 6);
    w = slide(w, 1, 60_000, 5);
    w = slide(w, 2, 60_000, 7);
    expect(w).toEqual([[2, 7]]);
    w = slide(w, 3, 60_000, 4);
    expect(w).toEqual([
      [2, 7],
      [3, 4],
    ]);
    expect(slide(w, 60_003, 60_000, 2)).toEqual([
      [3, 4],
      [60_003, 2],
    ]);
  });

  it('keeps at most 32 entries', () => {
    let w: Array<[number, number]> = [];
    for (let i = 0; i < 100; i += 1) w = slide(w, i, 60_000, 1_000 - i);
    expect(w).toHaveLength(32);
    expect(w.at(-1)).toEqual([99, 901]);
  });
});

describe('massDeletionGuard', () => {
  it('proceeds under the share, at or below minCopies, with the guard off, and without removals', () => {
    expect(massDeletionGuard(plan(5, 10), [], 0, settings).verdict).toBe('proceed');
    expect(massDeletionGuard(plan(4, 4), [], 0, settings).verdict).toBe('proceed');
    expect(massDeletionGuard(plan(10, 10), [], 0, { ...settings, percent: 100 }).verdict).toBe('proceed');
    expect(massDeletionGuard(plan(0, 10), [[0, 20]], 1, settings)).toEqual({ verdict: 'proceed', copies: [[0, 20], [1, 10]] });
    expect(massDeletionGuard(plan(0, 10), [], 1, settings)).toEqual({ verdict: 'proceed', copies: [] });
  });

  it('counts the removals since the window peak', () => {
    const verdict = massDeletionGuard(plan(1, 3), [[0, 6]], 1_000, settings);
    expect(verdict).toMatchObject({ verdict: 'hold', first: true, requeueAfterMs: 3_010, held: { removes: 1, copies: 3, peak: 6, confirm: 'read' } });
    if (verdict.verdict === 'hold') expect(heldDrop(verdict.held)).toBe(4);
  });

  it('applies a held drop confirmed by a later read that plans no more, and holds a growing one anew', () => {
    const first = massDeletionGuard(plan(6, 10), [], 0, settings);
    expect(first).toMatchObject({ verdict: 'hold', first: true, held: { since: new Date(0).toISOString() } });
    const held = first.verdict === 'hold' ? first.held : undefined;
    expect(massDeletionGuard(plan(6, 10, { held }), first.copies, 2_000, settings)).toMatchObject({ verdict: 'hold', first: false, requeueAfterMs: 1_010 });
    expect(massDeletionGuard(plan(6, 10, { held }), first.copies, 3_000, settings)).toEqual({ verdict: 'proceed', copies: [], applied: 'confirmed', heldMs: 3_000 });
    expect(massDeletionGuard(plan(7, 10, { held }), first.copies, 3_000, settings)).toMatchObject({ verdict: 'hold', first: true, held: { since: new Date(3_000).toISOString() } });
  });

  it('waits for an operator with confirm: operator, and applies on a release', () => {
    const operator = { ...settings, confirm: 'operator' as const };
    const first = massDeletionGuard(plan(6, 10), [], 0, operator);
    const held = first.verdict === 'hold' ? first.held : undefined;
    const later = massDeletionGuard(plan(6, 10, { held }), first.copies, 3_600_000, operator);
    expect(later).toMatchObject({ verdict: 'hold', first: false });
    expect(later).not.toHaveProperty('requeueAfterMs');
    expect(massDeletionGuard(plan(6, 10, { held, released: true }), first.copies, 3_600_000, operator)).toEqual({ verdict: 'proceed', copies: [], applied: 'released' });
  });
});
