import { describe, expect, it } from 'vitest';
import { replicasFor, shardOf, stableHash } from './rendezvous.js';

const workers = ['worker-a', 'worker-b', 'worker-c'];

function sameSet(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((id) => b.includes(id));
}

describe('shardOf', () => {
  it('is a pure function of the key, pinned to known values so that a change of hash is noticed', () => {
    // FNV-1a 32-bit (0xe40c292c for 'a') + fmix32, cross-checked with an independent implementation;
    // these numbers are part of the deployment contract.
    expect(stableHash('')).toBe(2872998923);
    expect(stableHash('a')).toBe(444641715);
    expect(stableHash('héllo')).toBe(4198468525);
    expect(stableHash('public/DEFAULT_GROUP/orders')).toBe(1746176775);
    expect(shardOf('public/DEFAULT_GROUP/orders', 8)).toBe(7);
    expect(shardOf('any', 1)).toBe(0);
  });

  it('spreads keys over every shard', () => {
    const used = new Set(Array.from({ length: 200 }, (_, i) => shardOf(`public/DEFAULT_GROUP/svc-${i}`, 8)));
    expect([...used].sort()).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it('rejects a shard count that is not a positive integer', () => {
    expect(() => shardOf('x', 0)).toThrow(RangeError);
    expect(() => shardOf('x', 1.5)).toThrow(RangeError);
  });
});

describe('replicasFor', () => {
  it('is deterministic and ignores the order and duplicates of the worker list', () => {
    for (let shard = 0; shard < 8; shard += 1) {
      const answer = replicasFor(shard, workers, 2);
      expect(answer).toHaveLength(2);
      expect(replicasFor(shard, [...workers].reverse(), 2)).toEqual(answer);
      expect(replicasFor(shard, [...workers, ...workers], 2)).toEqual(answer);
    }
  });

  it('answers every worker, heaviest first, when there are fewer than r', () => {
    expect(replicasFor(3, ['only'], 2)).toEqual(['only']);
    expect(replicasFor(3, [], 2)).toEqual([]);
    expect(replicasFor(3, workers, 16).sort()).toEqual([...workers].sort());
  });

  it('gives every worker some shards to serve and some to lead over 8 shards and 3 workers', () => {
    const shards = Array.from({ length: 8 }, (_, shard) => replicasFor(shard, workers, 2));
    for (const id of workers) {
      expect(shards.some((replicas) => replicas.includes(id))).toBe(true);
      expect(shards.some((replicas) => replicas[0] === id)).toBe(true);
    }
  });

  it('on a join, changes exactly the shards whose top r now holds the new worker, keeping the order of the rest', () => {
    for (const r of [1, 2, 3]) {
      for (let n = 1; n <= 6; n += 1) {
        const before = Array.from({ length: n }, (_, i) => `host-${i}-4242-${(i * 7919).toString(16)}`);
        const joined = `host-new-${n}-${r}`;
        for (let shard = 0; shard < 64; shard += 1) {
          const old = replicasFor(shard, before, r);
          const now = replicasFor(shard, [...before, joined], r);
          expect(!sameSet(old, now)).toBe(now.includes(joined));
          expect(now.filter((id) => id !== joined)).toEqual(old.slice(0, now.includes(joined) ? r - 1 : r));
        }
      }
    }
  });

  it('on a leave, changes exactly the shards whose top r held the leaving worker', () => {
    for (const r of [1, 2, 3]) {
      const all = Array.from({ length: 5 }, (_, i) => `worker-${i}`);
      for (const gone of all) {
        const rest = all.filter((id) => id !== gone);
        for (let shard = 0; shard < 64; shard += 1) {
          const old = replicasFor(shard, all, r);
          const now = replicasFor(shard, rest, r);
          expect(!sameSet(old, now)).toBe(old.includes(gone));
          expect(old.filter((id) => id !== gone)).toEqual(now.slice(0, old.includes(gone) ? r - 1 : r));
        }
      }
    }
  });

  it('rejects an r that is not a positive integer', () => {
    expect(() => replicasFor(0, workers, 0)).toThrow(RangeError);
  });
});
