import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { ApiTokensError, readApiTokensFile } from '../../src/api/auth-config.js';
import { runWorker } from '../../src/cli/up-command.js';
import { silentLogger } from '../../src/log.js';
import { startNode } from '../../src/node.js';
import { Lifecycle } from '../../src/node/lifecycle.js';
import { makeTempDir, removeTempDir } from '../support/server-process.js';
import { startRedis, type RedisServer } from '../support/redis.js';
import {
  buildKustomization,
  containersOf,
  isKustomizationFile,
  podTemplateOf,
  readKustomization,
  readYamlDocuments,
  selects,
  yamlFilesUnder,
  type Container,
  type KubeObject,
  type Placed,
} from './kube-manifests.js';
import { modelOf, schemaProblems } from './kube-schema.js';
import { containerEnv, parseRegsyncCommand } from './regsync-command.js';

const ROOT = fileURLToPath(new URL('../../deploy/kubernetes/', import.meta.url));
const REPO = fileURLToPath(new URL('../../', import.meta.url));
const OVERLAYS = ['overlays/in-cluster-redis', 'overlays/external-redis'];
/** Secrets the operator creates (never committed): each has a template in deploy/kubernetes/secrets/. */
const TEMPLATES_DIR = join(ROOT, 'secrets');
/** Files no kustomization applies on purpose: the Secret templates, and the RBAC of a cluster regsync reaches from outside. */
const STANDALONE = (file: string) => file.startsWith(TEMPLATES_DIR) || file === join(ROOT, 'rbac.yaml');
const CLUSTER_SCOPED = new Set(['Namespace', 'ClusterRole', 'ClusterRoleBinding', 'PersistentVolume', 'StorageClass']);

const rel = (file: string) => relative(REPO, file);
const all = yamlFilesUnder(ROOT);
const manifests = all.filter((f) => !isKustomizationFile(f));
const kustomizations = all.filter(isKustomizationFile).map((f) => dirname(f));

function objectsOf(file: string): KubeObject[] {
  return readYamlDocuments(file) as KubeObject[];
}

