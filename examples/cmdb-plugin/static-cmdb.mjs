/**
 * A regsync CMDB plug-in that serves a static in-memory table of IP labels taken from its options.
 *
 * Plain ESM JavaScript: no build step, no dependency, not even on regsync. Point a CMDB config at it:
 *
 *   provider: plugin
 *   module: ./static-cmdb.mjs        # relative to the config file
 *   options:
 *     labels: {site: [x11, x12]}     # optional: label -> allowed values ([] or null: any value)
 *     ips:                           # IP -> label -> value
 *       11.11.11.11: {site: x11}
 *       22.22.22.22: {site: x12}
 *
 * The contract (see `CreateCmdbProvider` in regsync's src/cmdb/plugin-provider.ts): export
 * `createCmdbProvider(options, {logger})` returning (or resolving to) an object with the CMDB SPI
 * methods labelNames, entityTypes, label, labelValue, labelValues, allEntities, entity and events,
 * each returning a Promise; lastError() and close() are optional. A real plug-in would query an
 * inventory system here; a table that never changes records no events.
 */

const IP = 'ip';

function isMapping(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Checks the options and builds label name -> allowed values and IP -> labels. */
function readTable(options) {
  const declared = options.labels ?? {};
  if (!isMapping(declared)) throw new Error('options.labels must be a mapping of label name to allowed values');
  const labels = new Map();
  for (const [name, values] of Object.entries(declared)) {
    const allowed = values ?? [];
    if (!Array.isArray(allowed) || !allowed.every((v) => typeof v === 'string')) {
      throw new Error(`options.labels.${name} must be a list of strings or null`);
    }
    labels.set(name, [...allowed]);
  }
  const ips = options.ips;
  if (!isMapping(ips)) throw new Error('options.ips is required: a mapping of IP to {label: value}');
  const table = new Map();
  for (const [ip, given] of Object.entries(ips)) {
    if (!isMapping(given)) throw new Error(`options.ips["${ip}"] must be a mapping of label to value`);
    for (const [label, value] of Object.entries(given)) {
      if (typeof value !== 'string') throw new Error(`options.ips["${ip}"].${label} must be a string`);
      const allowed = labels.get(label);
      if (allowed === undefined) labels.set(label, []); // undeclared labels allow any value
      else if (allowed.length > 0 && !allowed.includes(value)) {
        throw new Error(`options.ips["${ip}"].${label}: "${value}" is not one of ${allowed.join(', ')}`);
      }
    }
    table.set(ip, { ...given });
  }
  return { labels, table };
}

/** The plug-in's factory: regsync calls it once with the config's `options`. */
export function createCmdbProvider(options, context) {
  const { labels, table } = readTable(options);
  context.logger.info({ ips: table.size, labels: labels.size }, 'static CMDB table loaded');
  const entityOf = (name, type) => {
    const found = type === IP ? table.get(name) : undefined;
    return found === undefined ? undefined : { type: IP, name, labels: { ...found } };
  };
  return {
    async labelNames() {
      return [...labels.keys()];
    },
    async entityTypes() {
      return [IP];
    },
    async label(name) {
      const values = labels.get(name);
      return values === undefined ? undefined : { name, values: [...values] };
    },
    async labelValue(entityName, entityType, label) {
      return entityOf(entityName, entityType)?.labels[label];
    },
    async labelValues(entityName, entityType) {
      return { ...entityOf(entityName, entityType)?.labels };
    },
    async allEntities() {
      return new Map([[IP, new Map([...table.keys()].map((ip) => [ip, entityOf(ip, IP)]))]]);
    },
    async entity(entityName, entityType) {
      return entityOf(entityName, entityType);
    },
    async events() {
      return []; // the table never changes
    },
  };
}
