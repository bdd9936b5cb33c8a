import type { TaskControl } from '../../src/engine/control.js';

/** One call a {@link RecordingTaskControl} received. */
export interface ControlCall {
  method: keyof TaskControl;
  id: string;
}

/**
 * A TaskControl that records every call and resolves, or rejects with the error set in `failures`
 * for that method. Why: the API's contract with the engine is "store first, then tell"; tests
 * check both halves without running an engine.
 *
 * Deliberately left out: delays and hooks; a test that needs the engine runs the real one.
 */
export class RecordingTaskControl implements TaskControl {
  /** Calls in the order they arrived. */
  readonly calls: ControlCall[] = [];
  /** Set a method's entry to make it reject; delete it to make it resolve again. */
  readonly failures: Partial<Record<keyof TaskControl, Error>> = {};
  /** Runs inside a call before it settles, e.g. to look at the store at that moment. */
  onCall: ((call: ControlCall) => void | Promise<void>) | undefined;

  taskChanged(taskId: string): Promise<void> {
    return this.record('taskChanged', taskId);
  }

  resync(taskId: string): Promise<void> {
    return this.record('resync', taskId);
  }

  removeTask(taskId: string): Promise<void> {
    return this.record('removeTask', taskId);
  }

  clusterChanged(clusterId: string): Promise<void> {
    return this.record('clusterChanged', clusterId);
  }

  /** Forgets the calls recorded so far. */
  reset(): void {
    this.calls.splice(0);
  }

  private async record(method: keyof TaskControl, id: string): Promise<void> {
    const call = { method, id };
    this.calls.push(call);
    await this.onCall?.(call);
    const failure = this.failures[method];
    if (failure) throw failure;
  }
}
