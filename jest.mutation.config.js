// The suites Stryker runs against each mutant (npm run mutation, stryker.config.json): the
// in-process suites that guard src/fleet, src/adapters and src/router. Left out:
// - the plugin-server suites (test/kong; test/reliability but properties; test/stack,
//   test/chaos): they spawn processes and take minutes, too slow for thousands of mutants;
// - the suites that check documents, the layout or the toolchain (they run no mutated code);
// - the slowest in-process suites (10-35 s each on 2 idle cores; a mutant runs every suite that
//   covers it): client names, the routing scenarios, the Sentinel connection and the request
//   parser's properties. Their code is routing and configuration, not the safety code, whose
//   guards (store, failover, lease, budget and unload suites) all stay.
const base = require('./jest.config.js');

const SKIPPED = [
  // documents, layout, toolchain
  'changelog',
  'layout',
  'markdown-tables',
  'node-support',
  'readme',
  'readme-commands',
  'version',
  // slow, and not the safety code's guards
  'client-names',
  'routing-core',
  'sentinel-connection',
];

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  testMatch: ['<rootDir>/test/core/**/*.test.ts', '<rootDir>/test/integration/**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', `/test/(core|integration)/(${SKIPPED.join('|')})\\.test\\.ts$`],
  // Transpile only (no type check per file: npm run typecheck does that), so a mutant costs a
  // run, not a compile.
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.mutation.json' }] },
};
