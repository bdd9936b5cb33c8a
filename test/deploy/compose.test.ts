import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyDeclarations, readDeclarations } from '../../src/cli/apply-command.js';
import { silentLogger } from '../../src/log.js';
import { startNode, type RegsyncNode } from '../../src/node.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import { readYamlDocuments } from './kube-manifests.js';
import { dockerfile } from './dockerfile.js';
import { parseRegsyncCommand } from './regsync-command.js';

/**
 * docker-compose.yml, the Dockerfile and .dockerignore, read as Docker would (no Docker here):
 * their structure, every command line parsed by regsync's own parser, and the sample
 * declarations the compose file applies, applied through a real regsync API.
 */
const REPO = fileURLToPath(new URL('../../', import.meta.url));

interface ComposeService {
  image?: string;
  build?: { context: string; dockerfile?: string };
  command?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }>;
  healthcheck?: { test: string[] };
  pull_policy?: string;
}

const compose = readYamlDocuments(join(REPO, 'docker-compose.yml'))[0] as { services: Record<string, ComposeService>; volumes?: Record<string, unknown> };
const services = compose.services;
const service = (name: string): ComposeService => {
  const s = services[name];
  if (!s) throw new Error(`docker-compose.yml has no service ${name}`);
  return s;
};

/** `host:port` -> container port of every published port, checking each binds 127.0.0.1 only. */
function published(s: ComposeService): Map<number, number> {
  const out = new Map<number, number>();
  for (const p of s.ports ?? []) {
    const m = /^127\.0\.0\.1:(\d+):(\d+)$/.exec(p);
    if (!m) throw new Error(`port ${p} is not published on 127.0.0.1 only`);
    out.set(Number(m[1]), Number(m[2]));
  }
  return out;
}

/** The host directory a container path is mounted from (bind mounts relative to the compose file). */
function hostDirOf(s: ComposeService, containerPath: string): string | undefined {
  for (const v of s.volumes ?? []) {
    const [host, target] = v.split(':');
    if (target === containerPath && host?.startsWith('.')) return resolve(REPO, host);
  }
  return undefined;
}

describe('docker-compose.yml', () => {
  it('runs two Nacos regions, Redis, regsync and a one-shot init, with pinned images on 127.0.0.1 only', () => {
    expect(Object.keys(services).sort()).toEqual(['nacos-beijing', 'nacos-shanghai', 'redis', 'regsync', 'regsync-init']);
    for (const [name, s] of Object.entries(services)) {
      if (s.build) expect(s.image, name).toMatch(/^regsync:/);
      else if (s.image?.startsWith('regsync:')) expect(s.pull_policy, `${name} uses the image built by regsync`).toBe('never');
      else expect(s.image, `${name}: a pinned version`).toMatch(/:v?\d+(\.\d+)+/);
      published(s);
    }
    for (const name of ['nacos-shanghai', 'nacos-beijing']) {
      const nacos = service(name);
      expect(nacos.image).toMatch(/^nacos\/nacos-server:v2\.\d+\.\d+$/);
      expect(nacos.environment?.MODE).toBe('standalone');
      // The HTTP port and gRPC at HTTP + 1000, both published.
      const containerPorts = [...published(nacos).values()].sort();
      expect(containerPorts).toEqual([8848, 9848]);
      const hostPorts = [...published(nacos).keys()].sort();
      expect(hostPorts[1]).toBe((hostPorts[0] ?? 0) + 1000);
      expect(nacos.healthcheck?.test.join(' ')).toContain('/nacos/v1/console/health/readiness');
    }
  });

  it('regsync runs the image default command on the compose Redis; its command line parses', () => {
    const regsync = service('regsync');
    expect(regsync.build?.context).toBe('.');
    const url = regsync.environment?.REGSYNC_REDIS_URL ?? '';
    expect(new URL(url).hostname).toBe('redis');
    const { command, opts } = parseRegsyncCommand(regsync.command ?? [], { REGSYNC_REDIS_URL: url });
    expect(command).toBe('up');
    const port = Number(/:(\d+)$/.exec(String(opts.listen))?.[1]);
    expect([...published(regsync).values()]).toContain(port);
    expect(regsync.healthcheck?.test.join(' ')).toContain(`127.0.0.1:${port}/readyz`);
    expect(regsync.depends_on?.redis?.condition).toBe('service_healthy');
    expect(regsync.command).toEqual(dockerfile().cmd);
  });

  it('regsync-init applies the sample declarations once regsync and both Nacos are healthy', () => {
    const init = service('regsync-init');
    const { command, opts } = parseRegsyncCommand(init.command ?? []);
    expect(command).toBe('apply');
    expect(hostDirOf(init, String(opts.file))).toBe(join(REPO, 'deploy/compose'));
    const server = new URL(String(opts.server));
    expect(server.hostname).toBe('regsync');
    const listen = parseRegsyncCommand(service('regsync').command ?? [], { REGSYNC_REDIS_URL: 'redis://redis:6379' }).opts.listen;
    expect(server.port).toBe(/:(\d+)$/.exec(String(listen))?.[1]);
    for (const dep of ['regsync', 'nacos-shanghai', 'nacos-beijing']) {
      expect(init.depends_on?.[dep]?.condition, dep).toBe('service_healthy');
      expect(service(dep).healthcheck, dep).toBeDefined();
    }
  });

  describe('deploy/compose sample declarations', () => {
    const decl = readDeclarations(join(REPO, 'deploy/compose'));
    let redis: RedisServer;
    let api: RegsyncNode;
    beforeAll(async () => {
      redis = await startRedis();
      api = await startNode({ redisUrl: redis.url, roles: ['api'], listen: { host: '127.0.0.1', port: 0 }, logger: silentLogger() });
    });
    afterAll(async () => {
      await api?.close();
      await redis?.cleanup();
    });

    it('name the two Nacos services of the compose file, and sync every service both ways', () => {
      expect(decl.clusters.map((c) => [c.id, c.kind, c.endpoints])).toEqual([
        ['shanghai', 'nacos', ['nacos-shanghai:8848']],
        ['beijing', 'nacos', ['nacos-beijing:8848']],
      ]);
      for (const c of decl.clusters) {
        const [host, port] = String((c.endpoints as string[])[0]).split(':');
        expect([...published(service(host ?? '')).values()], c.id).toContain(Number(port));
      }
      expect(decl.tasks.map((t) => [t.source, t.destination, t.service])).toEqual([
        ['shanghai', 'beijing', '*'],
        ['beijing', 'shanghai', '*'],
      ]);
    });

    it('are accepted by the REST API, and applying them again changes nothing', async () => {
      const url = api.url ?? '';
      expect((await applyDeclarations(url, decl)).map((r) => `${r.kind} ${r.id} ${r.action}`)).toEqual([
        'cluster shanghai created',
        'cluster beijing created',
        'task all-sh-to-bj created',
        'task all-bj-to-sh created',
      ]);
      expect((await applyDeclarations(url, decl)).every((r) => r.action === 'unchanged')).toBe(true);
    });
  });
});

