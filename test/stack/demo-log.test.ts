/**
 * `npm run demo` into a log (its output not a terminal): a progress line every few seconds, no
 * carriage returns, and the summary at the end.
 */
import { startCli } from './cli-process';

it('prints progress at most once per 5 s of its run when its output is not a terminal', async () => {
  // 24 arrivals at 4 a second: the run lasts at least 6 s of wall time, one progress line's 5 s and
  // more (a line a second would print six).
  const cli = startCli([
    ...['--port', '0', '--fleet-port', '0', '--time-scale', '4'],
    ...['--traffic', '--requests', '24', '--rate', '4', '--exit'],
  ]);
  try {
    expect(await cli.exited(60_000)).toBe(0);
    const out = cli.out();
    const elapsedS = Number(out.match(/req\/s over ([\d.]+) s/)![1]);
    const progress = out.split('\n').filter((l) => /^answered \d+ of \d+ sent/.test(l));
    expect(out).not.toContain('\r');
    expect(elapsedS).toBeGreaterThanOrEqual(6);
    expect(progress.length).toBeGreaterThanOrEqual(1);
    expect(progress.length).toBeLessThanOrEqual(Math.floor(elapsedS / 5) + 1);
  } finally {
    await cli.stop();
  }
}, 90_000);
