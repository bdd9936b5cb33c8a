import { Document, isMap, isSeq } from 'yaml';
import { callApi, getList } from './apply-command.js';

/** A cluster as `GET /api/v1/clusters` shows it. */
interface ClusterView {
  id: string;
  kind: string;
  endpoints: string[];
  namespace?: string;
  username?: string;
  hasPassword: boolean;
  labels: Record<string, string>;
  options: Record<string, unknown>;
}

/** A task as `GET /api/v1/tasks` shows it. */
interface TaskView {
  id: string;
  source: string;
  destination: string;
  service: string;
  group: string;
  namespace: string;
  options: Record<string, unknown>;
  state: string;
}

/**
 * The stored clusters and tasks as a declarations file that `regsync apply` takes back unchanged:
 * applying it to the same server compares every entry as unchanged and writes nothing.
 *
 * Passwords are never exported (the API never shows them): a cluster with one carries a comment
 * instead, and no `password:` key, which `apply` reads as "keep the stored password". To move the
 * file to another deployment, add `passwordFile:` or `password: "${VAR}"` there. Every task is
 * written with its namespace and group spelt out, so it does not depend on the defaults. A task's
 * state (paused) is not a declaration: `apply` keeps it, and the export says so in a comment.
 * Empty `labels` and `options` are left out (`apply` reads them as empty). Sorted by id, so that
 * two exports of the same state are the same text.
 */
export async function exportDeclarations(server: string, token?: string): Promise<string> {
  const call = (method: string, path: string) => callApi(server, token, method, path);
  const clusters = (await getList<ClusterView>(call, '/api/v1/clusters')).items.sort((a, b) => a.id.localeCompare(b.id));
  const tasks = (await getList<TaskView>(call, '/api/v1/tasks')).items.sort((a, b) => a.id.localeCompare(b.id));
  const doc = new Document({ clusters: clusters.map(clusterEntry), tasks: tasks.map(taskEntry) });
  doc.commentBefore = ` regsync export of ${server}: \`regsync apply -f <this file>\` changes nothing there.\n Passwords are not exported; apply keeps the stored ones.`;
  commentItems(doc, 'clusters', clusters.map((c) => (c.hasPassword ? ' has a password, kept on the server (not exported); to set it: passwordFile: <path> or password: "${VAR}"' : undefined)));
  commentItems(doc, 'tasks', tasks.map((t) => (t.state === 'paused' ? ' paused (apply keeps the state)' : undefined)));
  return doc.toString();
}

function clusterEntry(c: ClusterView): Record<string, unknown> {
  const entry: Record<string, unknown> = { id: c.id, kind: c.kind, endpoints: c.endpoints };
  if (c.namespace !== undefined) entry.namespace = c.namespace;
  if (c.username !== undefined) entry.username = c.username;
  if (Object.keys(c.labels).length > 0) entry.labels = c.labels;
  if (Object.keys(c.options).length > 0) entry.options = c.options;
  return entry;
}

function taskEntry(t: TaskView): Record<string, unknown> {
  const entry: Record<string, unknown> = { id: t.id, source: t.source, destination: t.destination, service: t.service, group: t.group, namespace: t.namespace };
  if (Object.keys(t.options).length > 0) entry.options = t.options;
  return entry;
}

function commentItems(doc: Document, key: string, comments: ReadonlyArray<string | undefined>): void {
  const seq = doc.get(key, true);
  if (!isSeq(seq)) return;
  seq.items.forEach((item, i) => {
    const comment = comments[i];
    if (comment !== undefined && isMap(item)) item.commentBefore = comment;
  });
}
