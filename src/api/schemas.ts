import { KIND_NAMES, KINDS } from '../../adapters/kinds.js';
import { PROBLEM_CODES } from '../model/index.js';
import { ENDPOINT_PATTERN, ID_PATTERN, NAME_PATTERN, SERVICE_PATTERN } from '../validation/patterns.js';

/**
 * JSON Schemas of the API: they validate input (with `additionalProperties: false` everywhere an
 * object has a fixed shape, so a typo is an error rather than a silently ignored field) and
 * restrict responses to the documented fields (a field not listed, such as a cluster's `password`,
 * is never serialized).
 *
 * Deliberately left out: OpenAPI generation (the schemas are written so that it can be added).
 */

const id = { type: 'string', pattern: ID_PATTERN } as const;
const name = { type: 'string', minLength: 1, maxLength: 128, pattern: NAME_PATTERN } as const;

/** Glob patterns (`*`, `?`, `[ab]`, `{a,b}`) of service names or metadata keys. */
const globs = { type: 'array', maxItems: 256, items: { type: 'string', minLength: 1, maxLength: 255 } } as const;

/** Names (namespaces, groups, services) mapped to other names. */
const nameMap = {
  type: 'object',
  maxProperties: 10_000,
  propertyNames: { minLength: 1, maxLength: 255, pattern: NAME_PATTERN },
  additionalProperties: { type: 'string', minLength: 1, maxLength: 255, pattern: NAME_PATTERN },
} as const;

const clusterFields = {
  kind: { type: 'string', enum: [...KIND_NAMES] },
  endpoints: {
    type: 'array',
    maxItems: 32,
    items: { type: 'string', maxLength: 261, pattern: ENDPOINT_PATTERN },
  },
  namespace: name,
  username: { type: 'string', minLength: 1, maxLength: 255 },
  password: { type: 'string', maxLength: 1024 },
  /** Read-only; accepted and ignored, so that a client can send back what it read. */
  hasPassword: { type: 'boolean' },
  labels: {
    type: 'object',
    maxProperties: 64,
    propertyNames: { minLength: 1, maxLength: 63 },
    additionalProperties: { type: 'string', maxLength: 253 },
  },
  /** Settings of the kind: checked by the kind's own parser (`validateCluster`) once the schema passed. */
  options: { type: 'object', maxProperties: 256 },
} as const;

/** Kinds whose clusters may have no endpoints (Kubernetes takes its API server from the kubeconfig). */
const KINDS_WITHOUT_ENDPOINTS: readonly string[] = KINDS.filter((k) => !k.endpointsRequired).map((k) => k.name);

/** Every kind needs at least one endpoint unless its descriptor says otherwise. */
const endpointsNeededByKind = {
  if: { properties: { kind: { enum: [...KINDS_WITHOUT_ENDPOINTS] } } },
  then: {},
  else: { properties: { endpoints: { type: 'array', minItems: 1 } } },
} as const;

/** `POST /api/v1/clusters`. */
export const createClusterBody = {
  type: 'object',
  additionalProperties: false,
  required: ['id', 'kind', 'endpoints'],
  properties: { id, ...clusterFields },
  ...endpointsNeededByKind,
} as const;

/** `PUT /api/v1/clusters/:id`: the id may be left out; `password: null` removes the stored one. */
export const replaceClusterBody = {
  type: 'object',
  additionalProperties: false,
  required: ['kind', 'endpoints'],
  properties: {
    id,
    ...clusterFields,
    password: { anyOf: [clusterFields.password, { type: 'null' }] },
  },
  ...endpointsNeededByKind,
} as const;

