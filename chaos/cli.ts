/**
 * `npm run chaos -- --minutes N --seed S`: the randomized fault run (chaos/run.ts). Prints the
 * schedule and, per invariant, the checks made and the violations; exits 1 on a violation.
 */
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

async function main(): Promise<void> {
  const minutes = arg('minutes', 1);
  const seed = Math.floor(arg('seed', 1));
  const report = await runChaos({
    seed,
    trafficMs: Math.round(minutes * 60_000),
    log: (l) => console.log(l),
  });
  console.log(formatReport(report));
  if (process.argv.includes('--json')) console.log(JSON.stringify(report));
  process.exit(report.ok ? 0 : 1);
}

main().catch((err: Error) => {
  console.error(err.stack ?? err.message);
  process.exit(2);
});
