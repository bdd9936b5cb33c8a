/**
 * What the REST API asks of the sync engine. The API changes the store first, then calls these so
 * the engine acts at once instead of at its next full sync.
 */
export interface TaskControl {
  /** A task was created, changed, paused or resumed: (re)start or stop its watches and beats. */
  taskChanged(taskId: string): Promise<void>;
  /** Reconcile every service of the task now. */
  resync(taskId: string): Promise<void>;
  /**
   * Stops the task (in every process) and removes every destination instance it wrote; resolves
   * when they are gone. The caller deletes or replaces the task record afterwards. When it
   * rejects, or the caller's write fails, the task is stopped while the store still holds it: the
   * caller calls {@link taskChanged} so that it runs again where it ran (see `TaskCommands`).
   */
  removeTask(taskId: string): Promise<void>;
  /** A cluster's settings changed: drop cached connections so the next use picks them up. */
  clusterChanged(clusterId: string): Promise<void>;
}
