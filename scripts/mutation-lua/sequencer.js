// Suites in the order LUA_MUTANT_SUITES names them (the runner puts the one that killed last first).
const Sequencer = require('@jest/test-sequencer').default;
const { relative } = require('node:path');

class GivenOrder extends Sequencer {
  sort(tests) {
    const order = (process.env.LUA_MUTANT_SUITES ?? '').split(',');
    const rank = (t) => order.indexOf(relative(t.context.config.rootDir, t.path));
    return [...tests].sort((a, b) => rank(a) - rank(b));
  }
}

module.exports = GivenOrder;
