/**
 * Why a reconcile of a service sync was asked for: a change seen in the source (`change`), the
 * periodic repair (`full`), a guard waiting for its confirming read (`confirm`), a service sync
 * that just started being watched (`start`), one whose reconcile could not reach a cluster that
 * answers again (`recovery`), or one reconciled to learn whether a cluster that did not answer
 * does again (`probe`, tried once; see `ClusterRecovery`). Changes run first, then recoveries and
 * probes, then full syncs and starts.
 */
export type ReconcileReason = 'change' | 'full' | 'confirm' | 'start' | 'recovery' | 'probe';
