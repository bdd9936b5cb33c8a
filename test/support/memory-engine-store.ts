import type { EngineStore } from '../../src/engine/reconciler.js';
import type { MissingServiceMarks } from '../../src/engine/sync-engine.js';
import { compareServiceKeys, serviceKeyString, type ClusterSpec, type GuardState, type ServiceKey, type ServiceStatus, type TaskProblem, type TaskSpec } from '../../src/model/index.js';

/**
 * The engine's store in memory, for unit tests of the reconciler and the engine without Redis.
 * Statuses are deep-copied in and out, as JSON in Redis would be, so a test can never share an
 * object with the code under test. Writes of a status for a task that does not exist are dropped,
 * as `RegsyncStore.putServiceStatus` drops them.
 */
export class MemoryEngineStore implements EngineStore {
  readonly tasks = new Map<string, TaskSpec>();
  readonly clusters = new Map<string, ClusterSpec>();
  readonly statuses = new Map<string, Map<string, ServiceStatus>>();
  readonly taskErrors = new Map<string, TaskProblem>();
  readonly releases = new Set<string>();
  /** What the guards remember, by `taskId|namespace/group/name`. */
  readonly guards = new Map<string, GuardState>();
  /** Every status written, in order (the reconciler's record of what it decided). */
  readonly writes: ServiceStatus[] = [];

  async getTask(id: string): Promise<TaskSpec | undefined> {
    return copy(this.tasks.get(id));
  }

  async getCluster(id: string): Promise<ClusterSpec | undefined> {
    return copy(this.clusters.get(id));
  }

  async listTasks(): Promise<TaskSpec[]> {
    return [...this.tasks.values()].map((t) => copy(t) as TaskSpec);
  }

  async tasksUsingCluster(clusterId: string): Promise<TaskSpec[]> {
    return (await this.listTasks()).filter((t) => t.source === clusterId || t.destination === clusterId);
  }

  async putServiceStatus(taskId: string, status: ServiceStatus): Promise<void> {
    if (!this.tasks.has(taskId)) return;
    const stored = copy(status) as ServiceStatus;
    this.writes.push(stored);
    let byService = this.statuses.get(taskId);
    if (!byService) this.statuses.set(taskId, (byService = new Map()));
    byService.set(serviceKeyString(status.service), stored);
  }

  async listServiceStatus(taskId: string): Promise<ServiceStatus[]> {
    return [...(this.statuses.get(taskId)?.values() ?? [])].map((s) => copy(s) as ServiceStatus).sort((a, b) => compareServiceKeys(a.service, b.service));
  }

  async getServiceStatus(taskId: string, service: ServiceKey): Promise<ServiceStatus | undefined> {
    return copy(this.statuses.get(taskId)?.get(serviceKeyString(service)));
  }

  async deleteServiceStatus(taskId: string, service: ServiceKey): Promise<void> {
    this.statuses.get(taskId)?.delete(serviceKeyString(service));
  }

  async setTaskError(taskId: string, problem: TaskProblem | null): Promise<void> {
    if (problem === null) this.taskErrors.delete(taskId);
    else if (this.tasks.has(taskId)) this.taskErrors.set(taskId, copy(problem));
  }

  async takeRelease(taskId: string, service: ServiceKey): Promise<boolean> {
    return this.releases.delete(`${taskId}|${serviceKeyString(service)}`);
  }

  async getGuard(taskId: string, service: ServiceKey): Promise<GuardState> {
    return copy(this.guards.get(`${taskId}|${serviceKeyString(service)}`)) ?? {};
  }

  async putGuard(taskId: string, service: ServiceKey, state: GuardState): Promise<void> {
    const key = `${taskId}|${serviceKeyString(service)}`;
    if (state.emptySince === undefined && (state.copies?.length ?? 0) === 0) this.guards.delete(key);
    else if (this.tasks.has(taskId)) this.guards.set(key, copy(state));
  }

  /** What the guards remember of the harness's service `orders` of task `t` (for assertions). */
  guardOf(taskId: string, service: ServiceKey): GuardState | undefined {
    return this.guards.get(`${taskId}|${serviceKeyString(service)}`);
  }

  /** An operator's release of a held mass deletion (what `POST /api/v1/tasks/:id/release` stores). */
  release(taskId: string, service: ServiceKey): void {
    this.releases.add(`${taskId}|${serviceKeyString(service)}`);
  }
}

/** Missing-service marks in memory (what `MissingServices` keeps in Redis). */
export class MemoryMissingServices implements MissingServiceMarks {
  readonly marks = new Map<string, Map<string, number>>();

  async note(taskId: string, present: ReadonlySet<string>, absent: readonly string[], now: number): Promise<Map<string, number>> {
    let marks = this.marks.get(taskId);
    if (!marks) this.marks.set(taskId, (marks = new Map()));
    for (const key of present) marks.delete(key);
    const since = new Map<string, number>();
    for (const key of absent) {
      if (!marks.has(key)) marks.set(key, now);
      since.set(key, marks.get(key) as number);
    }
    return since;
  }

  async since(taskId: string, key: string): Promise<number | undefined> {
    return this.marks.get(taskId)?.get(key);
  }

  async clear(taskId: string): Promise<void> {
    this.marks.delete(taskId);
  }
}

function copy<T>(value: T): T {
  return value === undefined ? value : (JSON.parse(JSON.stringify(value)) as T);
}
