import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, join, relative, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';

/** A Kubernetes object as written in a manifest (only what the checks read is typed). */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

/** One object and where it was written. */
export interface Placed {
  file: string;
  object: KubeObject;
}

/** The YAML documents of a file (empty documents left out); a syntax error names the file and the document. */
export function readYamlDocuments(file: string): unknown[] {
  const docs = parseAllDocuments(readFileSync(file, 'utf8'));
  const list = Array.isArray(docs) ? docs : [docs];
  return list.flatMap((doc, i) => {
    if (doc.errors.length > 0) throw new Error(`${file} (document ${i + 1}): ${doc.errors[0]?.message ?? 'invalid YAML'}`);
    const value: unknown = doc.toJS();
    return value === null || value === undefined ? [] : [value];
  });
}

/** Every `.yaml`/`.yml` file under `dir`, recursively, sorted. */
export function yamlFilesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) return yamlFilesUnder(path);
      return /\.ya?ml$/.test(entry.name) ? [path] : [];
    })
    .sort();
}

/** Is this file a kustomization (kustomize reads only these names)? */
export function isKustomizationFile(file: string): boolean {
  return ['kustomization.yaml', 'kustomization.yml', 'Kustomization'].includes(basename(file));
}

/** The fields of a kustomization this repository uses; {@link buildKustomization} refuses any other, so that it never silently ignores one kustomize would apply. */
const KUSTOMIZATION_FIELDS = new Set(['apiVersion', 'kind', 'resources', 'components', 'configMapGenerator', 'images']);

interface Kustomization {
  apiVersion: string;
  kind: 'Kustomization' | 'Component';
  resources?: string[];
  components?: string[];
  configMapGenerator?: Array<{ name: string; namespace?: string; files: string[] }>;
  images?: Array<{ name: string; newName?: string; newTag?: string }>;
}

/** Reads `dir/kustomization.yaml`, checking its kind and that it uses only the fields {@link buildKustomization} understands. */
export function readKustomization(dir: string): Kustomization {
  const file = join(dir, 'kustomization.yaml');
  if (!existsSync(file)) throw new Error(`${dir} has no kustomization.yaml`);
  const [doc, ...more] = readYamlDocuments(file) as Array<Record<string, unknown>>;
  if (doc === undefined || more.length > 0) throw new Error(`${file}: expected exactly one document`);
  const unknown = Object.keys(doc).filter((k) => !KUSTOMIZATION_FIELDS.has(k));
  if (unknown.length > 0) throw new Error(`${file}: fields this check does not understand: ${unknown.join(', ')}`);
  const expected = doc.kind === 'Component' ? 'kustomize.config.k8s.io/v1alpha1' : 'kustomize.config.k8s.io/v1beta1';
  if (doc.kind !== 'Kustomization' && doc.kind !== 'Component') throw new Error(`${file}: kind must be Kustomization or Component`);
  if (doc.apiVersion !== expected) throw new Error(`${file}: a ${String(doc.kind)} has apiVersion ${expected}`);
  return doc as unknown as Kustomization;
}

/**
 * What `kustomize build dir` gives for the subset of kustomize this repository uses: resources
 * (files, or directories holding a Kustomization), components (directories holding a Component),
 * configMapGenerator (the ConfigMap, without the hash suffix kustomize appends and rewrites
 * references to) and images. Every path must exist; a resource directory must not be a
 * Component, nor a component a Kustomization, as with kustomize.
 */
