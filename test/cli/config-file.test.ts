import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis.js';
import { runRegsync, startRegsync } from '../support/regsync-process.js';

describe('regsync <command> --config', () => {
  let redis: RedisServer;
  let dir: string;
  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'regsync-config-cli-'));
  });
  afterAll(async () => {
    await redis?.cleanup();
  });

  it('runs a worker from a file (Redis, prefix, shards, metrics listener, log level), flags over it', async () => {
    const config = join(dir, 'regsync.yaml');
    writeFileSync(config, `redis: ${redis.url}\nprefix: prod\nshards: 16\nreplicas: 1\nmetrics-listen: 127.0.0.1:0\nlog-level: warn\nlisten: 0.0.0.0:8080 # an api option: ignored by workers\n`);
    const worker = await startRegsync(['worker', '--config', config, '--shards', '4'], { ready: /metrics on (http:\/\/\S+)\/metrics/ });
    try {
      expect(worker.output()).toMatch(/^regsync worker \S+ running \(4 shards, 1 replicas\)/m);
      const client = new Redis(redis.url);
      try {
        expect(JSON.parse((await client.get('prod:deployment')) as string)).toMatchObject({ shards: 4, replicas: 1 });
        expect(await client.get('prod:schema')).toBe('1');
        expect(await client.exists('regsync:deployment')).toBe(0);
      } finally {
        client.disconnect();
      }
    } finally {
      expect(await worker.stop()).toBe(0);
    }
  });

  it('names the file and the key at fault, and checks values as flags', async () => {
    const typo = join(dir, 'typo.yaml');
    writeFileSync(typo, `redsi: ${redis.url}\n`);
    const bad = await runRegsync(['worker', '--config', typo]);
    expect(bad.code).toBe(1);
    expect(bad.output).toContain(`regsync: ${typo}: redsi: not an option of regsync worker (known: `);
    const level = join(dir, 'level.yaml');
    writeFileSync(level, `redis: ${redis.url}\nlog-level: loud\n`);
    const badLevel = await runRegsync(['worker', '--config', level]);
    expect(badLevel.code).toBe(1);
    expect(badLevel.output).toContain("option '--log-level <level>' argument 'loud' is invalid. expected one of trace, debug, info, warn, error, fatal, silent");
  });
});
