import type { FastifyInstance } from 'fastify';
import { KINDS } from '../../adapters/kinds.js';
import { SHARED_CLUSTER_OPTIONS } from '../model/index.js';
import { listOf } from './schemas.js';

const option = {
  type: 'object',
  required: ['name', 'description'],
  properties: { name: { type: 'string' }, description: { type: 'string' } },
} as const;

/** One kind as `GET /api/v1/kinds` shows it. */
const kindView = {
  type: 'object',
  required: ['name', 'label', 'defaultPort', 'endpointsRequired', 'nacosSyncType', 'options'],
  properties: {
    name: { type: 'string', description: 'The `kind` of a cluster.' },
    label: { type: 'string', description: 'How the dashboard names it.' },
    defaultPort: { type: 'integer', description: 'The port of an endpoint given without one.' },
    endpointsRequired: { type: 'boolean', description: 'Whether a cluster needs at least one endpoint.' },
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
