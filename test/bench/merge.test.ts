import { parseResults, stringifyResults, type BenchResults } from '../../bench/goals';
import {
  mergeReadme,
  mergeResults,
  regionBegin,
  regionEnd,
  regions,
  runLine,
  type PartRun,
} from '../../bench/merge';

const run = (command: string, commit: string): PartRun => ({
  command,
  commit,
  date: '2026-12-03T10:00:00.000Z',
  seeds: [1, 2, 3],
  seconds: 60,
});

/** A results.json with a header and the given parts (their contents only need to be told apart). */
const results = (commit: string, parts: Partial<BenchResults>): BenchResults => ({
  date: `2026-12-0${commit.length % 9}T00:00:00.000Z`,
  commit: { sha: commit, dirty: false },
  full: false,
  scenario: { replicas: 8, slots: 8, adapters: 200, alpha: 1, seed: 1, engine: {} },
  workload: 'trace',
  capacity: 10,
  ...parts,
});

const overhead = { rows: [], memory: { mb: 1, perEntryBytes: 1, usPerDecision: 40 }, heap: [] };
const slo = (requests: number) => ({ requests, variants: ['lora-router'], points: [] });

describe('merging a run of some parts into results.json (bench/merge.ts)', () => {
  const old = results('a'.repeat(40), {
    overhead,
    slo: slo(1000),
    runs: { slo: run('npm run bench -- --only slo --seeds 1', 'c4dc2f1d') },
  });

  it("replaces the parts the run measured, keeps the others and the old header, and records each part's run", () => {
    const fresh = results('b'.repeat(40), { slo: slo(3000), runs: { slo: run('--only slo,classes', 'b') } });
    const m = mergeResults(old, fresh, false);
    expect(m.slo!.requests).toBe(3000);
    expect(m.overhead).toEqual(overhead);
    // The header still names the run that measured the parts without a record of their own.
    expect(m.commit!.sha).toBe('a'.repeat(40));
    expect(m.runs).toEqual({ slo: run('--only slo,classes', 'b') });
    // It survives results.json's text form (Infinity as a string).
    expect(parseResults(stringifyResults(m))).toEqual(m);
  });

  it("after a whole run takes the new header, keeps a part it did not run (exits) and that part's run", () => {
    const withExits = { ...old, exits: { refused: 1 } as unknown as BenchResults['exits'] };
    const oldRuns = { ...old.runs, exits: run('--only exits', 'e') };
    const fresh = results('b'.repeat(40), { overhead: { ...overhead, rows: [] }, slo: slo(1000) });
    const m = mergeResults({ ...withExits, runs: oldRuns }, { ...fresh, runs: {} }, true);
    expect(m.commit!.sha).toBe('b'.repeat(40));
    expect(m.date).toBe(fresh.date);
    expect(m.exits).toEqual(withExits.exits);
    expect(m.runs!.exits).toEqual(oldRuns.exits);
  });

  it('with nothing there, is the run itself', () => {
    const fresh = results('b'.repeat(40), { slo: slo(1) });
    expect(mergeResults(undefined, fresh, false)).toBe(fresh);
  });
});

describe("merging a run's sections into bench/results/README.md", () => {
  const region = (name: string, text: string) => [regionBegin(name), text, regionEnd(name)].join('\n');
  const old = [
    '# Benchmark results\n\nThe old run.\n',
    region('goals', 'old goals'),
    region('overhead', '## Request-path overhead\n\nold overhead'),
    region('slo', '## SLO\n\nold slo'),
    '',
  ].join('\n');

  it("replaces the parts run and the goal list, keeps the other parts' sections and the head, in the parts' order", () => {
    const md = mergeReadme(old, {
      head: '# Benchmark results\n\nThe new run.',
      keepHead: true,
      goals: ['new goals'],
      sections: new Map([
        ['slo', ['## SLO', '', 'new slo']],
        ['classes', ['## Classes', '', 'new classes']],
      ]),
      order: ['overhead', 'slo', 'classes', 'prefill'],
    });
    const r = regions(md);
    expect(r.head).toContain('The old run.');
    expect([...r.byName.keys()]).toEqual(['goals', 'overhead', 'slo', 'classes']);
    expect(r.byName.get('goals')).toBe('new goals');
    expect(r.byName.get('overhead')).toBe('## Request-path overhead\n\nold overhead');
    expect(r.byName.get('slo')).toBe('## SLO\n\nnew slo');
    expect(r.byName.get('classes')).toBe('## Classes\n\nnew classes');
  });

  it('takes the new head after a whole run, or when there was no README', () => {
    const o = { head: '# Benchmark results\n\nThe new run.', goals: [], sections: new Map(), order: [] };
    expect(regions(mergeReadme(old, { ...o, keepHead: false })).head).toContain('The new run.');
    expect(regions(mergeReadme(undefined, { ...o, keepHead: true })).head).toContain('The new run.');
  });
});

describe("a part's run line (bench/merge.ts runLine)", () => {
  it('names the Node version that ran the part, since timing parts differ by version', () => {
    const line = runLine('overhead', {
      ...run('npm run bench -- --only overhead', '50ba781551c2'),
      node: 'v24.22.3',
    });
    expect(line).toBe(
      '_Part `overhead`: measured by `npm run bench -- --only overhead` at commit `50ba781551c2`, 2026-12-03 10:00 UTC, Node v24.22.3, seeds 1, 2, 3, 60 s._',
    );
    expect(runLine('slo', run('npm run bench -- --only slo', 'c4dc2f1d'))).not.toContain('Node');
  });
});
