import { cpSync, existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServer } from '../support/redis.js';
import { makeTempDir, ManagedProcess, removeTempDir, waitForReady } from '../support/server-process.js';
import { dockerfile } from './dockerfile.js';

/**
 * The image's default command on the image's file layout, without Docker: only what the
 * Dockerfile's final stage copies (bin, dist, package.json, tasks; node_modules linked from this
 * checkout), run as the ENTRYPOINT and CMD say, on loopback and a temp dir instead of 0.0.0.0:8080
 * and /data. Standalone it starts its own redis-server; with REGSYNC_REDIS_URL it uses that Redis.
 */
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const df = dockerfile();

describe('the image default command, on the files the image holds', () => {
  const root = makeTempDir('regsync-image-');
  const app = join(root, 'app');
  let redis: RedisServer;

  beforeAll(async () => {
    mkdirSync(app, { recursive: true });
    for (const source of df.copiedFromBuild) {
      const name = source.replace(/^\/app\//, '');
      if (name === 'node_modules') symlinkSync(join(REPO, 'node_modules'), join(app, 'node_modules'));
      else cpSync(join(REPO, name), join(app, name), { recursive: true });
    }
    redis = await startRedis();
  });

  afterAll(async () => {
    await redis?.cleanup();
    removeTempDir(root);
  });

  /** The CMD with its listen address and data dir moved to loopback and a temp dir. */
  function command(dataDir: string): string[] {
    const args = [...df.cmd];
    const at = (flag: string) => args.indexOf(flag) + 1;
    expect(at('--listen')).toBeGreaterThan(0);
    expect(at('--data-dir')).toBeGreaterThan(0);
    args[at('--listen')] = '127.0.0.1:0';
    args[at('--data-dir')] = dataDir;
    return args;
  }

  async function run(name: string, env: NodeJS.ProcessEnv): Promise<{ dataDir: string; answers: string[]; code: number | null }> {
    const dataDir = join(root, `${name}-data`);
    const logFile = join(root, `${name}.log`);
    const [node, ...rest] = df.entrypoint.slice(df.entrypoint.indexOf('node'));
    expect(node).toBe('node');
    const base = { ...process.env };
    delete base.REGSYNC_REDIS_URL;
    const proc = new ManagedProcess(process.execPath, [...rest, ...command(dataDir)], { logFile, cwd: app, env: { ...base, REGSYNC_LOG_LEVEL: 'warn', ...env } });
    let url = '';
    await waitForReady(
      proc,
      async () => {
        url = / on (http:\/\/\S+)/.exec(readFileSync(logFile, 'utf8'))?.[1] ?? '';
        return url !== '';
      },
      { what: `regsync ${name}`, timeoutMs: 30_000, logFiles: [logFile] },
    );
    const answers = await Promise.all(['/readyz', '/', '/api/v1/clusters'].map(async (path) => `${path} ${(await fetch(`${url}${path}`)).status}`));
    const { code } = await proc.stop(15_000);
    return { dataDir, answers, code };
  }

  it('standalone: starts the redis-server the image installs, keeps its data in the data dir, stops cleanly on SIGTERM', async () => {
    const { dataDir, answers, code } = await run('standalone', {});
    expect(answers).toEqual(['/readyz 200', '/ 200', '/api/v1/clusters 200']);
    expect(existsSync(join(dataDir, 'redis'))).toBe(true);
    expect(code).toBe(0);
  });

  it('with REGSYNC_REDIS_URL: uses that Redis and starts none of its own', async () => {
    const { dataDir, answers, code } = await run('external', { REGSYNC_REDIS_URL: redis.url });
    expect(answers).toEqual(['/readyz 200', '/ 200', '/api/v1/clusters 200']);
    expect(existsSync(join(dataDir, 'redis'))).toBe(false);
    expect(code).toBe(0);
  });
});
