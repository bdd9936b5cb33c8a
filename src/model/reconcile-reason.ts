/**
 * Why a reconcile of a service sync was asked for: a change seen in the source (`change`), the
 * periodic repair (`full`), a guard waiting for its confirming read (`confirm`), or a service sync
 * that just started being watched (`start`). Changes run before full syncs and starts.
 */
export type ReconcileReason = 'change' | 'full' | 'confirm' | 'start';
