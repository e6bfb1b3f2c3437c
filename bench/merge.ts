/**
 * A run of some parts (`--only`) merged into the results already in the results directory: each
 * part's results replace that part's only, and each part records the run it came from (command,
 * commit, date, seeds, duration), so a merged results.json and bench/results/README.md say which
 * run measured what. This lets the request path be measured on a quiet machine without running
 * the SLO sweep again, and the other way round.
 */
import type { BenchResults } from './goals';

/** The run one part's results came from. */
export interface PartRun {
  /** The command line, as `npm run bench -- ...`. */
  command: string;
  /** The commit measured (full or abbreviated), absent outside git. */
  commit?: string;
  /** Whether tracked files differed from that commit. */
  dirty?: boolean;
  /** When the run started (ISO 8601). */
  date: string;
  seeds: number[];
  /** How long the part took, in seconds (NaN when not recorded). */
  seconds: number;
  /** The Node version that ran it: timing parts differ by version (AsyncLocalStorage, docs/benchmarks.md). */
  node?: string;
}

/** results.json's keys that describe a run as a whole; every other key is one part's results. */
const HEADER = new Set([
  'date',
  'commit',
  'cores',
  'node',
  'full',
  'scenario',
  'mainLoad',
  'workload',
  'capacity',
  'runs',
]);

const pick = (r: BenchResults, header: boolean) =>
  Object.fromEntries(Object.entries(r).filter(([k]) => HEADER.has(k) === header && k !== 'runs'));

/**
 * `fresh` (the parts a run measured) merged into `old` (results.json before it): the parts of
 * `fresh` replace those of `old`, the others stay; the run record of each part is the newer one.
 * The run's header (date, commit, scenario, ...) is `fresh`'s after a whole run, else `old`'s:
 * the parts without a record of their own were measured by that run.
 */
export function mergeResults(
  old: BenchResults | undefined,
  fresh: BenchResults,
  whole: boolean,
): BenchResults {
  if (!old) return fresh;
  return {
    ...pick(whole ? fresh : old, true),
    ...pick(old, false),
    ...pick(fresh, false),
    runs: { ...old.runs, ...fresh.runs },
  } as BenchResults;
}

/** The markers of a part's section in bench/results/README.md (and of the goal list). */
export const regionBegin = (name: string) => `<!-- bench-part:${name}:begin -->`;
export const regionEnd = (name: string) => `<!-- bench-part:${name}:end -->`;
/** The goal list's region, regenerated from the merged results after every run. */
export const GOALS_REGION = 'goals';

/** The marked regions of a README, by name, and the text before the first. */
export function regions(md: string): { head: string; byName: Map<string, string> } {
  const byName = new Map<string, string>();
  const re = /<!-- bench-part:([\w-]+):begin -->\n([\s\S]*?)\n<!-- bench-part:\1:end -->/g;
  for (const m of md.matchAll(re)) byName.set(m[1]!, m[2]!);
  const first = md.indexOf('<!-- bench-part:');
  return { head: first < 0 ? md : md.slice(0, first), byName };
}

/**
 * bench/results/README.md after a run: `head` (the old file's when `keepHead` and there is one),
 * the goal list, then each part's section in `order`: this run's where it ran, else the old file's.
 */
export function mergeReadme(
  old: string | undefined,
  o: { head: string; keepHead: boolean; goals: string[]; sections: Map<string, string[]>; order: string[] },
): string {
  const before = old === undefined ? undefined : regions(old);
  const head = o.keepHead && before ? before.head : o.head;
  const body = (name: string) =>
    o.sections.has(name) ? o.sections.get(name)!.join('\n').trim() : before?.byName.get(name);
  const region = (name: string, text: string | undefined) =>
    text === undefined ? [] : [regionBegin(name), text, regionEnd(name), ''];
  return [
    head.trimEnd(),
    '',
    ...region(GOALS_REGION, o.goals.join('\n').trim()),
    ...o.order.flatMap((name) => region(name, body(name))),
  ].join('\n');
}

/** One line naming the run a part came from, closing its section. */
export function runLine(name: string, run: PartRun | undefined): string {
  if (!run) return `_Part \`${name}\`: measured by the run named at the top of this page._`;
  const commit = run.commit
    ? ` at commit \`${run.commit.slice(0, 12)}\`${run.dirty ? ' with uncommitted changes' : ''}`
    : '';
  const took = Number.isFinite(run.seconds) ? `, ${Math.round(run.seconds).toLocaleString('en-US')} s` : '';
  return `_Part \`${name}\`: measured by \`${run.command}\`${commit}, ${run.date.slice(0, 16).replace('T', ' ')} UTC${run.node ? `, Node ${run.node}` : ''}, seeds ${run.seeds.join(', ') || '?'}${took}._`;
}
