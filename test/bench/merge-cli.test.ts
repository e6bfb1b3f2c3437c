/**
 * `npm run bench -- --only PARTS --out DIR` into a directory that already holds results: the run's
 * parts are merged in, the others stay (bench/merge.ts). Before, a partial run overwrote the whole
 * results.json, so the request path measured on a quiet machine could not be added to the SLO
 * sweep's results. Runs the built CLI (npm test builds first) on tiny runs of two parts.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseResults } from '../../bench/goals';

const run = promisify(execFile);
const CLI = join(__dirname, '..', '..', 'dist', 'bench', 'cli.js');

describe('npm run bench --only into a results directory (bench/cli.ts)', () => {
  let out: string;
  beforeEach(() => (out = mkdtempSync(join(tmpdir(), 'klr-bench-'))));
  afterEach(() => rmSync(out, { recursive: true, force: true }));

  const bench = (...args: string[]) =>
    run(process.execPath, [CLI, ...args, '--seeds', '1', '--workloads', 'bursty', '--out', out], {
      timeout: 170_000,
    });

  it("merges a part run alone into the results there: the other parts' results and sections stay", async () => {
    await bench('--only', 'classes', '--requests', '20', '--class-loads', '0.3', '--class-load-ms', '100');
    await bench('--only', 'slo', '--requests', '20', '--variants', '1');
    const r = parseResults(readFileSync(join(out, 'results.json'), 'utf8'));
    expect(Object.keys(r)).toEqual(expect.arrayContaining(['classes', 'slo']));
    const readme = readFileSync(join(out, 'README.md'), 'utf8');
    expect(readme).toContain('## SLO classes: interactive and batch on one fleet');
    expect(readme).toContain('## Routing under bursts: SLO attainment');
    // Each part names the run it came from.
    expect(r.runs?.classes?.command).toMatch(/--only classes/);
    expect(r.runs?.slo?.command).toMatch(/--only slo/);
    expect(readme).toMatch(/_Part `classes`: measured by `npm run bench -- --only classes/);
  }, 180_000);
});