export function buildKustomization(dir: string, want: 'Kustomization' | 'Component' = 'Kustomization'): Placed[] {
  const k = readKustomization(dir);
  const where = relative(process.cwd(), join(dir, 'kustomization.yaml'));
  if (k.kind !== want) throw new Error(`${where}: is a ${k.kind}, used as a ${want}`);
  const out: Placed[] = [];
  for (const entry of k.resources ?? []) {
    const path = resolve(dir, entry);
    if (!existsSync(path)) throw new Error(`${where}: resource ${entry} does not exist`);
    if (statSync(path).isDirectory()) out.push(...buildKustomization(path, 'Kustomization'));
    else out.push(...readYamlDocuments(path).map((object) => ({ file: path, object: object as KubeObject })));
  }
  for (const gen of k.configMapGenerator ?? []) {
    const data: Record<string, string> = {};
    for (const f of gen.files) {
      const path = resolve(dir, f);
      if (!existsSync(path)) throw new Error(`${where}: configMapGenerator ${gen.name} file ${f} does not exist`);
      data[basename(f)] = readFileSync(path, 'utf8');
    }
    const metadata = { name: gen.name, ...(gen.namespace === undefined ? {} : { namespace: gen.namespace }) };
    out.push({ file: join(dir, 'kustomization.yaml'), object: { apiVersion: 'v1', kind: 'ConfigMap', metadata, data } });
  }
  for (const entry of k.components ?? []) {
    const path = resolve(dir, entry);
    if (!existsSync(path) || !statSync(path).isDirectory()) throw new Error(`${where}: component ${entry} is not a directory`);
    out.push(...buildKustomization(path, 'Component'));
  }
  for (const image of k.images ?? []) {
    for (const container of out.flatMap((p) => containersOf(p.object))) {
      const [name, tag] = splitImage(container.image);
      if (name !== image.name) continue;
      container.image = `${image.newName ?? name}${image.newTag !== undefined ? `:${image.newTag}` : tag !== undefined ? `:${tag}` : ''}`;
    }
  }
  return out;
}

function splitImage(image: string): [string, string | undefined] {
  const at = image.lastIndexOf(':');
  return at > image.lastIndexOf('/') ? [image.slice(0, at), image.slice(at + 1)] : [image, undefined];
}

/** A container as the checks read it. */
export interface Container {
  name: string;
  image: string;
  command?: string[];
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: { secretKeyRef?: { name: string; key: string }; configMapKeyRef?: { name: string; key: string }; fieldRef?: unknown } }>;
  ports?: Array<{ name?: string; containerPort: number; protocol?: string }>;
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  startupProbe?: Probe;
  lifecycle?: { preStop?: { exec?: { command: string[] }; sleep?: { seconds: number } } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: { readOnlyRootFilesystem?: boolean; allowPrivilegeEscalation?: boolean; runAsNonRoot?: boolean; capabilities?: { drop?: string[] } };
  volumeMounts?: Array<{ name: string; mountPath: string; readOnly?: boolean }>;
}

/** A probe as the checks read it. */
export interface Probe {
  httpGet?: { path: string; port: string | number };
  tcpSocket?: { port: string | number };
  exec?: { command: string[] };
}

/** A pod template's spec as the checks read it. */
export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  serviceAccountName?: string;
  terminationGracePeriodSeconds?: number;
  securityContext?: { runAsNonRoot?: boolean; runAsUser?: number; fsGroup?: number };
  volumes?: Array<{ name: string; secret?: { secretName: string; items?: Array<{ key: string; path: string }> }; configMap?: { name: string }; emptyDir?: unknown }>;
}

/** The pod template of a workload (Deployment, StatefulSet, DaemonSet, Job), else undefined. */
export function podTemplateOf(object: KubeObject): { metadata: { labels?: Record<string, string> }; spec: PodSpec } | undefined {
  if (!['Deployment', 'StatefulSet', 'DaemonSet', 'Job'].includes(object.kind)) return undefined;
  return (object.spec as { template: { metadata: { labels?: Record<string, string> }; spec: PodSpec } }).template;
}

/** Every container (init containers too) of a workload; none for other objects. */
export function containersOf(object: KubeObject): Container[] {
  const spec = podTemplateOf(object)?.spec;
  return spec ? [...(spec.initContainers ?? []), ...spec.containers] : [];
}

/** Does a `matchLabels`/`selector` map select these labels? */
export function selects(selector: Record<string, string> | undefined, labels: Record<string, string> | undefined): boolean {
  if (selector === undefined || Object.keys(selector).length === 0) return false;
  return Object.entries(selector).every(([k, v]) => labels?.[k] === v);
}
