// The layering of regsync, checked by dependency-cruiser over src/, adapters/ and bin/ in
// `npm test` (test/layering.test.ts). docs/layers.md explains the layers.
//
// Rules see the modules the build compiles: tests (*.test.ts) are not cruised, since they may
// cross layers to drive a real server or registry. Type-only imports count like any other: a
// layer that needs another's types depends on it.
//
// Violations known when a rule was written are listed in .dependency-cruiser-known-violations.json
// (regenerate with `npx depcruise-baseline src adapters bin` once one is fixed); any other fails.

/** A module outside the tests. */
const production = '\\.test\\.ts$';

/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Modules import each other in one direction only: a cycle makes the load order decide what is undefined.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-orphans',
      severity: 'error',
      comment:
        'A module nothing imports and that imports nothing is dead code. bin/regsync.js is the entry point: it loads dist/ at run time.',
      from: { orphan: true, pathNot: ['^bin/regsync\\.js$', '\\.d\\.ts$'] },
      to: {},
    },
    {
      name: 'no-test-code-in-production',
      severity: 'error',
      comment: 'Test support (test/) and tests are for the tests: the build does not ship them.',
      from: { pathNot: production },
      to: { path: ['^test/', production] },
    },
    {
      name: 'model-is-a-leaf',
      severity: 'error',
      comment:
        'src/model (the domain types, the Adapter contract, the task rules) imports nothing of the project, not even src/util: ' +
        'every layer may import it, so it may import none.',
      from: { path: '^src/model/' },
      to: { path: '^(src|adapters|bin)/', pathNot: '^src/model/' },
    },
    {
      name: 'util-is-a-leaf',
      severity: 'error',
      comment: 'src/util holds helpers any layer may use (hashing, locks, bounded reads, Redis scripts); it imports nothing of the project.',
      from: { path: '^src/util/' },
      to: { path: '^(src|adapters|bin)/', pathNot: '^src/util/' },
    },
    {
      name: 'adapters-see-only-model-and-util',
      severity: 'error',
      comment:
        'An adapter implements the contract of src/model and may use the helpers of src/util; nothing else of the project ' +
        '(no engine, store, API or embedded registry). A module an adapter shares with another layer, such as a wire format, ' +
        'goes in a layer-neutral place and is named here.',
      from: { path: '^adapters/', pathNot: production },
      to: { path: '^(src|bin)/', pathNot: '^src/(model|util)/' },
    },
    {
      name: 'adapter-kinds-stay-apart',
      severity: 'error',
      comment:
        'adapters/<kind>/ imports nothing of another kind, nor adapters/kinds.ts (which imports every kind). ' +
        'What two kinds share belongs in src/model or src/util.',
      from: { path: '^adapters/([^/]+)/', pathNot: production },
      to: { path: '^adapters/', pathNot: '^adapters/$1/' },
    },
    {
      name: 'adapters-only-through-kinds',
      severity: 'error',
      comment:
        'The engine, the API, the node and the CLI reach an adapter through adapters/kinds.ts (the registry of kinds: name, ' +
        'options check, factory) and the Adapter contract of src/model, never a module inside adapters/<kind>/. ' +
        'src/registry has its own, stricter rule.',
      from: { path: '^(src|bin)/', pathNot: ['^src/registry/', production] },
      to: { path: '^adapters/[^/]+/' },
    },
    {
      name: 'registry-stands-alone',
      severity: 'error',
      comment:
        'The embedded registry (src/registry) is a Nacos-compatible server of its own: it imports from the project only ' +
        'src/registry, src/util and the logger (src/log.ts), nothing of adapters/ (it is what the nacos adapter talks to, ' +
        'not a user of it). Its imports of adapters/nacos/grpc/ (the gRPC messages and payload codec) are known violations, ' +
        'until the Nacos wire format has a module of its own that both import.',
      from: { path: '^src/registry/', pathNot: production },
      to: { path: '^(src|adapters|bin)/', pathNot: ['^src/(registry|util)/', '^src/log\\.ts$'] },
    },
    {
      name: 'no-import-of-the-dashboard',
      severity: 'error',
      comment:
        'src/dashboard is the browser app, built on its own (tsconfig.dashboard.json) and served as static files: ' +
        'no Node module imports it. The topology model `regsync status` draws is a known violation: the dashboard is ' +
        'compiled and served as one flat directory, so the module cannot leave it without a change to that build.',
      from: { path: '^(src|adapters|bin)/', pathNot: ['^src/dashboard/', production] },
      to: { path: '^src/dashboard/' },
    },
    {
      name: 'dashboard-imports-only-itself',
      severity: 'error',
      comment: 'The browser app talks to the node through the REST API (api-client.ts), not through its modules.',
      from: { path: '^src/dashboard/', pathNot: production },
      to: { path: '^(src|adapters|bin)/', pathNot: '^src/dashboard/' },
    },
    {
      name: 'cli-uses-api-entry-only',
      severity: 'error',
      comment:
        'The CLI starts the node (which serves the API) and checks request bodies the way the API does before sending them: ' +
        'it imports the API through its public entry, src/api/index.ts, never its routes, schemas or error handling. ' +
        'What the API and the CLI both read (the NacosSync wire format, the request patterns) lives outside src/api ' +
        '(src/nacos-sync, src/validation).',
      from: { path: '^src/cli/', pathNot: production },
      to: { path: '^src/api/', pathNot: '^src/api/index\\.ts$' },
    },
  ],
  options: {
    exclude: { path: production },
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
  },
};