describe('Dockerfile', () => {
  const df = dockerfile();
  const final = df.stages.at(-1);

  it('is a multi-stage build on node:20-slim whose image runs as the node user', () => {
    expect(df.stages.length).toBeGreaterThanOrEqual(2);
    for (const s of df.stages) expect(s.from).toBe('node:20-slim');
    expect(final?.lines.filter((l) => l.startsWith('USER '))).toEqual(['USER node']);
    expect(final?.lines.some((l) => /^RUN .*npm (ci|install)/.test(l))).toBe(false);
  });

  it('its default command is `regsync up` on the published port, with the local Redis it installs and its data in a volume', () => {
    const entry = df.entrypoint;
    expect(entry.slice(-2)).toEqual(['node', 'bin/regsync.js']);
    expect(existsSync(join(REPO, entry.at(-1) ?? ''))).toBe(true);
    const { command, opts } = parseRegsyncCommand(df.cmd);
    expect(command).toBe('up');
    // No --redis: REGSYNC_REDIS_URL chooses an external Redis, else `up` starts redis-server.
    expect(opts.redis).toBeUndefined();
    expect(final?.lines.some((l) => /^RUN .*apt-get install .*\bredis-server\b/.test(l))).toBe(true);
    const port = /:(\d+)$/.exec(String(opts.listen))?.[1];
    expect(final?.lines).toContain(`EXPOSE ${port}`);
    expect(final?.lines).toContain(`VOLUME ["${String(opts.dataDir)}"]`);
  });

  it('copies into the image what the command reads at run time, from the build stage', () => {
    // bin/ loads dist/; the version comes from package.json; `regsync demo` reads tasks/.
    expect([...df.copiedFromBuild].sort()).toEqual(['/app/bin', '/app/dist', '/app/node_modules', '/app/package.json', '/app/tasks']);
    const build = df.stages[0]?.lines ?? [];
    expect(build.some((l) => /npm prune --omit=dev/.test(l))).toBe(true);
  });

  it('.dockerignore keeps build output, local state and secrets out of the context', () => {
    const ignored = readFileSync(join(REPO, '.dockerignore'), 'utf8').split('\n').map((l) => l.trim());
    for (const p of ['node_modules', 'dist', '.git', '.regsync', '.env', '.env.*', '**/*.pem', '**/*.key', '**/kubeconfig']) expect(ignored, p).toContain(p);
    // What the build needs stays in.
    for (const needed of ['src', 'adapters', 'scripts', 'tasks', 'bin', 'package.json', 'package-lock.json', 'tsconfig.json']) expect(ignored, needed).not.toContain(needed);
  });
});
