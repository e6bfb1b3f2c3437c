import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { accessLogBed } from './access-log-bed';

/**
 * Before and after of lora-router's access + log in process (bench/access-log-bed.ts: 1 KB,
 * adapter resident, a PDK answering at once), two builds' beds in one process, their calls
 * interleaved (the order turned each pair), each after a sleep of `--gap` ms, as the plugin server
 * runs a request after epoll: cache-cold, the cost that counts there. CPU per call from
 * process.cpuUsage around the call alone.
 *
 * The bed made second runs faster here: main's build against a copy of itself gave new/old
 * 0.954 over 8000 pairs, as large as a small cut. So each order runs in a process of its own
 * (old's bed made first, then new's first) and the figure is the geometric mean of the two
 * ratios (new/old, and the inverse of the swapped run's), in which that bias cancels.
 *
 *   node dist/bench/access-log-ab.js --old DIST [--new DIST] [--pairs 6000] [--gap 1]
 */
type Bed = Awaited<ReturnType<typeof accessLogBed>>;

/** Mean CPU µs per call of the two builds, beds made in the order given. */
interface Run {
  us: [number, number];
  /** Median of the pairs' differences (second build's call less the first's). */
  medianDiff: number;
}

async function inner(dists: [string, string], pairs: number, gap: number): Promise<Run> {
  const beds: Bed[] = [];
  for (const d of dists)
    beds.push(
      await (require(`${d}/bench/access-log-bed.js`) as { accessLogBed: typeof accessLogBed }).accessLogBed(),
    );
  try {
    for (let i = 0; i < 3000; i++) for (const b of beds) await b.accessLog();
    const us: number[][] = [[], []];
    for (let i = 0; i < pairs; i++)
      for (let k = 0; k < 2; k++) {
        const j = (i + k) % 2;
        await new Promise((r) => setTimeout(r, gap));
        const t0 = process.cpuUsage();
        await beds[j]!.accessLog();
        const t = process.cpuUsage(t0);
        us[j]!.push(t.user + t.system);
      }
    const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
    const diffs = us[1]!.map((x, i) => x - us[0]![i]!).sort((x, y) => x - y);
    return { us: [mean(us[0]!), mean(us[1]!)], medianDiff: diffs[diffs.length >> 1]! };
  } finally {
    for (const b of beds) b.stop();
  }
}

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    options: {
      old: { type: 'string' },
      new: { type: 'string' },
      pairs: { type: 'string' },
      gap: { type: 'string' },
      inner: { type: 'boolean' },
    },
  });
  if (v.old === undefined) throw new Error('--old DIST is required');
  const pairs = Number(v.pairs ?? 6000);
  const gap = Number(v.gap ?? 1);
  const [oldDist, newDist] = [resolve(v.old), resolve(v.new ?? `${__dirname}/..`)];
  if (v.inner) return console.log(JSON.stringify(await inner([oldDist, newDist], pairs, gap)));
  const run = (first: string, second: string): Run => {
    const args = [
      __filename,
      '--inner',
      '--old',
      first,
      '--new',
      second,
      '--pairs',
      `${pairs}`,
      '--gap',
      `${gap}`,
    ];
    const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
    const line = r.stdout.split('\n').find((l) => l.startsWith('{'));
    if (r.status !== 0 || line === undefined)
      throw new Error(`inner run failed (${r.status}): ${r.stderr.slice(-2000)}`);
    return JSON.parse(line) as Run;
  };
  const a = run(oldDist, newDist);
  const b = run(newDist, oldDist);
  const ratio = (x: number, y: number) => (x / y).toFixed(3);
  console.log(
    `access + log in process, each after ${gap} ms, ${pairs} pairs per order:\n` +
      `  old's bed first: old ${a.us[0].toFixed(1)} µs, new ${a.us[1].toFixed(1)} µs, new/old ${ratio(a.us[1], a.us[0])}, median pair difference ${a.medianDiff} µs\n` +
      `  new's bed first: new ${b.us[0].toFixed(1)} µs, old ${b.us[1].toFixed(1)} µs, new/old ${ratio(b.us[0], b.us[1])}, median pair difference ${-b.medianDiff} µs\n` +
      `  new/old, the order's bias cancelled (geometric mean): ${Math.sqrt((a.us[1] / a.us[0]) * (b.us[0] / b.us[1])).toFixed(3)}`,
  );
}

if (require.main === module)
  main().then(
    () => process.exit(0),
    (err: Error) => {
      console.error(err.stack ?? String(err));
      process.exit(1);
    },
  );
