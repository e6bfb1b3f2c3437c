#!/usr/bin/env node
// `npm test`'s jest run, after the build. With no arguments: two jest processes side by side, each
// one suite at a time (jest.config.js).
// - `waiting`: the suites that mostly wait on the wall clock (lease ages, poll intervals, Redis
//   timeouts), listed in jest.config.js WAITING; together under half a core.
// - `busy`: every other suite, with the CPU it had when it ran alone, less that.
// The busy lane's output streams; the waiting lane's is printed when both have ended (a file
// meanwhile, named at the start). Either failing fails the run. With arguments
// (`npm test -- test/core/x.test.ts`): one jest run over every suite, as `npx jest`.
'use strict';
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const jest = require.resolve('jest/bin/jest');

/** Runs jest in lane `lane` (undefined: every suite) with `stdio`; resolves to its exit code. */
function jestIn(lane, args, stdio) {
  const env = { ...process.env };
  if (lane) env.JEST_LANE = lane;
  else delete env.JEST_LANE;
  const child = spawn(process.execPath, [jest, ...args], { stdio, env });
  const code = new Promise((resolve) => {
    child.on('error', (err) => {
      console.error(`jest (${lane ?? 'all'}) did not start: ${err.message}`);
      resolve(1);
    });
    child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0)));
  });
  return { child, code };
}

async function lanes() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'jest-waiting-'));
  const file = path.join(dir, 'output.txt');
  const out = fs.openSync(file, 'w');
  console.log(`== jest in two lanes: the waiting suites' output goes to ${file} until the end`);
  const waiting = jestIn('waiting', [], ['ignore', out, out]);
  const busy = jestIn('busy', [], 'inherit');
  // Ctrl-C or CI's kill: both lanes go down.
  for (const sig of ['SIGINT', 'SIGTERM'])
    process.on(sig, () => {
      waiting.child.kill(sig);
      busy.child.kill(sig);
    });
  const busyCode = await busy.code;
  const waitingCode = await waiting.code;
  fs.closeSync(out);
  console.log('\n== the waiting suites (jest.config.js WAITING), run beside the others');
  process.stdout.write(fs.readFileSync(file));
  fs.rmSync(dir, { recursive: true, force: true });
  const failed = [busyCode && 'the busy lane', waitingCode && 'the waiting lane'].filter(Boolean);
  if (failed.length > 0) console.error(`== failed: ${failed.join(' and ')}`);
  return busyCode || waitingCode;
}

const args = process.argv.slice(2);
(args.length > 0 ? jestIn(undefined, args, 'inherit').code : lanes()).then((code) => process.exit(code));
