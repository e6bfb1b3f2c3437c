// A suite stops at its first failing test: the tests after it are skipped (jest's --bail stops
// only between suites), so a killed mutant costs the tests up to the one that noticed it.
const { TestEnvironment } = require('jest-environment-node');

class BailEnvironment extends TestEnvironment {
  failed = false;

  async handleTestEvent(event) {
    if ((event.name === 'test_done' && event.test.errors.length > 0) || event.name === 'hook_failure') {
      this.failed = true;
    }
    // jest-circus reads the mode after test_start (jest-circus/build/jestAdapterInit.js, _runTest).
    if (event.name === 'test_start' && this.failed) event.test.mode = 'skip';
  }
}

module.exports = BailEnvironment;
