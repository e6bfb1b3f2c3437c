/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  testMatch: ['**/*.test.ts'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'tsconfig.json' }] },
  // Integration suites start servers and child processes; two workers fit a 2-core machine.
  maxWorkers: 2,
  testTimeout: 30000,
};
