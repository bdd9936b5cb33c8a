export { buildApiApp, DEFAULT_BODY_LIMIT_BYTES } from './api-app.js';
export type { ApiDeps } from './api-deps.js';
export { ApiError } from './api-error.js';
export { API_ERRORS, type ApiErrorBody, type ApiErrorCode } from './errors.js';
export type { ClusterView, ServiceStatusView, TaskDetailView, TaskView, TaskViewState } from './views.js';
export { loadApiTokens } from './auth-config.js';
export { TaskBodyCheck, type LocalTaskSpec } from './task-body-check.js';
