import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { Instance } from '../../../src/model/index.js';
import type { ServiceRef } from '../wire.js';
import type { WireInstance } from './messages.js';
import { PublishSets } from './publish-sets.js';

const log = pino({ level: 'silent' });
const ref: ServiceRef = { namespaceId: 'public', group: 'DEFAULT_GROUP', name: 'orders' };
const inst = (ip: string, metadata: Record<string, string> = {}, over: Partial<Instance> = {}): Instance => ({
  ip,
  port: 8080,
  weight: 1,
  healthy: true,
  enabled: true,
  ephemeral: true,
  cluster: 'DEFAULT',
  metadata,
  ...over,
});

function recorder() {
  const sent: WireInstance[][] = [];
  const cleared: string[] = [];
  let fail = false;
  const sets = new PublishSets({
    log,
    send: async (_ref, instances) => {
      await Promise.resolve();
      if (fail) throw new Error('connection down');
      sent.push(instances);
    },
    clear: async (_ref, last) => {
      await Promise.resolve();
      if (fail) throw new Error('connection down');
      cleared.push(last.ip);
      sent.push([]);
    },
  });
  return { sets, sent, cleared, failNext: (v: boolean) => (fail = v) };
}

const ips = (batch: WireInstance[] | undefined) => batch?.map((i) => i.ip);

describe('PublishSets', () => {
  it('merges the shares of every owner into one set, and sends it only when it changed', async () => {
    const { sets, sent } = recorder();
    await sets.set(ref, 'task-a|orders', [inst('10.0.0.2'), inst('10.0.0.1')]);
    await sets.set(ref, 'task-b|orders', [inst('10.0.0.3')]);
    expect(sent.map(ips)).toEqual([['10.0.0.1', '10.0.0.2'], ['10.0.0.1', '10.0.0.2', '10.0.0.3']]);
    await sets.set(ref, 'task-a|orders', [inst('10.0.0.1'), inst('10.0.0.2')]);
    expect(sent).toHaveLength(2);
    // Task a's share shrinks; task b's stays in the set.
    await sets.set(ref, 'task-a|orders', []);
    expect(ips(sent.at(-1))).toEqual(['10.0.0.3']);
    expect(sets.stats()).toEqual({ sets: 1, instances: 1 });
  });

  it('clears the entry (a deregister naming one instance it held) once nothing is left, and sends nothing for a set never published', async () => {
    const { sets, sent, cleared } = recorder();
    await sets.set(ref, 'o', []);
    expect(sent).toHaveLength(0);
    await sets.set(ref, 'o', [inst('10.0.0.1')]);
    await sets.set(ref, 'o', []);
    expect(sent.map(ips)).toEqual([['10.0.0.1'], []]);
    expect(cleared).toEqual(['10.0.0.1']);
    expect(sets.stats()).toEqual({ sets: 0, instances: 0 });
  });

  it('writes instances byte-identically whatever order the share and its metadata came in', async () => {
    const a = recorder();
    const b = recorder();
    await a.sets.set(ref, 'o', [inst('10.0.0.1', { z: '1', a: '2' }), inst('10.0.0.2')]);
    await b.sets.set(ref, 'o', [inst('10.0.0.2'), inst('10.0.0.1', { a: '2', z: '1' })]);
    expect(JSON.stringify(a.sent[0])).toBe(JSON.stringify(b.sent[0]));
    expect(a.sent[0]?.[0]).toMatchObject({ instanceId: '10.0.0.1#8080#DEFAULT#DEFAULT_GROUP@@orders', serviceName: 'DEFAULT_GROUP@@orders' });
  });

  it('publishes only ephemeral copies', async () => {
    const { sets, sent } = recorder();
    await sets.set(ref, 'o', [inst('10.0.0.1'), inst('10.0.0.2', {}, { ephemeral: false })]);
    expect(sent.map(ips)).toEqual([['10.0.0.1']]);
  });

  it('coalesces changes made while a send is in flight, and each caller resolves after its change went out', async () => {
    const { sets, sent } = recorder();
    const first = sets.set(ref, 'o', [inst('10.0.0.1')]);
    const second = sets.set(ref, 'o', [inst('10.0.0.1'), inst('10.0.0.2')]);
    const third = sets.set(ref, 'o', [inst('10.0.0.1'), inst('10.0.0.2'), inst('10.0.0.3')]);
    await second;
    expect(ips(sent.at(-1))).toContain('10.0.0.2');
    await Promise.all([first, third]);
    expect(ips(sent.at(-1))).toEqual(['10.0.0.1', '10.0.0.2', '10.0.0.3']);
    expect(sent.length).toBeLessThanOrEqual(3);
  });

  it('rejects a failed send and sends again at the next change, and everything again after a reconnect', async () => {
    const { sets, sent, failNext } = recorder();
    failNext(true);
    await expect(sets.set(ref, 'o', [inst('10.0.0.1')])).rejects.toThrow('connection down');
    // What the connection holds, not what is wanted.
    expect(sets.stats()).toEqual({ sets: 0, instances: 0 });
    failNext(false);
    await sets.set(ref, 'o', [inst('10.0.0.1')]);
    expect(sent.map(ips)).toEqual([['10.0.0.1']]);
    await sets.republishAll();
    expect(sent.map(ips)).toEqual([['10.0.0.1'], ['10.0.0.1']]);
  });
});

describe('PublishSets resend', () => {
  it('sends an unchanged set again when asked to (copies missing at the server)', async () => {
    const { sets, sent } = recorder();
    await sets.set(ref, 'o', [inst('10.0.0.1')]);
    await sets.set(ref, 'o', [inst('10.0.0.1')]);
    expect(sent).toHaveLength(1);
    await sets.set(ref, 'o', [inst('10.0.0.1')], true);
    expect(sent).toHaveLength(2);
  });
});
