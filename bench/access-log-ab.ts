import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { accessLogBed } from './access-log-bed';

/**
 * Before and after of lora-router's access + log in process (bench/access-log-bed.ts: 1 KB,
 * adapter resident, a PDK answering at once), two builds' beds in one process, their calls
 * interleaved (the order turned each pair), each after a sleep of `--gap` ms, as the plugin server
 * runs a request after epoll: cache-cold, the cost that counts there. CPU per call from
 * process.cpuUsage around the call alone. Prints both builds' mean and median, the ratio of the
 * means and the median of the pairs' differences; a build against itself shows the method's noise.
 *
 *   node dist/bench/access-log-ab.js --old DIST [--new DIST] [--pairs 4000] [--gap 1]
 */
type Bed = Awaited<ReturnType<typeof accessLogBed>>;

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    options: {
      old: { type: 'string' },
      new: { type: 'string' },
      pairs: { type: 'string' },
      gap: { type: 'string' },
    },
  });
  if (v.old === undefined) throw new Error('--old DIST is required');
  const pairs = Number(v.pairs ?? 4000);
  const gap = Number(v.gap ?? 1);
  const dists = [resolve(v.old), resolve(v.new ?? `${__dirname}/..`)];
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
    const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1]!;
    const [o, n] = us as [number[], number[]];
    console.log(
      `access + log in process, each after ${gap} ms, ${pairs} pairs: old mean ${mean(o).toFixed(1)} µs ` +
        `(median ${median(o)}), new mean ${mean(n).toFixed(1)} µs (median ${median(n)}); ` +
        `new/old ${(mean(n) / mean(o)).toFixed(3)}, median pair difference ${median(n.map((x, i) => x - o[i]!))} µs`,
    );
  } finally {
    for (const b of beds) b.stop();
  }
}

if (require.main === module)
  main().then(
    () => process.exit(0),
    (err: Error) => {
      console.error(err.stack ?? String(err));
      process.exit(1);
    },
  );
