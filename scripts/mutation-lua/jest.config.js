// The jest run of one Lua mutant (scripts/mutation-lua.js sets the variables): the in-process
// suites transpiled without type checks (jest.mutation.config.js), the mutated script module
// resolved in place of the real one, the suites in the runner's order, and a suite stopped at its
// first failing test. Only this runner reads LUA_MUTANT_*: src/ has no test hook.
const { join } = require('node:path');
const base = require('../../jest.mutation.config.js');

const root = join(__dirname, '..', '..');
const suites = (process.env.LUA_MUTANT_SUITES ?? '').split(',').filter(Boolean);

/** @type {import('jest').Config} */
module.exports = {
  ...base,
  rootDir: root,
  roots: ['<rootDir>/test'],
  testMatch: suites.map((f) => `<rootDir>/${f}`),
  resolver: join(__dirname, 'resolver.js'),
  testEnvironment: join(__dirname, 'environment.js'),
  testSequencer: join(__dirname, 'sequencer.js'),
};
