import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';

/**
 * Two builds of the routing core side by side on a shared machine whose load moves by more than
 * the difference between them: each round starts one process per build at the same moment, each
 * running bench/profile-decision.ts's inner measurement (its bed, `warm` calls, then `n` counted:
 * CPU µs per call), the order of the two swapped every round; the median per build and the
 * median of the rounds' new/old ratios. The same calls go to both, so their picks' digests must
 * match: a change meant to decide exactly as before shows here if it does not.
 *
 * Not in one process: two copies of the same build there, their batches alternating, gave a
 * ratio of 1.09 (count) and 1.28 (predicted) (load average 11), the build loaded second the slower.
 *
 *   node dist/bench/compare-builds.js --old /tmp/old/dist [--new DIST] [--rounds 9] [--case a,b]
 *
 * `--case route-release-cold` (not in the default set) runs each call after a 1 ms sleep: the
 * cache-cold request the plugin server runs after epoll; its builds must both have the case.
 *
 * `--old`: another build's dist/ (a copy of main's, with node_modules reachable from it); `--new`:
 * another in place of this one (a second copy of the old build: what the method's noise gives).
 */
const HELP =
  'Usage: node dist/bench/compare-builds.js --old DIST [--new DIST] [--rounds R] [--case a,b] [--warm W] [--n N]';

const CASES = ['decision-count', 'decision-predicted', 'route-release'];

interface Inner {
  cpuUs: number;
  digest: string;
}

function inner(dist: string, name: string, warm: number, n: number): Promise<Inner> {
  return new Promise((done, fail) => {
    const child = spawn(
      process.execPath,
      [
        resolve(dist, 'bench/profile-decision.js'),
        '--inner',
        '--case',
        name,
        '--warm',
        `${warm}`,
        '--n',
        `${n}`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.on('error', fail);
    child.on('close', (code) => {
      if (code !== 0) return fail(new Error(`${dist} ${name}: exit ${code}`));
      done(JSON.parse(out) as Inner);
    });
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    options: {
      old: { type: 'string' },
      new: { type: 'string' },
      rounds: { type: 'string' },
      warm: { type: 'string' },
      n: { type: 'string' },
      case: { type: 'string' },
      help: { type: 'boolean' },
    },
  });
  if (v.help || v.old === undefined) return console.log(HELP);
  const dists = [resolve(v.old), resolve(v.new ?? resolve(__dirname, '..'))];
  const rounds = Number(v.rounds ?? 9);
  const warm = Number(v.warm ?? 2000);
  const n = Number(v.n ?? 5000);
  for (const name of v.case?.split(',') ?? CASES) {
    const cpu: number[][] = [[], []];
    const digests = new Set<string>();
    for (let r = 0; r < rounds; r++) {
      const order = r % 2 === 0 ? [0, 1] : [1, 0];
      const got = await Promise.all(order.map((b) => inner(dists[b]!, name, warm, n)));
      order.forEach((b, k) => {
        cpu[b]!.push(got[k]!.cpuUs);
        digests.add(got[k]!.digest);
      });
    }
    const ratio = median(cpu[1]!.map((x, r) => x / cpu[0]![r]!));
    // Route + release runs on the real clock: its picks move with timing, from run to run of one build.
    const same =
      name === 'route-release' || name === 'route-release-cold'
        ? 'picks not compared (real clock)'
        : digests.size === 1
          ? `same picks (${[...digests][0]})`
          : `PICKS DIFFER: ${[...digests].join(' ')}`;
    console.log(
      `${name}: old ${median(cpu[0]!).toFixed(1)} µs CPU, new ${median(cpu[1]!).toFixed(1)} µs CPU; new/old ${ratio.toFixed(2)} (medians of ${rounds} rounds, ${n} calls after ${warm}); ${same}`,
    );
  }
}

main().catch((err: Error) => {
  console.error(err.stack ?? String(err));
  process.exit(1);
});
