import type { FastifyInstance } from 'fastify';
import { KINDS, validateCluster } from '../../adapters/kinds.js';
import { ClusterConfigError, SHARED_CLUSTER_OPTIONS, type ClusterSpec } from '../model/index.js';
import { ApiError } from './api-error.js';
import { listOf } from './schemas.js';

/** Longest detail of a cluster check quoted in an answer (the parsers quote the value they refuse). */
const MAX_DETAIL = 300;

const option = {
  type: 'object',
  required: ['name', 'type', 'description'],
  properties: {
    name: { type: 'string' },
    type: {
      type: 'string',
      enum: ['string', 'integer', 'boolean', 'list', 'object'],
      description: 'The JSON shape of the value: list is an array of strings, integer also takes a numeric string.',
    },
    description: { type: 'string' },
    choices: { type: 'array', items: { type: 'string' }, description: 'For a string taking only some values: all of them.' },
  },
} as const;

/** One kind as `GET /api/v1/kinds` shows it. */
const kindView = {
  type: 'object',
  required: ['name', 'label', 'defaultPort', 'endpointsRequired', 'usesCredentials', 'nacosSyncType', 'options'],
  properties: {
    name: { type: 'string', description: 'The `kind` of a cluster.' },
    label: { type: 'string', description: 'How the dashboard names it.' },
    defaultPort: { type: 'integer', description: 'The port of an endpoint given without one.' },
    endpointsRequired: { type: 'boolean', description: 'Whether a cluster needs at least one endpoint.' },
    usesCredentials: { type: 'boolean', description: 'Whether the kind reads username and password (false: a kubeconfig says how to sign in).' },
    nacosSyncType: { type: ['string', 'null'], description: 'The nacos-sync clusterType that creates it; null: none.' },
    options: { type: 'array', items: option, description: 'The options of the kind, and those every cluster may have.' },
  },
} as const;

/** The answer of `GET /api/v1/kinds`, from the list of kinds alone. */
function kindsView() {
  return {
    items: KINDS.map((k) => ({
      name: k.name,
      label: k.label,
      defaultPort: k.defaultPort,
      endpointsRequired: k.endpointsRequired,
      usesCredentials: k.usesCredentials,
      nacosSyncType: k.nacosSyncType ?? null,
      options: [...k.options, ...SHARED_CLUSTER_OPTIONS],
    })),
  };
}

/**
 * `GET /api/v1/kinds`: the registry kinds this build serves, with their options, for clients that
 * build cluster forms (the dashboard) instead of knowing the kinds themselves.
 */
export function registerKindRoutes(app: FastifyInstance): void {
  const view = kindsView();
  app.get('/api/v1/kinds', { schema: { response: { 200: listOf(kindView) } } }, async () => view);
}

/**
 * Checks a cluster about to be stored with its kind's own rules ({@link validateCluster}); throws
 * {@link ApiError} `invalid_request` naming the field (`body.options.apiVersion: ...`). Every route
 * that stores a cluster calls it, after its schema passed.
 */
export function checkClusterSpec(spec: ClusterSpec): void {
  try {
    validateCluster(spec);
  } catch (err) {
    if (!(err instanceof ClusterConfigError)) throw err;
    throw new ApiError('invalid_request', clusterProblem('body.', err), { cause: err });
  }
}

/** `<prefix><setting> <detail>`, the detail cut to a readable length. */
export function clusterProblem(prefix: string, err: ClusterConfigError): string {
  const detail = err.detail.length > MAX_DETAIL ? `${err.detail.slice(0, MAX_DETAIL)}…` : err.detail;
  return `${prefix}${err.setting}: ${detail}`;
}
