import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { redisPerTest } from '../../test/support/redis-per-test.js';
import { startTcpGate } from '../../test/support/tcp-gate.js';
import { waitUntil } from '../../test/support/wait-until.js';
import { createLogger } from '../log.js';
import { Connections } from './connections.js';

const server = redisPerTest();

interface Line {
  level: number;
  msg: string;
  failures?: number;
  err?: { code?: string; stack?: string };
}

describe('the connection errors of a process', () => {
  it('are one warning while Redis is away, however many connections retry, and one line when it is back', async () => {
    const gate = await startTcpGate(`127.0.0.1:${server.server.port}`);
    const lines: Line[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const l of String(chunk).split('\n')) if (l !== '') lines.push(JSON.parse(l) as Line);
        done();
      },
    });
    const connections = new Connections(`redis://${gate.endpoint}`, createLogger('info', sink));
    try {
      await connections.ready();
      gate.cut();
      // Three connections retrying every 50 to 500 ms: wait for the tenth failure, which is told again with its count.
      await waitUntil(() => lines.some((l) => l.failures === 10), { message: 'ten failures', timeoutMs: 20_000 });
      const away = lines.filter((l) => l.level >= 40);
      // The gate resets connections, at connect or at the first read: one kind, ECONNRESET.
      expect(away.map((l) => l.msg)).toEqual(['redis connection error', 'redis connection error, 10 failures since the last success']);
      expect(away[0]?.err?.code).toBe('ECONNRESET');
      expect(away.every((l) => l.err?.stack === undefined)).toBe(true);

      gate.open();
      await waitUntil(() => lines.some((l) => l.msg === 'redis connection ready again'), { message: 'the connections back' });
      expect(lines.find((l) => l.msg === 'redis connection ready again')).toMatchObject({ level: 30, failures: expect.any(Number) });
      // Back: the next failure is news again.
      const before = lines.length;
      gate.cut();
      await waitUntil(() => lines.slice(before).some((l) => l.msg === 'redis connection error'), { message: 'the next outage told' });
    } finally {
      connections.close();
      await gate.close();
    }
  });
});
