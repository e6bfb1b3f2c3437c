import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaultEngineOptions } from '../sim/engine/engine';
import { fleetCapacity, type Scenario } from './des/run';
import { parseResults, stringifyResults, type BenchResults } from './goals';
import { goalListSection } from './goal-list';
import { mergeReadme, mergeResults, runLine, type PartRun } from './merge';
import type { BenchContext, BenchPart } from './parts/context';
import { e2ePart } from './parts/e2e';
import { e2eLongPart } from './parts/e2e-long';
import { exitsPart } from './parts/exits';
import { loadtimePart } from './parts/loadtime';
import { nodesPart } from './parts/nodes';
import { overheadPart } from './parts/overhead';
import { qualityPart } from './parts/quality';
import { sloPart } from './parts/slo';
import { sweepPart } from './parts/sweep';
import { classesPart } from './parts/classes';
import { tokensPart } from './parts/tokens';
import { prefillPart } from './parts/prefill';
import { prefetchPart } from './parts/prefetch';
import { unloadPart } from './parts/unload';
import { variantsPart } from './parts/variants';
import { BENCH_PAGE, withBenchSections } from './readme';
import { loadWorkload } from './workloads';

const HELP = `Usage: npm run bench [-- options]

  --full             the full run (whole trace, finer sweep, more requests per point, more
                     iterations); default: quick (about 45 min on 2 cores)
  --trace FILE       workload CSV in the Azure LLM trace format, used as the conversation workload
                     (default ../shared/data/azure-llm-inference-2023/conversation.csv, else synthetic)
  --workload NAME    conversation (the trace), bursty (prefill-heavy bursts), long (long-context
                     chat) or shared-prefix (system prompts, multi-turn) for every part but slo
                     (default conversation)
  --workloads LIST   the workloads of the slo and prefetch parts (default conversation,bursty,long;
                     prefetch: bursty,conversation,long)
  --only PARTS       comma list of overhead, quality, slo, nodes, sweep, loadtime, unload, variants,
                     e2e, e2e-long, tokens, classes, prefill, prefetch (default all), or exits (1,000,000 refused requests: heap per exit;
                     only when named)
  --seeds LIST       comma list (default 1,2,3)
  --alphas LIST      Zipf exponents for the variants part (0 = uniform; default quick 1,0.8, full 0.8,1,1.2,0)
  --adapters N       adapters (default 200)      --alpha A     Zipf exponent (default 1.0)
  --replicas N       replicas (default 8)        --slots N     adapter slots per replica (default 8)
  --load-ms MS       adapter load time (default: the load model, local NVMe, ~100 ms at rank 16)
  --load X           fleet load for the main table (default 0.7)
  --requests N       requests from the workload (default quick 3000, full all)
  --class-loads L    classes: comma list of fleet loads (default 0.3,0.5,0.7,0.9,1.2)
  --class-load-ms L  classes: comma list of adapter load times (default 100,300,1000)
  --batch-share X    classes: share of the requests drawn batch (default 0.3)
  --variants N       the slo part: only the first N lora-router variants (default all; 1: the default)
  --time-scale X     e2e-long: modelled time runs X times faster than the wall clock (default 1)
  --out DIR          results directory (default bench/results; only then are the figures of
                     docs/benchmarks.md regenerated). The parts run are merged into the
                     results.json and README.md already there: the other parts' stay, each part
                     naming the run it came from
  --merge FILE       with --only: take the named parts (overhead, slo, classes) from FILE, another
                     run's results.json, instead of running them, and merge them in`;

/** The parts in the order they run and appear in bench/results/README.md. */
const PARTS: BenchPart[] = [
  overheadPart,
  exitsPart,
  qualityPart,
  sloPart,
  nodesPart,
  sweepPart,
  loadtimePart,
  unloadPart,
  variantsPart,
  e2ePart,
  e2eLongPart,
  tokensPart,
  classesPart,
  prefillPart,
  prefetchPart,
];