/** `POST /api/v1/tasks`. */
export const createTaskBody = {
  type: 'object',
  additionalProperties: false,
  required: ['source', 'destination', 'service'],
  properties: {
    id,
    source: { type: 'string', minLength: 1, maxLength: 253 },
    destination: { type: 'string', minLength: 1, maxLength: 253 },
    service: { type: 'string', minLength: 1, maxLength: 255, pattern: SERVICE_PATTERN },
    group: name,
    namespace: name,
    options: {
      type: 'object',
      additionalProperties: false,
      properties: {
        fullSyncIntervalMs: { type: 'integer', minimum: 1000, maximum: 86_400_000 },
        verifyIntervalMs: { type: 'integer', minimum: 1000, maximum: 604_800_000 },
        labels: { type: 'array', maxItems: 64, uniqueItems: true, items: { type: 'string', minLength: 1, maxLength: 63 } },
        labelsOverride: { type: 'boolean' },
        include: globs,
        exclude: globs,
        mapping: {
          type: 'object',
          additionalProperties: false,
          properties: {
            namespaces: nameMap,
            groups: nameMap,
            rename: nameMap,
            prefix: { type: 'string', maxLength: 128, pattern: '^\\S*$' },
            suffix: { type: 'string', maxLength: 128, pattern: '^\\S*$' },
            metadataAllow: globs,
            metadataDeny: globs,
          },
        },
        maxServices: { type: 'integer', minimum: 1, maximum: 1_000_000 },
        maxInstances: { type: 'integer', minimum: 1, maximum: 1_000_000 },
        massDeletionPercent: { type: 'integer', minimum: 1, maximum: 100 },
        massDeletionMinCopies: { type: 'integer', minimum: 0, maximum: 1_000_000 },
        massDeletionWindowMs: { type: 'integer', minimum: 0, maximum: 86_400_000 },
        massDeletionConfirm: { type: 'string', enum: ['read', 'operator'] },
      },
    },
  },
} as const;

/**
 * `POST /api/v1/tasks:batch`: one action on many tasks; `create` takes task bodies, the others
 * task ids.
 */
export const taskBatchBody = {
  type: 'object',
  additionalProperties: false,
  required: ['action', 'tasks'],
  properties: {
    action: { type: 'string', enum: ['create', 'pause', 'resume', 'delete'] },
    tasks: { type: 'array', minItems: 1, maxItems: 1000 },
  },
  if: { properties: { action: { const: 'create' } } },
  then: { properties: { tasks: { type: 'array', items: createTaskBody } } },
  else: { properties: { tasks: { type: 'array', items: { type: 'string', minLength: 1, maxLength: 253 } } } },
} as const;

/** `POST /api/v1/tasks/:id/release`: which held services (names or `namespace/group/name`); absent: all. */
export const releaseBody = {
  type: 'object',
  additionalProperties: false,
  properties: { services: { type: 'array', maxItems: 10_000, items: { type: 'string', minLength: 1, maxLength: 600 } } },
} as const;

/** Bodies of actions (`pause`, `resume`, `resync`): none, or an empty object. */
export const emptyBody = { type: 'object', additionalProperties: false, properties: {} } as const;

/**
 * `:id` of routes that look a record up. Loose on purpose: records written by other means (the
 * CLI) stay reachable, and an id that cannot exist is simply not found.
 */
export const lookupParams = {
  type: 'object',
  additionalProperties: false,
  required: ['id'],
  properties: { id: { type: 'string', minLength: 1, maxLength: 253 } },
} as const;

/** `:id` of routes that create a record: it must be a valid id. */
export const createParams = {
  type: 'object',
  additionalProperties: false,
  required: ['id'],
  properties: { id },
} as const;

const stringMap = { type: 'object', additionalProperties: { type: 'string' } } as const;
const freeObject = { type: 'object', additionalProperties: true } as const;

/** A cluster as the API shows it: never a password, `hasPassword` instead. */
export const clusterView = {
  type: 'object',
  required: ['id', 'kind', 'endpoints', 'hasPassword', 'labels', 'options'],
  properties: {
    id: { type: 'string' },
    kind: { type: 'string' },
    endpoints: { type: 'array', items: { type: 'string' } },
    namespace: { type: 'string' },
    username: { type: 'string' },
    hasPassword: { type: 'boolean' },
    labels: stringMap,
    options: freeObject,
  },
} as const;

const taskViewProperties = {
  id: { type: 'string' },
  source: { type: 'string' },
  destination: { type: 'string' },
  service: { type: 'string' },
  group: { type: 'string' },
  namespace: { type: 'string' },
  /** Every option the task has, as stored (validated on the way in). */
  options: { type: 'object', additionalProperties: true },
  state: { type: 'string', enum: ['running', 'paused', 'error'] },
  createdAt: { type: 'string' },
} as const;