function find(objects: Placed[], kind: string, name: string): KubeObject {
  const found = objects.find((p) => p.object.kind === kind && p.object.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name}`);
  return found.object;
}

function podSpec(object: KubeObject) {
  const template = podTemplateOf(object);
  if (!template) throw new Error(`${object.kind} ${object.metadata.name} has no pod template`);
  return template.spec;
}

function container(object: KubeObject, name: string): Container {
  const c = podSpec(object).containers.find((x) => x.name === name);
  if (!c) throw new Error(`${object.metadata.name} has no container ${name}`);
  return c;
}

/** The container port a probe or Service names (by name or number). */
function portOf(c: Container, port: string | number | undefined): number | undefined {
  if (typeof port === 'number') return c.ports?.some((p) => p.containerPort === port) ? port : undefined;
  return c.ports?.find((p) => p.name === port)?.containerPort;
}

/** The port of a regsync command's `--listen`/`--metrics-listen` value. */
function listenPort(value: unknown): number {
  const m = /:(\d+)$/.exec(String(value));
  if (!m) throw new Error(`not host:port: ${String(value)}`);
  return Number(m[1]);
}

function isRegsync(c: Container): boolean {
  return /^regsync(:|$)/.test(c.image) || /\/regsync(:|$)/.test(c.image);
}

function parsedArgs(c: Container) {
  return parseRegsyncCommand(c.args ?? [], containerEnv(c, (name) => (name === 'REGSYNC_REDIS_URL' ? 'redis://127.0.0.1:6379' : `<${name} from a Secret>`)));
}

/** The names of the Secrets with a template in secrets/. */
function templatedSecrets(): Set<string> {
  return new Set(yamlFilesUnder(TEMPLATES_DIR).flatMap(objectsOf).filter((o) => o.kind === 'Secret').map((o) => o.metadata.name));
}

describe('deploy/kubernetes: every object', () => {
  it('is valid against the Kubernetes schema of its kind, with no field the schema lacks', async () => {
    const problems: string[] = [];
    let checked = 0;
    for (const file of manifests) {
      for (const object of objectsOf(file)) {
        const what = `${rel(file)}: ${object.apiVersion} ${object.kind} ${object.metadata?.name ?? '(no name)'}`;
        const model = modelOf(object);
        if (!model) {
          problems.push(`${what}: not a kind this check knows (kube-schema.ts MODULES)`);
          continue;
        }
        problems.push(...schemaProblems(model, object).map((p) => `${what}: ${p}`));
        if (!object.metadata?.name) problems.push(`${what}: no metadata.name`);
        checked += 1;
      }
    }
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThan(20);
  });

  it('the schema check itself refuses a misspelt field, a wrong type and an unknown kind', async () => {
    const deployment = find(buildKustomization(join(ROOT, 'base')), 'Deployment', 'regsync-api');
    const model = modelOf(deployment);
    if (!model) throw new Error('no model for Deployment');
    expect(schemaProblems(model, deployment)).toEqual([]);

    const misspelt = structuredClone(deployment);
    const c = podSpec(misspelt).containers[0] as Container & Record<string, unknown>;
    c.readinesProbe = c.readinessProbe;
    delete c.readinessProbe;
    expect(schemaProblems(model, misspelt)).toEqual(['.spec.template.spec.containers[0].readinesProbe: not a field of the schema']);

    const wrongType = structuredClone(deployment);
    (wrongType.spec as { replicas: unknown }).replicas = '2';
    expect(schemaProblems(model, wrongType).join()).toMatch(/replicas must be integer/);

    expect(modelOf({ ...deployment, kind: 'Deploymant' })).toBeUndefined();
  });
});

describe('deploy/kubernetes: kustomizations', () => {
  it('every kustomization builds: its resources, components and generator files exist', () => {
    expect(kustomizations.map((d) => relative(ROOT, d)).sort()).toEqual(
      expect.arrayContaining(['base', 'components/redis-sentinel', 'components/rbac-cluster', 'components/rbac-namespaced', 'components/dns', ...OVERLAYS]),
    );
    for (const dir of kustomizations) {
      const built = buildKustomization(dir, readKustomization(dir).kind);
      expect(built.length, relative(ROOT, dir)).toBeGreaterThan(0);
    }
  });

  it('every manifest is applied by some kustomization, except the Secret templates and the standalone rbac.yaml', () => {
    const used = new Set(kustomizations.flatMap((d) => buildKustomization(d, readKustomization(d).kind).map((p) => p.file)));
    expect(manifests.filter((f) => !used.has(f) && !STANDALONE(f)).map(rel)).toEqual([]);
    expect(manifests.filter((f) => used.has(f) && STANDALONE(f)).map(rel)).toEqual([]);
  });

  it('the external-redis overlay has no Redis of its own; the in-cluster one has Redis with Sentinel', () => {
    const external = buildKustomization(join(ROOT, 'overlays/external-redis'));
    expect(external.filter((p) => p.object.metadata.name.startsWith('redis'))).toEqual([]);
    expect(external.some((p) => p.object.kind === 'Secret' && p.object.metadata.name === 'regsync-redis')).toBe(false);

    const inCluster = buildKustomization(join(ROOT, 'overlays/in-cluster-redis'));
    const redis = find(inCluster, 'StatefulSet', 'redis');
    expect((redis.spec as { replicas: number }).replicas).toBe(3);
    expect(podSpec(redis).containers.map((c) => c.name).sort()).toEqual(['redis', 'sentinel']);
    const url = (find(inCluster, 'Secret', 'regsync-redis') as unknown as { stringData: { url: string } }).stringData.url;
    // The URL names the Sentinels' Service and the master name the Sentinels monitor.
    const m = /^redis\+sentinel:\/\/([^.:/]+)\.regsync\.svc:(\d+)\/(\w+)$/.exec(url);
    expect(m, url).not.toBeNull();
    const service = find(inCluster, 'Service', m?.[1] ?? '') as unknown as { spec: { ports: Array<{ port: number }> } };
    expect(service.spec.ports.map((p) => p.port)).toContain(Number(m?.[2]));
    const script = readFileSync(join(ROOT, 'components/redis-sentinel/redis-ha.sh'), 'utf8');
    expect(script).toContain(`MASTER_NAME:=${m?.[3]}`);
    // Redis has no password: its NetworkPolicy must still admit every pod that uses it, and Redis's own pods.
    const policy = find(inCluster, 'NetworkPolicy', 'redis') as unknown as { spec: { podSelector: { matchLabels: Record<string, string> }; ingress: Array<{ from: Array<{ podSelector: { matchLabels: Record<string, string> } }> }> } };
    const admitted = (labels: Record<string, string> | undefined) => policy.spec.ingress.some((rule) => rule.from.some((f) => selects(f.podSelector.matchLabels, labels)));
    expect(selects(policy.spec.podSelector.matchLabels, podTemplateOf(redis)?.metadata.labels)).toBe(true);
    const users = inCluster.map((p) => p.object).filter((o) => containersOf(o).some((c) => c.env?.some((e) => e.valueFrom?.secretKeyRef?.name === 'regsync-redis')));
    expect(users.map((o) => o.metadata.name).sort()).toEqual(['regsync-api', 'regsync-worker']);
    for (const o of [...users, redis]) expect(admitted(podTemplateOf(o)?.metadata.labels), o.metadata.name).toBe(true);
  });
});

describe.each(OVERLAYS)('deploy/kubernetes/%s', (overlay) => {
  const built = buildKustomization(join(ROOT, overlay));
  const objects = built.map((p) => p.object);
  const workloads = objects.filter((o) => podTemplateOf(o) !== undefined);

  it('names each object once, and every namespaced object says its namespace (no kustomization sets one)', () => {
    const keys = objects.map((o) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`);
    expect(keys.filter((k, i) => keys.indexOf(k) !== i)).toEqual([]);
    expect(objects.filter((o) => !CLUSTER_SCOPED.has(o.kind) && !o.metadata.namespace).map((o) => `${o.kind} ${o.metadata.name}`)).toEqual([]);
  });

  it('runs 2 API replicas probed on /healthz and /readyz, behind a Service', () => {
    const api = find(built, 'Deployment', 'regsync-api');
    expect((api.spec as { replicas: number }).replicas).toBe(2);
    const c = container(api, 'api');
    const { command, opts } = parsedArgs(c);
    expect(command).toBe('api');
    const port = listenPort(opts.listen);
    expect(c.livenessProbe?.httpGet?.path).toBe('/healthz');
    expect(c.readinessProbe?.httpGet?.path).toBe('/readyz');
    expect(portOf(c, c.livenessProbe?.httpGet?.port)).toBe(port);
    expect(portOf(c, c.readinessProbe?.httpGet?.port)).toBe(port);
    const service = find(built, 'Service', 'regsync-api') as KubeObject & { spec: { selector: Record<string, string>; ports: Array<{ targetPort: string | number }> } };
    expect(selects(service.spec.selector, podTemplateOf(api)?.metadata.labels)).toBe(true);
    expect(service.spec.ports.map((p) => portOf(c, p.targetPort))).toEqual([port]);
  });

  it('runs 3 workers probed on their metrics listener, with a PodDisruptionBudget of one and a scrapable Service', () => {
    const worker = find(built, 'Deployment', 'regsync-worker');
    expect((worker.spec as { replicas: number }).replicas).toBe(3);
    const c = container(worker, 'worker');
    const { command, opts } = parsedArgs(c);
    expect(command).toBe('worker');
    const port = listenPort(opts.metricsListen);
    for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe]) {
      expect(probe?.httpGet?.path).toBe('/healthz');
      expect(portOf(c, probe?.httpGet?.port)).toBe(port);
    }
    const pdb = objects.find((o) => o.kind === 'PodDisruptionBudget' && selects((o.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels, podTemplateOf(worker)?.metadata.labels));
    expect((pdb?.spec as { maxUnavailable?: number } | undefined)?.maxUnavailable).toBe(1);
    const metrics = objects.find((o) => o.kind === 'Service' && selects((o.spec as { selector: Record<string, string> }).selector, podTemplateOf(worker)?.metadata.labels)) as
      | (KubeObject & { spec: { ports: Array<{ targetPort: string | number }> } })
      | undefined;
    expect(metrics?.spec.ports.map((p) => portOf(c, p.targetPort))).toEqual([port]);
    expect(podTemplateOf(worker)?.metadata).toMatchObject({ labels: expect.any(Object) });
  });

  it('every Service and PodDisruptionBudget selects the pods of a workload, on ports they have', () => {
    const problems: string[] = [];
    for (const o of objects.filter((x) => x.kind === 'Service' || x.kind === 'PodDisruptionBudget')) {
      const spec = o.spec as { selector: Record<string, string> & { matchLabels?: Record<string, string> }; ports?: Array<{ name?: string; targetPort?: string | number; port: number }> };
      const selector = o.kind === 'Service' ? spec.selector : spec.selector.matchLabels;
      const targets = workloads.filter((w) => selects(selector, podTemplateOf(w)?.metadata.labels));
      if (targets.length === 0) problems.push(`${o.kind} ${o.metadata.name} selects no pods`);
      for (const p of spec.ports ?? []) {
        const target = p.targetPort ?? p.port;
        if (!targets.some((w) => podSpec(w).containers.some((c) => portOf(c, target) !== undefined))) problems.push(`${o.kind} ${o.metadata.name}: no container port ${String(target)}`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every Secret, ConfigMap and ServiceAccount a pod uses is in the overlay, or is a Secret with a template in secrets/', () => {
    const have = (kind: string, name: string) => objects.some((o) => o.kind === kind && o.metadata.name === name);
    const templates = templatedSecrets();
    const problems: string[] = [];
    for (const w of workloads) {
      const spec = podSpec(w);
      const secret = (name: string, why: string) => {
        if (!have('Secret', name) && !templates.has(name)) problems.push(`${w.metadata.name}: ${why} Secret ${name} is neither in the overlay nor templated`);
      };
      if (spec.serviceAccountName && !have('ServiceAccount', spec.serviceAccountName)) problems.push(`${w.metadata.name}: no ServiceAccount ${spec.serviceAccountName}`);
      for (const v of spec.volumes ?? []) {
        if (v.secret) secret(v.secret.secretName, `volume ${v.name}:`);
        if (v.configMap && !have('ConfigMap', v.configMap.name)) problems.push(`${w.metadata.name}: no ConfigMap ${v.configMap.name}`);
      }
      const claims = ((w.spec as { volumeClaimTemplates?: Array<{ metadata: { name: string } }> }).volumeClaimTemplates ?? []).map((t) => t.metadata.name);
      for (const c of containersOf(w)) {
        for (const m of c.volumeMounts ?? []) if (!spec.volumes?.some((v) => v.name === m.name) && !claims.includes(m.name)) problems.push(`${w.metadata.name}/${c.name}: mounts unknown volume ${m.name}`);
        for (const e of c.env ?? []) {
          if (e.valueFrom?.secretKeyRef) secret(e.valueFrom.secretKeyRef.name, `env ${e.name}:`);
          if (e.valueFrom?.configMapKeyRef && !have('ConfigMap', e.valueFrom.configMapKeyRef.name)) problems.push(`${w.metadata.name}: no ConfigMap ${e.valueFrom.configMapKeyRef.name}`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('every container runs as non-root, read-only, without privilege escalation or capabilities, with requests and a memory limit', () => {
    const problems: string[] = [];
    for (const w of workloads) {
      const spec = podSpec(w);
      for (const c of containersOf(w)) {
        const at = `${w.metadata.name}/${c.name}`;
        if (!(c.securityContext?.runAsNonRoot ?? spec.securityContext?.runAsNonRoot)) problems.push(`${at}: not runAsNonRoot`);
        if (c.securityContext?.readOnlyRootFilesystem !== true) problems.push(`${at}: root file system writable`);
        if (c.securityContext?.allowPrivilegeEscalation !== false) problems.push(`${at}: allowPrivilegeEscalation not false`);
        if (!c.securityContext?.capabilities?.drop?.includes('ALL')) problems.push(`${at}: capabilities not dropped`);
        if (!c.resources?.requests?.cpu || !c.resources.requests.memory || !c.resources.limits?.memory) problems.push(`${at}: no cpu/memory request or memory limit`);
        if (!c.livenessProbe || !c.readinessProbe) problems.push(`${at}: no liveness or readiness probe`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('every regsync container runs a command and flags regsync has; a tokens file is a mounted Secret item', () => {
    const containers = workloads.flatMap((w) => containersOf(w).map((c) => ({ w, c }))).filter(({ c }) => isRegsync(c));
    expect(containers.length).toBeGreaterThanOrEqual(2);
    for (const { w, c } of containers) {
      const { opts } = parsedArgs(c);
      if (opts.apiTokensFile === undefined) continue;
      const file = String(opts.apiTokensFile);
      const mount = c.volumeMounts?.find((m) => file.startsWith(`${m.mountPath}/`));
      const volume = podSpec(w).volumes?.find((v) => v.name === mount?.name);
      expect(volume?.secret?.items?.map((i) => `${mount?.mountPath}/${i.path}`), `${w.metadata.name}: ${file}`).toContain(file);
    }
  });
});

describe('deploy/kubernetes: RBAC', () => {
  type Rule = { apiGroups: string[]; resources: string[]; verbs: string[] };
  const rulesOf = (objects: KubeObject[], kind: string) => objects.filter((o) => o.kind === kind).flatMap((o) => (o as unknown as { rules: Rule[] }).rules);
  const sorted = (rules: Rule[]) => rules.map((r) => ({ apiGroups: [...r.apiGroups].sort(), resources: [...r.resources].sort(), verbs: [...r.verbs].sort() }));

  it('grants only what the Kubernetes adapter does, on Services and EndpointSlices, in both variants and the standalone file', () => {
    const cluster = buildKustomization(join(ROOT, 'components/rbac-cluster'), 'Component').map((p) => p.object);
    const namespaced = buildKustomization(join(ROOT, 'components/rbac-namespaced'), 'Component').map((p) => p.object);
    const standalone = objectsOf(join(ROOT, 'rbac.yaml'));
    const adapter = [
      { apiGroups: [''], resources: ['services'], verbs: ['create', 'delete', 'get', 'list', 'update', 'watch'] },
      { apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['create', 'delete', 'get', 'list', 'update', 'watch'] },
    ];
    expect(sorted(rulesOf(cluster, 'ClusterRole'))).toEqual(adapter);
    expect(sorted(rulesOf(namespaced, 'Role'))).toEqual(adapter);
    expect(sorted(rulesOf(standalone, 'ClusterRole'))).toEqual(adapter);
  });

  it('the per-namespace variant grants nothing cluster-wide, and binds its Role in the namespace it grants', () => {
    const namespaced = buildKustomization(join(ROOT, 'components/rbac-namespaced'), 'Component').map((p) => p.object);
    expect(namespaced.filter((o) => o.kind.startsWith('Cluster'))).toEqual([]);
    for (const binding of namespaced.filter((o) => o.kind === 'RoleBinding') as Array<KubeObject & { roleRef: { kind: string; name: string }; subjects: Array<{ kind: string; name: string; namespace: string }> }>) {
      expect(binding.roleRef.kind).toBe('Role');
      expect(namespaced.some((o) => o.kind === 'Role' && o.metadata.name === binding.roleRef.name && o.metadata.namespace === binding.metadata.namespace)).toBe(true);
      expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'regsync', namespace: 'regsync' }]);
    }
  });

  it('the DNS interface runs `regsync dns` with flags regsync has, serves its Service port 53 and is probed on its metrics listener', () => {
    const dns = buildKustomization(join(ROOT, 'components/dns'), 'Component');
    const deployment = find(dns, 'Deployment', 'regsync-dns');
    const c = container(deployment, 'dns');
    const { command, opts } = parsedArgs(c);
    expect(command).toBe('dns');
    expect(portOf(c, c.livenessProbe?.httpGet?.port)).toBe(listenPort(opts.metricsListen));
    const service = find(dns, 'Service', 'regsync-dns') as unknown as { spec: { ports: Array<{ port: number; protocol: string; targetPort: string }> } };
    expect(service.spec.ports.map((p) => [p.port, p.protocol, portOf(c, p.targetPort)])).toEqual([
      [53, 'UDP', listenPort(opts.listen)],
      [53, 'TCP', listenPort(opts.listen)],
    ]);
  });

  it('the DNS interface reads only', () => {
    const dns = buildKustomization(join(ROOT, 'components/dns'), 'Component').map((p) => p.object);
    expect(rulesOf(dns, 'ClusterRole').flatMap((r) => r.verbs).sort()).toEqual(['list', 'list', 'watch', 'watch']);
  });
});

describe('deploy/kubernetes/secrets: templates', () => {
  it('hold placeholders only, which regsync refuses: an unedited API tokens template does not start the API', () => {
    const secrets = yamlFilesUnder(TEMPLATES_DIR).flatMap(objectsOf);
    expect(secrets.map((s) => s.metadata.name).sort()).toEqual(['regsync-api-tokens', 'regsync-redis', 'regsync-secret-key']);
    for (const s of secrets) {
      const values = Object.values((s as unknown as { stringData: Record<string, string> }).stringData);
      expect(values.length, s.metadata.name).toBeGreaterThan(0);
      for (const v of values) expect(v, s.metadata.name).toMatch(/<[^>]+>/);
      expect((s as { data?: unknown }).data, s.metadata.name).toBeUndefined();
    }
    const tokens = secrets.find((s) => s.metadata.name === 'regsync-api-tokens') as unknown as { stringData: { 'tokens.yaml': string } };
    const dir = makeTempDir('regsync-deploy-');
    try {
      const file = join(dir, 'tokens.yaml');
      // The template's content, as the Secret volume would mount it.
      writeFileSync(file, tokens.stringData['tokens.yaml']);
      expect(() => readApiTokensFile(file)).toThrow(ApiTokensError);
      writeFileSync(file, tokens.stringData['tokens.yaml'].replace(/"<[^>]+>"/g, (_m, i: number) => `"${'a'.repeat(31)}${String(i).padStart(4, '0')}"`));
      expect(readApiTokensFile(file).map((t) => [t.name, t.scope])).toEqual([
        ['ops', 'admin'],
        ['dashboard', 'read'],
      ]);
    } finally {
      removeTempDir(dir);
    }
  });
});

describe('deploy/kubernetes: termination grace', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis?.cleanup();
  });

  /** The bounds (ms) of every stop step a Lifecycle registers while `start` runs, by step name. */
  async function stopBounds(start: () => Promise<() => Promise<void>>): Promise<Map<string, number>> {
    const step = vi.spyOn(Lifecycle.prototype, 'step');
    const defer = vi.spyOn(Lifecycle.prototype, 'defer');
    try {
      const close = await start();
      await close();
      const bounds = new Map<string, number>();
      for (const call of step.mock.calls) bounds.set(call[0], call[3] ?? 5_000);
      for (const call of defer.mock.calls) bounds.set(call[0], call[2] ?? 5_000);
      return bounds;
    } finally {
      step.mockRestore();
      defer.mockRestore();
    }
  }

  const total = (bounds: Map<string, number>) => [...bounds.values()].reduce((a, b) => a + b, 0);
  let probed: string[] = [];
  beforeEach(() => {
    probed = [];
  });

  /** The HTTP paths of a container's probes. */
  const probePaths = (c: Container): string[] => [c.startupProbe, c.livenessProbe, c.readinessProbe].flatMap((p) => (p?.httpGet ? [p.httpGet.path] : []));

  /** `path status` of a GET of each path. */
  async function statuses(base: string | undefined, paths: string[]): Promise<string[]> {
    if (base === undefined) throw new Error('the process serves no HTTP');
    return Promise.all(paths.map(async (path) => `${path} ${(await fetch(`${base}${path}`)).status}`));
  }

  it("the worker's grace outlasts its whole bounded stop, the shard handover first, CMDB included", async () => {
    const worker = find(buildKustomization(join(ROOT, 'base')), 'Deployment', 'regsync-worker');
    const graceMs = (podSpec(worker).terminationGracePeriodSeconds ?? 30) * 1000;
    const c = container(worker, 'worker');
    // The manifest's own command line, with a CMDB (one more stop step) and this test's Redis and port.
    const { opts } = parseRegsyncCommand([...(c.args ?? []), '--cmdb', join(REPO, 'tasks/demo-cmdb.yaml')], { REGSYNC_REDIS_URL: redis.url });
    const bounds = await stopBounds(async () => {
      const { node, close } = await runWorker({ ...(opts as { redis: string }), redis: redis.url, metricsListen: '127.0.0.1:0' }, silentLogger());
      // What the probes ask for answers on the worker's metrics listener.
      probed.push(...(await statuses(node.metricsUrl, probePaths(c))));
      return close;
    });
    expect([...bounds.keys()]).toEqual(expect.arrayContaining(['leases', 'engine', 'shard workers', 'metrics listener', 'connections', 'CMDB changes']));
    // The coordinator gives up on a graceful release after one lease TTL: within the leases step's bound.
    expect(Number(opts.leaseTtlMs ?? 5_000)).toBeLessThanOrEqual(bounds.get('leases') ?? 0);
    const documented = /^#\s+-+\n#\s+(\d+) s\s+at most/m.exec(readFileSync(join(ROOT, 'base/worker.yaml'), 'utf8'));
    expect(documented, 'the sum written in base/worker.yaml').not.toBeNull();
    expect(total(bounds)).toBe(Number(documented?.[1]) * 1000);
    expect(total(bounds)).toBeLessThan(graceMs);
    expect(probed).toEqual(['/healthz 200', '/healthz 200', '/healthz 200']);
  });

  it("the API's grace outlasts its preStop pause and its whole bounded stop", async () => {
    const api = find(buildKustomization(join(ROOT, 'base')), 'Deployment', 'regsync-api');
    const graceMs = (podSpec(api).terminationGracePeriodSeconds ?? 30) * 1000;
    const c = container(api, 'api');
    const preStop = c.lifecycle?.preStop?.exec?.command;
    expect(preStop?.[0]).toBe('sleep');
    const bounds = await stopBounds(async () => {
      const node = await startNode({ redisUrl: redis.url, roles: ['api'], listen: { host: '127.0.0.1', port: 0 }, logger: silentLogger() });
      probed.push(...(await statuses(node.url, probePaths(c))));
      return () => node.close();
    });
    expect([...bounds.keys()]).toContain('api');
    expect(probed).toEqual(['/healthz 200', '/readyz 200']);
    expect(Number(preStop?.[1]) * 1000 + total(bounds)).toBeLessThan(graceMs);
  });
});
