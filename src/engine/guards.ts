import type { GuardState } from '../model/service-status.js';
import type { HeldDeletion } from '../model/types.js';

/**
 * The reconcile's guards as pure decisions. Each takes what the read found and what the service's
 * status remembers (kept in Redis, so that every replica decides the same), and answers whether
 * the reconcile proceeds, holds (keeps the copies and reads again later) or refuses, with the state
 * to remember. No clock, store or logger here: the reconciler passes `now` and records the result.
 */

/** The source lists more instances than the task allows: nothing is synced, the copies stay. */
export interface Refusal {
  verdict: 'refuse';
  reason: string;
}

/** `maxInstances`: a service over the limit is refused (its copies are left as they are). */
export function instanceLimitGuard(count: number, maxInstances: number, sourceId: string): Refusal | undefined {
  if (count <= maxInstances) return undefined;
  return {
    verdict: 'refuse',
    reason: `source ${sourceId} lists ${count} instances, more than the task's maxInstances (${maxInstances}); the copies are left as they are`,
  };
}

/** What {@link emptySourceGuard} decided. */
export type EmptySourceVerdict =
  | { verdict: 'proceed'; emptySince: undefined; confirmed: boolean }
  | { verdict: 'hold'; emptySince: number; requeueAfterMs: number };

/**
 * A source that lists nothing after it listed `known` instances is believed only when a read at
 * least `confirmMs` after the first empty one is still empty; meanwhile the copies stay (and beat).
 * `emptySince` is when the first empty read was seen, by any replica.
 */
export function emptySourceGuard(read: number, known: number, emptySince: number | undefined, now: number, confirmMs: number): EmptySourceVerdict {
  if (read > 0 || known === 0) return { verdict: 'proceed', emptySince: undefined, confirmed: false };
  if (emptySince === undefined || emptySince > now) return { verdict: 'hold', emptySince: now, requeueAfterMs: confirmMs };
  const age = now - emptySince;
  if (age < confirmMs) return { verdict: 'hold', emptySince, requeueAfterMs: confirmMs - age };
  return { verdict: 'proceed', emptySince: undefined, confirmed: true };
}

/** The task's settings of the mass-deletion guard, with defaults applied. */
export interface MassDeletionSettings {
  /** Share of the copies (percent) that may go within the window; 100 turns the guard off. */
  percent: number;
  /** The guard applies to services with more than this many copies. */
  minCopies: number;
  /** How far back removals count, ms. */
  windowMs: number;
  /** How long a held deletion waits for a confirming read, ms. */
  confirmMs: number;
  confirm: 'read' | 'operator';
}

/** What one reconcile plans, for the mass-deletion guard. */
export interface PlannedRemoval {
  /** Copies this reconcile would remove. */
  removes: number;
  /** Copies of the task the destination holds now. */
  copies: number;
  /** Whether an operator released a held deletion of this service (taken by this reconcile). */
  released: boolean;
  /** The deletion held by an earlier reconcile, if any. */
  held: HeldDeletion | undefined;
}

/** What {@link massDeletionGuard} decided, with the window of copy counts to remember. */
export type MassDeletionVerdict =
  | { verdict: 'proceed'; copies: Array<[number, number]>; applied?: 'released' | 'confirmed'; heldMs?: number }
  | { verdict: 'hold'; copies: Array<[number, number]>; held: HeldDeletion; first: boolean; requeueAfterMs?: number };

/**
 * The mass-deletion guard. Removals are judged over a window, not per read: against the most
 * copies the service had within the last `windowMs` (a sliding maximum of the counts reconciles
 * met), so that five quick single removals count as the drop they add up to. A plan whose
 * removals, with those since that peak, exceed `percent` of it (for a peak above `minCopies`) is
 * held: nothing is removed until an operator releases it, or (`confirm: read`) a read at least
 * `confirmMs` after it was first held still plans no larger drop. A drop that keeps growing is
 * held anew. Once applied, the window starts over.
 */
export function massDeletionGuard(
  plan: PlannedRemoval,
  window: GuardState['copies'],
  now: number,
  settings: MassDeletionSettings,
): MassDeletionVerdict {
  const copies = slide(window ?? [], now, settings.windowMs, plan.copies);
  const peak = copies[0]?.[1] ?? plan.copies;
  const dropped = peak - plan.copies + plan.removes;
  if (plan.removes === 0 || settings.percent >= 100 || peak <= settings.minCopies || dropped * 100 <= peak * settings.percent) {
    return { verdict: 'proceed', copies: plan.removes > 0 || copies.length > 1 ? copies : [] };
  }
  if (plan.released) return { verdict: 'proceed', copies: [], applied: 'released' };
  const previous = plan.held;
  const growing = previous !== undefined && dropped > heldDrop(previous);
  const since = previous !== undefined && !growing ? previous.since : new Date(now).toISOString();
  const age = now - Date.parse(since);
  if (settings.confirm === 'read' && previous !== undefined && !growing && age >= settings.confirmMs) {
    return { verdict: 'proceed', copies: [], applied: 'confirmed', heldMs: age };
  }
  const held: HeldDeletion = {
    removes: plan.removes,
    copies: plan.copies,
    since,
    confirm: settings.confirm,
    ...(peak > plan.copies ? { peak } : {}),
  };
  return {
    verdict: 'hold',
    copies,
    held,
    first: previous === undefined || growing,
    ...(settings.confirm === 'read' ? { requeueAfterMs: Math.max(0, settings.confirmMs - age) + 10 } : {}),
  };
}

/** The drop a held deletion stands for: its removals plus those since the window's peak. */
export function heldDrop(held: HeldDeletion): number {
  return (held.peak ?? held.copies) - held.copies + held.removes;
}

/** The share (percent, rounded) of the window's peak that a held deletion would remove. */
export function heldShare(held: HeldDeletion): number {
  const peak = held.peak ?? held.copies;
  return peak === 0 ? 0 : Math.round((heldDrop(held) * 100) / peak);
}

/** Most entries the window keeps: counts within it only ever decrease, so this bounds a long trickle. */
const MAX_WINDOW_ENTRIES = 32;

/**
 * The sliding maximum of copy counts with `count` seen at `now`: entries older than the window
 * go, entries not above the new count go (they can never be the maximum again), the new one is
 * appended. The first entry is the window's maximum.
 */
export function slide(window: ReadonlyArray<[number, number]>, now: number, windowMs: number, count: number): Array<[number, number]> {
  const kept = window.filter(([at, n]) => at <= now && now - at <= windowMs && n > count);
  kept.push([now, count]);
  return kept.length > MAX_WINDOW_ENTRIES ? kept.slice(kept.length - MAX_WINDOW_ENTRIES) : kept;
}