/** A task as lists and actions show it. */
export const taskView = {
  type: 'object',
  required: Object.keys(taskViewProperties),
  properties: taskViewProperties,
} as const;

const nullableString = { type: ['string', 'null'] } as const;
const nullableNumber = { type: ['number', 'null'] } as const;

/** A task with its status, as `GET /api/v1/tasks/:id` shows it. */
export const taskDetailView = {
  type: 'object',
  required: [...Object.keys(taskViewProperties), 'status'],
  properties: {
    ...taskViewProperties,
    status: {
      type: 'object',
      required: ['error', 'services'],
      properties: {
        error: nullableString,
        services: {
          type: 'array',
          items: {
            type: 'object',
            required: ['service', 'sourceInstances', 'destinationInstances', 'lastSyncAt', 'lagMs', 'lastError'],
            properties: {
              service: { type: 'string' },
              sourceInstances: { type: 'integer' },
              destinationInstances: { type: 'integer' },
              lastSyncAt: nullableString,
              lagMs: nullableNumber,
              lastError: nullableString,
              problems: {
                type: 'array',
                description: 'What the last reconcile reported, by cause (`lastError` is their text).',
                items: {
                  type: 'object',
                  required: ['code', 'side', 'cluster', 'message'],
                  properties: {
                    code: { type: 'string', enum: [...PROBLEM_CODES] },
                    side: { type: 'string', enum: ['source', 'destination'] },
                    cluster: { type: 'string' },
                    message: { type: 'string' },
                    cause: { type: 'string', description: 'The stable code of the registry error behind it (nacos-auth-failed, kubernetes-timeout), where it had one.' },
                  },
                },
              },
              destination: { type: 'string' },
              held: {
                type: ['object', 'null'],
                properties: {
                  removes: { type: 'integer' },
                  copies: { type: 'integer' },
                  since: { type: 'string' },
                  confirm: { type: 'string' },
                  peak: { type: 'integer', description: 'The most copies within the guard window, when more than `copies`.' },
                  addresses: { type: 'array', items: { type: 'string' }, description: 'The copies Release would remove (ip:port#cluster), at most 100.' },
                },
              },
              warmup: {
                type: 'object',
                description: 'Removals held while the source warms up after an outage or a sharp drop of its instances; applied by a reconcile once `until` passed (absent: none).',
                properties: {
                  cluster: { type: 'string', description: 'The source cluster warming up.' },
                  reason: { type: 'string', enum: ['outage', 'drop'] },
                  since: { type: 'string' },
                  until: { type: 'string', description: 'When the warm-up ends and the held removals are applied (ISO time).' },
                  removes: { type: 'integer', description: 'Copies the reconcile would have removed.' },
                },
              },
              skipped: {
                type: 'object',
                description: 'Source instances not copied, by reason: marked (already passed through the destination), foreign (another tool\'s copy), unhealthy, disabled, conflicting (address taken by an instance the task does not own).',
                properties: {
                  marked: { type: 'integer' },
                  foreign: { type: 'integer' },
                  unhealthy: { type: 'integer' },
                  disabled: { type: 'integer' },
                  conflicting: { type: 'integer' },
                },
              },
            },
          },
        },
      },
    },
  },
} as const;

/** `{items: [...]}`, the shape of every list. */
export function listOf<T extends object>(item: T) {
  return { type: 'object', required: ['items'], properties: { items: { type: 'array', items: item } } } as const;
}

/** The answer of the `compare` routes: what a `PUT` of the same body would change (nothing is written). */
export const comparisonView = {
  type: 'object',
  description: 'What PUT of this body would change; nothing is written.',
  required: ['exists', 'differs', 'fields'],
  properties: {
    exists: { type: 'boolean', description: 'Whether it exists.' },
    differs: { type: 'boolean', description: 'Whether PUT of this body would change anything (true when it does not exist).' },
    fields: { type: 'array', items: { type: 'string' }, description: 'The stored fields PUT would change; never their values.' },
  },
} as const;