async function main(): Promise<void> {
  const { values: v } = parseArgs({
    options: {
      full: { type: 'boolean' },
      trace: { type: 'string' },
      workload: { type: 'string' },
      workloads: { type: 'string' },
      only: { type: 'string' },
      seeds: { type: 'string' },
      alphas: { type: 'string' },
      adapters: { type: 'string' },
      alpha: { type: 'string' },
      replicas: { type: 'string' },
      slots: { type: 'string' },
      'load-ms': { type: 'string' },
      load: { type: 'string' },
      requests: { type: 'string' },
      variants: { type: 'string' },
      'time-scale': { type: 'string' },
      'class-loads': { type: 'string' },
      'class-load-ms': { type: 'string' },
      'batch-share': { type: 'string' },
      out: { type: 'string' },
      merge: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) return void console.log(HELP);
  if (v.merge !== undefined && v.only === undefined)
    throw new Error('--merge needs --only: the parts to take');
  const full = v.full === true;
  // Every part but `exits` (a million refused requests) unless named.
  const parts = new Set(v.only?.split(',') ?? PARTS.filter((p) => p !== exitsPart).map((p) => p.name));
  const seeds = (v.seeds ?? '1,2,3').split(',').map(Number);
  const root = join(__dirname, '..', '..');
  const out = v.out ?? join(root, 'bench', 'results');
  mkdirSync(out, { recursive: true });
  const log = (s: string) => console.log(s);
  const started = Date.now();

  const nRequests = v.requests ? Number(v.requests) : full ? Infinity : 3000;
  const named = (name: string) => loadWorkload(name, root, v.trace, nRequests);
  const { arrivals: workload, note: workloadNote } = named(v.workload ?? 'conversation');
  if (workloadNote.startsWith('synthetic')) log(`note: ${workloadNote}`);
  const scenario: Scenario = {
    replicas: Number(v.replicas ?? 8),
    slots: Number(v.slots ?? 8),
    loadMs: v['load-ms'] === undefined ? undefined : Number(v['load-ms']),
    adapters: Number(v.adapters ?? 200),
    alpha: Number(v.alpha ?? 1.0),
    seed: 1,
    engine: {},
  };
  const mainLoad = Number(v.load ?? 0.7);
  const capacity = fleetCapacity(scenario, workload, defaultEngineOptions);
  const md: string[] = [];
  const json: BenchResults = {
    date: new Date().toISOString(),
    commit: gitCommit(root),
    cores: cpus().length,
    node: process.version,
    full,
    scenario,
    mainLoad,
    workload: workloadNote,
    capacity,
  };
  const head = [
    `# Benchmark results`,
    '',
    `\`npm run bench${full ? ' -- --full' : ''}\` on ${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores, Node ${process.version}. Every ratio below compares figures measured in the same run; a part measured by a run of its own names it at its end.`,
    '',
  ].join('\n');

  const c: BenchContext = {
    full,
    seeds,
    scenario,
    mainLoad,
    capacity,
    workload,
    workloadNote,
    named,
    root,
    log,
    out,
    v,
    json,
    md,
  };
  // Each part's section and run, merged into what the results directory holds (bench/merge.ts).
  const sections = new Map<string, string[]>();
  const from = v.merge === undefined ? undefined : parseResults(readFileSync(v.merge, 'utf8'));
  json.runs = {};
  for (const part of PARTS) {
    if (!parts.has(part.name)) continue;
    const at = md.length;
    const t0 = Date.now();
    let run: PartRun;
    if (from) run = takePart(part, from, c);
    else {
      await part.run(c);
      run = {
        command: `npm run bench -- ${process.argv.slice(2).join(' ')}`.trim(),
        ...(json.commit ? { commit: json.commit.sha, dirty: json.commit.dirty } : {}),
        date: new Date(t0).toISOString(),
        seeds,
        seconds: (Date.now() - t0) / 1000,
        node: process.version,
      };
    }
    json.runs[part.name] = run;
    sections.set(part.name, md.slice(at));
  }
  const whole = v.only === undefined;
  const resultsFile = join(out, 'results.json');
  const readmeFile = join(out, 'README.md');
  const read = (f: string) => (existsSync(f) ? readFileSync(f, 'utf8') : undefined);
  const old = read(resultsFile);
  const merged = mergeResults(old === undefined ? undefined : parseResults(old), json, whole);
  writeFileSync(resultsFile, stringifyResults(merged) + '\n');
  // A section that renders from results alone is rendered from the merged ones (the slo part's
  // reads the overhead part's, perhaps of another run).
  for (const [name, lines] of sections) {
    const m = PARTS.find((p) => p.name === name)!.fromResults;
    sections.set(name, [...(m ? m.section(merged) : lines), '', runLine(name, merged.runs![name])]);
  }
  writeFileSync(
    readmeFile,
    mergeReadme(read(readmeFile), {
      head,
      keepHead: !whole,
      goals: goalListSection(merged),
      sections,
      order: PARTS.map((p) => p.name),
    }),
  );
  log(`\nwrote ${readmeFile} (${((Date.now() - started) / 1000).toFixed(0)} s)`);
  if (v.out === undefined) {
    // The benchmark page's figures come from these results only (test/core/readme.test.ts checks).
    const page = join(root, BENCH_PAGE);
    writeFileSync(page, withBenchSections(readFileSync(page, 'utf8'), merged));
    execFileSync(process.execPath, [require.resolve('prettier/bin/prettier.cjs'), '--write', page]);
    log(`regenerated the figures of ${page}`);
  }
}

/**
 * A part taken from another run's results (`--merge`): its results and files; its run, as
 * recorded there or as that file's header names it.
 */
function takePart(part: BenchPart, from: BenchResults, c: BenchContext): PartRun {
  const m = part.fromResults;
  const data = m && (from[m.key] as { points?: { seed: number }[] } | undefined);
  if (!data)
    throw new Error(
      `--merge: ${m ? `the file has no ${part.name} results` : `${part.name} renders only as it runs`}`,
    );
  Object.assign(c.json, { [m.key]: data });
  for (const f of m.files?.(c.json) ?? []) writeFileSync(join(c.out, f.file), f.text);
  return (
    from.runs?.[part.name] ?? {
      command: `npm run bench${from.full ? ' -- --full' : ''}`,
      ...(from.commit ? { commit: from.commit.sha, dirty: from.commit.dirty } : {}),
      date: from.date,
      seeds: [...new Set((data.points ?? []).map((p) => p.seed))],
      seconds: NaN,
      ...(from.node ? { node: from.node } : {}),
    }
  );
}

/** The commit measured, and whether tracked files differed from it (undefined outside git). */
function gitCommit(root: string): BenchResults['commit'] {
  try {
    const git = (...args: string[]) => execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim();
    return {
      sha: git('rev-parse', 'HEAD'),
      dirty: git('status', '--porcelain', '--untracked-files=no') !== '',
    };
  } catch {
    return undefined;
  }
}

main().catch((err: Error) => {
  console.error(`bench: ${err.stack ?? err.message}`);
  process.exit(1);
});
