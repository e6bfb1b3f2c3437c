const fs = require('node:fs');
const path = require('node:path');

/**
 * The suites that mostly wait on the wall clock (lease ages, poll intervals, Redis timeouts): on
 * 2 cores, their processes used under half a core of the machine over their run (measured with
 * scripts/suite-cpu.js, DEVELOPERS.md). `npm test` (scripts/test.js) runs them one at a time in
 * a lane of their own, beside the other suites: they leave the other lane the CPU it had.
 */
const WAITING = [
  'core/failover-review',
  'core/failover-review-69',
  'core/failover-suspects',
  'core/fleet-store',
  'core/hand-back-close',
  'core/lease-ceiling-unload',
  'core/lease-leaks',
  'core/lease-through-load',
  'core/left-other-state',
  'core/left-poller-settings',
  'core/mutation-connection',
  'core/own-unload',
  'core/placement-recheck',
  'core/prefetch-retire',
  'core/record-move',
  'core/review-left',
  'core/review-move',
  'core/runtime-handover',
  'core/sentinel-connection',
  'core/shared-faults',
  'core/unload-window',
  'integration/lifecycle',
  'integration/replica-modes',
  'integration/slo-max-in-flight',
  'kong/departed-replicas',
  'kong/old-config-log-phase',
  'kong/rate-limited-log',
  'kong/record-move',
  'kong/replica-last-word',
  'kong/review-move',
  'kong/slo-max-in-flight',
  'kong/ttft-overload',
  'reliability/tcp-proxy',
  'stack/demo-log',
  'stack/openai-cold-budget',
];
// A suite renamed or removed would leave the lane silently: say so.
for (const s of WAITING) {
  if (!fs.existsSync(path.join(__dirname, 'test', `${s}.test.ts`)))
    throw new Error(`jest.config.js WAITING names test/${s}.test.ts, which does not exist`);
}
const waiting = `<rootDir>/test/(${WAITING.join('|')})\\.test\\.ts$`;

// The replica fault suite with real processes and wall-clock polls fails only on a loaded
// machine; the simulation (dst/) checks its invariants on simulated time (docs/reliability.md,
// "Explored schedules"). Its own command: `npm run faults`.
const ignored = ['/node_modules/', '<rootDir>/test/reliability/faults\\.test\\.ts$'];

/**
 * JEST_LANE (set by scripts/test.js): `waiting`, only the WAITING suites; `busy`, all others;
 * unset, every suite (`npx jest`, `npm test -- <files>`).
 */
const lane = process.env.JEST_LANE;
if (lane !== undefined && lane !== 'waiting' && lane !== 'busy')
  throw new Error(`JEST_LANE is '${lane}': 'waiting', 'busy' or unset`);

/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: lane === 'waiting' ? WAITING.map((s) => `<rootDir>/test/${s}.test.ts`) : ['**/*.test.ts'],
  // ts-jest only transpiles: tsconfig.json sets isolatedModules, so each suite's files are not
  // type-checked again (`npm run typecheck`, which CI runs first, checks the whole tree once).
  // Type-checking per suite cost about 1 s of CPU a suite on 2 cores.
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  // One suite at a time (in each lane): the fault, soak and multi-node suites each run plugin
  // servers, simulated replicas (and Redis) on their own, and their poll deadlines assume the
  // machine is theirs. Two at once on 2 cores starved a 100 ms slow /metrics past its 200 ms
  // poll timeout.
  maxWorkers: 1,
  testPathIgnorePatterns: lane === 'busy' ? [...ignored, waiting] : ignored,
  testTimeout: 30000,
  // One suite at a time runs in jest's own process, so a timer a suite left (a runtime the registry
  // made after the suite's last stop: seen once in four runs of the record-move suites together)
  // kept the whole run from exiting, and CI would time out. Each suite still stops what it made.
  forceExit: true,
};
