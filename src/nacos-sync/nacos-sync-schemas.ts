import { SERVICE_PATTERN } from '../validation/patterns.js';

/**
 * JSON Schemas of the nacos-sync compatible routes. Bodies accept exactly the fields of
 * nacos-sync's request classes (`ClusterAddRequest`, `TaskAddRequest`, `TaskAddAllRequest`,
 * `TaskUpdateRequest`), `null` wherever Jackson would take one, and refuse unknown fields as the
 * native API does (a mistyped field would otherwise silently become a different cluster or task
 * id). Query strings are not restricted: unknown parameters (cache busters and the like) are
 * ignored, as Spring ignores them. Responses list exactly the fields of nacos-sync's result classes.
 */

/** A string Jackson would also take as `null`. */
function optionalString(maxLength: number) {
  return { anyOf: [{ type: 'string', maxLength }, { type: 'null' }] } as const;
}

/** `POST /v1/cluster/add` (`ClusterAddRequest`). */
export const clusterAddBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    clusterName: optionalString(255),
    clusterType: optionalString(32),
    connectKeyList: { anyOf: [{ type: 'array', maxItems: 32, items: { type: 'string', maxLength: 1024 } }, { type: 'null' }] },
    userName: optionalString(255),
    password: optionalString(1024),
    namespace: optionalString(128),
  },
} as const;

const clusterIdField = { type: 'string', minLength: 1, maxLength: 253 } as const;

/** `POST /v1/task/add` (`TaskAddRequest`). */
export const taskAddBody = {
  type: 'object',
  additionalProperties: false,
  required: ['sourceClusterId', 'destClusterId', 'serviceName'],
  properties: {
    sourceClusterId: clusterIdField,
    destClusterId: clusterIdField,
    serviceName: { type: 'string', minLength: 1, maxLength: 255, pattern: SERVICE_PATTERN },
    groupName: optionalString(128),
    version: optionalString(128),
    nameSpace: optionalString(128),
  },
} as const;

/** `POST /v1/task/addAll` (`TaskAddAllRequest`). */
export const taskAddAllBody = {
  type: 'object',
  additionalProperties: false,
  required: ['sourceClusterId', 'destClusterId'],
  properties: {
    sourceClusterId: clusterIdField,
    destClusterId: clusterIdField,
    excludeConsumer: { anyOf: [{ type: 'boolean' }, { type: 'null' }] },
  },
} as const;

/** `POST /v1/task/update` (`TaskUpdateRequest`). */
export const taskUpdateBody = {
  type: 'object',
  additionalProperties: false,
  required: ['taskId', 'taskStatus'],
  properties: {
    taskId: { type: 'string', minLength: 1, maxLength: 253 },
    taskStatus: { type: 'string', maxLength: 32 },
  },
} as const;

const queryString = { type: 'string' } as const;

/** `GET /v1/cluster/list` (`ClusterListQueryRequest`). */
export const clusterListQuery = {
  type: 'object',
  properties: { pageNum: queryString, pageSize: queryString, clusterName: queryString },
} as const;

/** `GET /v1/task/list` (`TaskListQueryRequest`). */
export const taskListQuery = {
  type: 'object',
  properties: { pageNum: queryString, pageSize: queryString, serviceName: queryString },
} as const;

/** `GET /v1/cluster/detail`, `DELETE /v1/cluster/delete`. */
export const clusterIdQuery = { type: 'object', properties: { clusterId: queryString } } as const;

/** `GET /v1/task/detail`, `DELETE /v1/task/delete`. */
export const taskIdQuery = { type: 'object', properties: { taskId: queryString } } as const;

/** `DELETE /v1/task/deleteInBatch`: `taskIds` repeated, comma-separated, or both. */
export const taskIdsQuery = {
  type: 'object',
  properties: { taskIds: { anyOf: [queryString, { type: 'array', items: queryString }] } },
} as const;

const nullableString = { type: ['string', 'null'] } as const;

/** `BaseResult`'s fields, in every answer. */
const baseFields = {
  success: { type: 'boolean' },
  resultMessage: nullableString,
  resultCode: { type: 'string' },
} as const;

/**
 * An answer with the base fields and `fields`. Only the base fields are required: a failure
 * answers them alone, through the same route.
 */
function result<T extends object>(fields: T) {
  return {
    type: 'object',
    required: ['success', 'resultMessage', 'resultCode'],
    properties: { ...baseFields, ...fields },
  } as const;
}

const clusterModel = {
  type: 'object',
  properties: {
    clusterId: { type: 'string' },
    connectKeyList: { type: 'string' },
    clusterName: { type: 'string' },
    clusterType: { type: 'string' },
    namespace: nullableString,
    userName: nullableString,
  },
} as const;

const taskModel = {
  type: 'object',
  properties: {
    taskId: { type: 'string' },
    sourceClusterId: { type: 'string' },
    destClusterId: { type: 'string' },
    serviceName: { type: 'string' },
    groupName: { type: 'string' },
    taskStatus: { type: 'string' },
  },
} as const;

const pageCounters = { totalPage: { type: 'integer' }, totalSize: { type: 'integer' }, currentSize: { type: 'integer' } } as const;

/** `BaseResult`, `ClusterAddResult`, `ClusterDeleteResult`, `TaskAddResult`. */
export const baseResult = result({});
/** `ClusterTypeResult`. */
export const clusterTypesResult = result({ types: { type: 'array', items: { type: 'string' } } });
/** `ClusterListQueryResult`. */
export const clusterListResult = result({ clusterModels: { type: 'array', items: clusterModel }, ...pageCounters });
/** `ClusterDetailQueryResult`. */
export const clusterDetailResult = result({ clusterModel });
/** `TaskListQueryResult`. */
export const taskListResult = result({ taskModels: { type: 'array', items: taskModel }, ...pageCounters });
/** `TaskDetailQueryResult`. */
export const taskDetailResult = result({ taskModel });
