/**
 * A schedule's outcome is its seed's alone: a worker runs thousands of schedules in one process
 * (dst/cli.ts), reusing what is immutable, so nothing a schedule leaves behind (the process-wide
 * lease map, parsed configurations, patched prototypes) may change the next. Seed S run by a
 * fresh process equals seed S run after the seeds before it in another, as a worker runs them
 * (the compiled dist/, which `npm test` builds first).
 */
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';

const RUN = path.join(__dirname, '../../dist/dst/run.js');

/** Runs `seeds` in order in one new Node process; the outcome of the last. */
function lastOf(seeds: number[]): unknown {
  const script = `
    const { runSeed } = require(${JSON.stringify(RUN)});
    (async () => {
      let r;
      for (const s of ${JSON.stringify(seeds)}) r = await runSeed(s);
      const { steps, simMs, digest, violation, faults } = r;
      process.stdout.write(JSON.stringify({ steps, simMs, digest, violation, faults }));
    })();`;
  return JSON.parse(execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 60_000 }));
}

describe('deterministic simulation: no state leaks from one schedule into the next', () => {
  it('seed 29 alone equals itself after the four seeds before it', () => {
    const alone = lastOf([29]) as { steps: number };
    expect(lastOf([25, 26, 27, 28, 29])).toEqual(alone);
    expect(alone.steps).toBeGreaterThanOrEqual(100);
  }, 120_000);
});
