import { describe, expect, it } from 'vitest';
import { silentLogger } from '../log.js';
import type { Instance } from '../model/index.js';
import { instance } from '../../test/support/fake-adapter.js';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { LiveSets } from './live-sets.js';

const set = (...ips: string[]): Instance[] => ips.map((ip) => ({ ...instance(ip), ephemeral: true }));

/** Live sets of two processes on one real redis-server: what each writes, and what each hears. */
describe('LiveSets', () => {
  const r = redisPerTest();

  const process = async () => {
    const liveSets = new LiveSets(r.connect(), r.prefix);
    const heard: string[] = [];
    await liveSets.listen(r.connect(), (shard, key) => void heard.push(`${shard} ${key}`), silentLogger());
    return { liveSets, heard };
  };

  it('tells the others of a change, never its writer, and writes nothing the hash holds already', async () => {
    const [p1, p2] = [await process(), await process()];
    const writes = () => r.redis.hget(`${r.prefix}:live:3`, 'k');
    await p1.liveSets.put('k', 3, set('10.5.0.1'), true);
    await waitUntil(() => p2.heard.length === 1);
    expect(p2.heard).toEqual(['3 k']);
    expect(p1.heard).toEqual([]);

    // p2 reconciles the same set: the record stands, and nobody is told again.
    await p2.liveSets.put('k', 3, set('10.5.0.1'), true);
    await p1.liveSets.put('k', 3, set('10.5.0.2'), true);
    await waitUntil(() => p2.heard.length === 2);
    expect(JSON.parse((await writes()) ?? '[]')).toEqual(set('10.5.0.2'));
    expect(p1.heard).toEqual([]);
  });

  it('writes back a set another process replaced since this one recorded it', async () => {
    const [p1, p2] = [await process(), await process()];
    await p1.liveSets.put('k', 0, set('10.5.0.1'), true);
    await p2.liveSets.put('k', 0, set('10.5.0.1', '10.5.0.2'), true);
    await waitUntil(() => p1.heard.length === 1);
    await p1.liveSets.put('k', 0, set('10.5.0.1'), true);
    expect(await p2.liveSets.get('k', 0)).toEqual(set('10.5.0.1'));
    await waitUntil(() => p2.heard.length === 2);
  });

  it('tells the others of a removal', async () => {
    const [p1, p2] = [await process(), await process()];
    await p1.liveSets.put('k', 1, set('10.5.0.1'), false);
    await p1.liveSets.remove('k', 1);
    await waitUntil(() => p2.heard.length === 1);
    expect(await p2.liveSets.get('k', 1)).toEqual([]);
  });
});
