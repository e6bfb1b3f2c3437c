/**
 * `npm run chaos -- --minutes N --seed S [--log-dir DIR] [--json]`: the randomized fault run
 * (chaos/run.ts). Prints the schedule and, per invariant, the checks made and the violations;
 * exits 1 on a violation. `--log-dir` keeps each node's whole log, resource samples and the
 * report as JSON in DIR.
 */
import { mkdirSync } from 'node:fs';
import { formatReport } from './report';
import { runChaos } from './run';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v <= 0) {
    console.error(`--${name} needs a positive number`);
    process.exit(2);
  }
  return v;
}

function textArg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return undefined;
  const v = process.argv[i + 1];
  if (!v || v.startsWith('--')) {
    console.error(`--${name} needs a value`);
    process.exit(2);
  }
  return v;
}

async function main(): Promise<void> {
  const minutes = arg('minutes', 1);
  const seed = Math.floor(arg('seed', 1));
  const logDir = textArg('log-dir');
  if (logDir) mkdirSync(logDir, { recursive: true });
  // Every wait in the run is bounded; this bounds the whole, should one of them not be.
  const watchdog = setTimeout(
    () => {
      console.error('the run did not finish within 5 minutes of its traffic: stopped');
      process.exit(2);
    },
    minutes * 60_000 + 300_000,
  );
  const report = await runChaos({
    seed,
    trafficMs: Math.round(minutes * 60_000),
    log: (l) => console.log(l),
    logDir,
  });
  clearTimeout(watchdog);
  console.log(formatReport(report));
  if (process.argv.includes('--json')) console.log(JSON.stringify(report));
  process.exit(report.ok ? 0 : 1);
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(2);
});
