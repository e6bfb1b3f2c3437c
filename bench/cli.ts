import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaultEngineOptions } from '../sim/engine/engine';
import { atRate } from '../sim/workload/workload';
import { beladyMisses, pinnedBeladyMisses, setServedBounds } from './des/belady';
import * as P from './des/policies';
import {
  loadSweep,
  loadSweepSection,
  SWEEP_LOAD_MS,
  unloadComparison,
  unloadSection,
} from './des/load-sweep';
import { ROUTING_VARIANTS, SLO_LOADS, sloSection, sloSweep } from './des/slo-sweep';
import { loadWorkload } from './workloads';
import { adapterSequence, fleetCapacity, runPolicy, type PolicyResult, type Scenario } from './des/run';
import { runE2e, type E2eResult } from './e2e';
import {
  byName,
  e2eGoal,
  mean,
  nodesGoal,
  overheadGoal,
  qualityGoals,
  scenarioLoadMs,
  stringifyResults,
  type BenchResults,
  type NodesRun,
  type QualitySeed,
  type SweepPoint,
  type VariantRow,
} from './goals';
import {
  decisionHeap,
  fleetAtScale,
  measureOverhead,
  measureRedisCost,
  prefixScorerCost,
  type OverheadRow,
  type RedisCost,
} from './overhead';
import { withBenchSections } from './readme';
import { cells, fmtNum, fmtRatio, lineChart, METRICS, ms, spread, table } from './report';
import { refuseMany } from '../test/kong/exits';

const HELP = `Usage: npm run bench [-- options]

  --full             the full run (whole trace, finer sweep, every seed and load time, more
                     iterations); default: quick (about 10 min on 2 cores)
  --trace FILE       workload CSV in the Azure LLM trace format, used as the conversation workload
                     (default ../shared/data/azure-llm-inference-2023/conversation.csv, else synthetic)
  --workload NAME    conversation (the trace) or bursty (prefill-heavy bursts) for every part
                     but slo (default conversation)
  --workloads LIST   the workloads of the slo part (default conversation,bursty)
  --only PARTS       comma list of overhead, quality, slo, nodes, sweep, loadtime, unload, variants,
                     e2e (default all), or exits (1,000,000 refused requests: heap per exit;
                     only when named)
  --seeds LIST       comma list (default 1,2,3)
  --alphas LIST      Zipf exponents for the variants part (0 = uniform; default quick 1,0.8, full 0.8,1,1.2,0)
  --adapters N       adapters (default 200)      --alpha A     Zipf exponent (default 1.0)
  --replicas N       replicas (default 8)        --slots N     adapter slots per replica (default 8)
  --load-ms MS       adapter load time (default: the load model, local NVMe, ~100 ms at rank 16)
  --load X           fleet load for the main table (default 0.7)
  --requests N       requests from the workload (default quick 3000, full all)
  --out DIR          results directory (default bench/results; only then is README.md's
                     benchmark section regenerated)`;

const POLICIES = [
  P.loraRouter(),
  P.roundRobin,
  P.leastRequest,
  P.consistentHash,
  P.llmdSoftAffinity,
  P.oracle,
];

/** lora-router configurations A/B'd against each other (issue 9): eviction and placement units. */
const VARIANTS: { name: string; config: Record<string, unknown>; quick: boolean }[] = [
  { name: 'lru, escalate (default)', config: {}, quick: true },
  {
    name: 'lru, wait on the chosen replica',
    config: { room_wait: 'replica', queue_timeout_ms: 10000 },
    quick: true,
  },
  {
    name: 'lru, wait for room anywhere',
    config: { room_wait: 'anywhere', queue_timeout_ms: 10000 },
    quick: true,
  },
  {
    name: 'lru + victim placement',
    config: { eviction: 'lru', scorer_weights: { victim: 3 } },
    quick: false,
  },
  { name: 'value', config: { eviction: 'value' }, quick: true },
  {
    name: 'value + victim placement',
    config: { eviction: 'value', scorer_weights: { victim: 3 } },
    quick: true,
  },
  {
    name: 'value + victim + consolidate',
    config: { eviction: 'value', scorer_weights: { victim: 3, consolidate: 2 } },
    quick: false,
  },
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
      out: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (v.help) return void console.log(HELP);
  const full = v.full === true;
  const parts = new Set(
    (v.only ?? 'overhead,quality,slo,nodes,sweep,loadtime,unload,variants,e2e').split(','),
  );
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
  md.push(
    `# Benchmark results`,
    '',
    `\`npm run bench${full ? ' -- --full' : ''}\` on ${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores, Node ${process.version}. Every ratio below compares figures measured in the same run.`,
    '',
  );

  // ---- request-path overhead -----------------------------------------------------------
  if (parts.has('overhead')) {
    log('request-path overhead (real kong-js-pluginserver, access + log):');
    const iterations = full
      ? { '1 KB': 5000, '100 KB': 1000, '1 MB': 150 }
      : { '1 KB': 1500, '100 KB': 400, '1 MB': 50 };
    const rows = await measureOverhead(iterations, log);
    const mem = await fleetAtScale(64, 10_000);
    log(
      `  fleet state, 64 replicas x 10k adapters: ${mem.mb.toFixed(1)} MB, ${mem.usPerDecision.toFixed(0)} µs per decision`,
    );
    const prefix = prefixScorerCost();
    log(`  prefix scorer (index full, 8 candidates): ${prefix.usPerDecision.toFixed(2)} µs per decision`);
    const heap = await decisionHeap([10_000, 1_000_000], log);
    json.overhead = { rows, memory: mem, heap, prefixScorer: prefix };
    md.push(...overheadSection(rows, mem, heap));
  }

  // ---- memory per exit (opt-in: about 5 minutes) ---------------------------------------------
  if (parts.has('exits')) {
    const requests = v.requests ? Number(v.requests) : 1_000_000;
    log(
      `memory per exit: ${requests.toLocaleString('en-US')} refused requests through the real plugin server:`,
    );
    const pluginsDir = join(root, 'dist', 'plugins');
    const r = await refuseMany(pluginsDir, { requests });
    const growth = r.heapAfter / r.heapBefore - 1;
    log(
      `  heap after GC ${(r.heapBefore / 1e6).toFixed(1)} MB -> ${(r.heapAfter / 1e6).toFixed(1)} MB (${(growth * 100).toFixed(1)}%), statuses ${JSON.stringify(r.statuses)}`,
    );
    json.exits = r;
    md.push(
      '## Memory per exit',
      '',
      `${requests.toLocaleString('en-US')} requests refused by lora-router (404, one \`kong.response.exit\` each) through the project's plugin server, driven as Kong drives it: heap after a full GC ${(r.heapBefore / 1e6).toFixed(1)} MB after the warm-up, ${(r.heapAfter / 1e6).toFixed(1)} MB after (${(growth * 100).toFixed(1)}%).`,
      '',
    );
  }

  // ---- routing quality -----------------------------------------------------------------
  if (parts.has('quality')) {
    log(
      `routing quality at ${mainLoad * 100}% load (${seeds.length} seeds, ${workload.length} requests, capacity ${capacity.toFixed(1)} req/s):`,
    );
    const perSeed: QualitySeed[] = [];
    for (const seed of seeds) {
      const s = { ...scenario, seed };
      const arrivals = atRate(workload, capacity * mainLoad);
      const adapters = adapterSequence(arrivals.length, s);
      const slots = s.replicas * s.slots;
      const belady = beladyMisses(adapters, slots);
      const results: PolicyResult[] = [];
      for (const p of POLICIES) {
        const r = await runPolicy(p, s, arrivals, adapters);
        results.push(r);
        log(
          `  seed ${seed} ${p.name.padEnd(26)} loads ${String(r.loads).padStart(6)}  TTFT p50 ${ms(r.ttftP50).padStart(8)} p99 ${ms(r.ttftP99).padStart(8)}  refused ${r.errors}  (${r.wallS.toFixed(1)} s)`,
        );
      }
      const oracle = results.find((r) => r.policy === P.oracle.name)!;
      const pinned = pinnedBeladyMisses(adapters, oracle.intervals!.start, oracle.intervals!.end, slots);
      setServedBounds(results, oracle, adapters, slots);
      perSeed.push({ seed, belady, pinned, results });
    }
    json.quality = perSeed;
    md.push(...qualitySection(perSeed, scenario, mainLoad, capacity, workloadNote));
  }

  // ---- routing under bursts: SLO attainment on both workloads (issue 15) ----------------
  if (parts.has('slo')) {
    const n = full ? 3000 : 1000;
    const o = {
      workloads: (v.workloads ?? 'conversation,bursty').split(',').map((name) => ({
        name,
        arrivals: named(name).arrivals.slice(0, n),
      })),
      loadTimes: full ? SWEEP_LOAD_MS : [100, 1000],
      loads: SLO_LOADS,
      seeds: full ? seeds : [seeds[0]!],
      variants: ROUTING_VARIANTS,
    };
    log(
      `SLO attainment, ${o.workloads.map((w) => w.name).join(' and ')}, load times ${o.loadTimes.map(ms).join(', ')}, loads ${o.loads.map((l) => `${l * 100}%`).join(', ')}, seeds ${o.seeds.join(', ')}, ${n} requests${full ? '' : ' (quick run)'}:`,
    );
    const points = await sloSweep(scenario, o, log);
    json.slo = { requests: n, variants: o.variants.map((x) => x.name), points };
    md.push(...sloSection(points, json.slo.variants, n, full));
  }

  // ---- several Kong nodes sharing one store (issue 8) -----------------------------------
  if (parts.has('nodes')) {
    log(
      `three Kong nodes sharing one store vs one node, ${mainLoad * 100}% load (seeds ${seeds.join(', ')}):`,
    );
    const runs: NodesRun[] = [];
    for (const seed of seeds) {
      const s = { ...scenario, seed };
      const arrivals = atRate(workload, capacity * mainLoad);
      const adapters = adapterSequence(arrivals.length, s);
      const [one, three] = [
        await runPolicy(P.loraRouter(), s, arrivals, adapters),
        await runPolicy(P.loraRouterNodes(3), s, arrivals, adapters),
      ];
      delete one.intervals;
      delete three.intervals;
      runs.push({ seed, one, three });
      log(
        `  seed ${seed}: loads ${one.loads} (1 node) vs ${three.loads} (3 nodes); refused ${one.errors} vs ${three.errors}`,
      );
    }
    log('per-request cost of Redis (real kong-js-pluginserver and redis-server, access + log):');
    const cost = await measureRedisCost(full ? 5000 : 1500, log);
    json.nodes = { runs, redisCost: cost };
    md.push(...nodesSection(runs, cost, mainLoad));
  }

  // ---- load sweep ----------------------------------------------------------------------
  if (parts.has('sweep')) {
    const loads = full ? [0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9] : [0.3, 0.5, 0.7, 0.9];
    const sweepSeeds = full ? seeds : [seeds[0]!];
    log(`load sweep ${loads.map((l) => `${l * 100}%`).join(', ')} (seed ${sweepSeeds.join(', ')}):`);
    const sweep: SweepPoint[] = [];
    const sweepWorkload = full ? workload : workload.slice(0, 2000);
    for (const load of loads) {
      for (const seed of sweepSeeds) {
        const s = { ...scenario, seed };
        const arrivals = atRate(sweepWorkload, capacity * load);
        const adapters = adapterSequence(arrivals.length, s);
        const results: PolicyResult[] = [];
        for (const p of POLICIES) results.push(await runPolicy(p, s, arrivals, adapters));
        const slots = s.replicas * s.slots;
        setServedBounds(results, results.find((r) => r.policy === P.oracle.name)!, adapters, slots);
        sweep.push({ load, seed, belady: beladyMisses(adapters, slots), results });
        log(`  ${load * 100}%: ${results.map((r) => `${r.policy} p99 ${ms(r.ttftP99)}`).join(' · ')}`);
      }
    }
    json.sweep = sweep;
    const series = (metric: (r: PolicyResult) => number) =>
      POLICIES.map((p) => ({
        name: p.name,
        points: loads.map((l) => {
          const rs = sweep
            .filter((x) => x.load === l)
            .map((x) => x.results.find((r) => r.policy === p.name)!);
          return [l * 100, mean(rs.map(metric))] as [number, number];
        }),
      }));
    writeFileSync(
      join(out, 'ttft-p99-vs-load.svg'),
      lineChart({
        title: 'TTFT p99 vs fleet load',
        xLabel: 'fleet load (%)',
        yLabel: 'TTFT p99 (log scale)',
        series: series((r) => r.ttftP99),
        logY: true,
      }),
    );
    writeFileSync(
      join(out, 'loads-vs-load.svg'),
      lineChart({
        title: 'Adapter loads vs fleet load',
        xLabel: 'fleet load (%)',
        yLabel: 'loads',
        series: [
          ...series((r) => r.loads).filter((s) => s.name !== P.oracle.name),
          {
            name: "Belady's bound (all requests)",
            points: loads.map(
              (l) =>
                [l * 100, mean(sweep.filter((x) => x.load === l).map((x) => x.belady))] as [number, number],
            ),
          },
        ],
      }),
    );
    md.push(...sweepSection(sweep, loads, sweepWorkload.length));
  }

  // ---- adapter load time sweep and vLLM's released unload (issue 14) -------------------
  if (parts.has('loadtime')) {
    const n = full ? workload.length : 1500;
    const sweepSeeds = full ? seeds : [seeds[0]!];
    log(
      `adapter load time sweep at ${mainLoad * 100}% load (${n} requests, seeds ${sweepSeeds.join(', ')}):`,
    );
    const arrivals = atRate(workload.slice(0, n), capacity * mainLoad);
    const points = await loadSweep(POLICIES, scenario, arrivals, sweepSeeds, log);
    json.loadTimeSweep = { requests: n, points };
    md.push(...loadSweepSection(points, n, full));
  }
  if (parts.has('unload')) {
    const n = full ? workload.length : 3000;
    log(`vLLM unload as released vs fixed (${n} requests, seeds ${seeds.join(', ')}):`);
    const arrivals = atRate(workload.slice(0, n), capacity * mainLoad);
    const runs = await unloadComparison(scenario, arrivals, seeds, [scenario.loadMs, 1000], log);
    json.unload = { requests: n, runs };
    md.push(...unloadSection(runs, n, full));
  }

  // ---- eviction and placement variants (issue 9's A/B) ----------------------------------
  if (parts.has('variants')) {
    const alphas = v.alphas ? v.alphas.split(',').map(Number) : full ? [0.8, 1.0, 1.2, 0] : [1.0, 0.8];
    const variants = full ? VARIANTS : VARIANTS.filter((x) => x.quick);
    const n = full ? 6000 : 1500;
    log(
      `variants at ${mainLoad * 100}% load, Zipf ${alphas.join(', ')} (0 = uniform), seeds ${seeds.join(', ')}, ${n} requests:`,
    );
    const rows: Omit<VariantRow, 'load'>[] = [];
    for (const alpha of alphas) {
      for (const seed of seeds) {
        const s = { ...scenario, alpha, seed };
        const arrivals = atRate(workload.slice(0, n), capacity * mainLoad);
        const adapters = adapterSequence(arrivals.length, s);
        const oracleRun = await runPolicy(P.oracle, s, arrivals, adapters);
        const results: PolicyResult[] = [];
        for (const variant of variants)
          results.push(await runPolicy(P.loraRouter(variant.name, variant.config), s, arrivals, adapters));
        const slots = s.replicas * s.slots;
        const pinned = pinnedBeladyMisses(
          adapters,
          oracleRun.intervals!.start,
          oracleRun.intervals!.end,
          slots,
        );
        setServedBounds(results, oracleRun, adapters, slots);
        rows.push({ alpha, seed, belady: beladyMisses(adapters, slots), pinned, results });
        log(
          `  alpha ${alpha} seed ${seed}: ${results.map((r) => `${r.policy} ${r.loads} loads, p99 ${ms(r.ttftP99)}`).join(' · ')}`,
        );
      }
    }
    json.variants = rows;
    md.push(
      ...variantsSection(
        rows,
        variants.map((x) => x.name),
        alphas,
        Math.min(n, workload.length),
        mainLoad,
      ),
    );
  }

  // ---- end to end ----------------------------------------------------------------------
  if (parts.has('e2e')) {
    const e2eScenario: Scenario = { ...scenario, replicas: 4, slots: 4, adapters: 40, seed: seeds[0]! };
    const n = full ? 1200 : 300;
    const timeScale = 2;
    const base = workload.slice(0, n);
    const cap = fleetCapacity(e2eScenario, base, defaultEngineOptions);
    const arrivals = atRate(base, cap * mainLoad);
    const adapters = adapterSequence(arrivals.length, e2eScenario);
    log(`end to end (${n} requests, 4 replicas x 4 slots, 40 adapters, time scale ${timeScale}):`);
    const des: PolicyResult[] = [];
    const e2e: E2eResult[] = [];
    for (const [policy, name] of [
      [P.loraRouter(), 'lora-router'],
      [P.roundRobin, 'round robin'],
    ] as const) {
      const d = await runPolicy(policy, e2eScenario, arrivals, adapters);
      delete d.intervals;
      des.push(d);
      e2e.push(await runE2e(name, e2eScenario, arrivals, adapters, timeScale));
      log(
        `  ${name}: simulation loads ${des.at(-1)!.loads} p50 ${ms(des.at(-1)!.ttftP50)}; end to end loads ${e2e.at(-1)!.loads} p50 ${ms(e2e.at(-1)!.ttftP50)}`,
      );
    }
    // Three Kong nodes for real: three plugin servers sharing a redis-server.
    const three = {
      des: await runPolicy(P.loraRouterNodes(3), e2eScenario, arrivals, adapters),
      e2e: await runE2e('lora-router', e2eScenario, arrivals, adapters, timeScale, 3),
    };
    delete three.des.intervals;
    log(
      `  lora-router, 3 nodes + Redis: simulation loads ${three.des.loads}; end to end loads ${three.e2e.loads} p50 ${ms(three.e2e.ttftP50)}`,
    );
    json.e2e = { requests: n, timeScale, des, e2e, threeNodes: three };
    md.push(...e2eSection(des, e2e, n, timeScale, three));
  }

  md.push('', `Total benchmark time: ${((Date.now() - started) / 1000).toFixed(0)} s.`, '');
  writeFileSync(join(out, 'README.md'), md.join('\n'));
  writeFileSync(join(out, 'results.json'), stringifyResults(json) + '\n');
  log(`\nwrote ${join(out, 'README.md')} (${((Date.now() - started) / 1000).toFixed(0)} s)`);
  if (v.out === undefined) {
    // README's benchmark figures come from these results only (test/core/readme.test.ts checks).
    const readme = join(root, 'README.md');
    writeFileSync(readme, withBenchSections(readFileSync(readme, 'utf8'), json));
    execFileSync(process.execPath, [require.resolve('prettier/bin/prettier.cjs'), '--write', readme]);
    log(`regenerated the benchmark section of ${readme}`);
  }
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

// ---- sections ----------------------------------------------------------------------------

function overheadSection(
  rows: OverheadRow[],
  mem: { mb: number; perEntryBytes: number; usPerDecision: number },
  heap: { decisions: number; heapMb: number; usPerDecision: number }[],
): string[] {
  const { worst, met, pdkMet: pdkOk } = overheadGoal(rows);
  const growth = heap.at(-1)!.heapMb - heap[0]!.heapMb;
  return [
    '## Request-path overhead',
    '',
    'One access and one log event through the real `kong-js-pluginserver`, driven as Kong drives it (test/kong/driver.ts). lora-router has the adapter resident and a fresh snapshot. The no-op plugin makes the same PDK calls and decides nothing. The two run interleaved in one process.',
    '',
    table(
      [
        'body',
        'events',
        'lora-router p50',
        'p99',
        'no-op p50',
        'p99',
        'ratio p50',
        'ratio p99',
        'PDK calls access / log',
      ],
      rows.map((r) => [
        r.size,
        r.iterations,
        `${r.router.totalP50.toFixed(3)} ms`,
        `${r.router.totalP99.toFixed(3)} ms`,
        `${r.noop.totalP50.toFixed(3)} ms`,
        `${r.noop.totalP99.toFixed(3)} ms`,
        r.ratioP50,
        r.ratioP99,
        `${r.pdkAccess} / ${r.pdkLog}`,
      ]),
    ),
    '',
    `Access alone, lora-router vs no-op (p50): ${rows.map((r) => `${r.size} ${r.router.accessP50.toFixed(3)} vs ${r.noop.accessP50.toFixed(3)} ms`).join('; ')}.`,
    '',
    `- Goal: ratio ≤ 1.15 — ${met ? `**met** (worst median ratio ${worst.toFixed(3)})` : `**missed**: worst median ratio ${worst.toFixed(3)}: the plugin parses the JSON body, which the no-op does not, and that grows with the body`}.`,
    `- Goal: ≤ 4 PDK calls in access, ≤ 2 in log — ${pdkOk ? '**met**' : '**missed**'} (${rows[0]!.pdkAccess} and ${rows[0]!.pdkLog}).`,
    `- Fleet state for 64 replicas × 10,000 resident adapters: **${mem.mb.toFixed(1)} MB** of heap (${Math.round(mem.perEntryBytes)} bytes per replica-adapter entry); one decision at that size (every replica's view, then the pipeline) takes ${mem.usPerDecision.toFixed(0)} µs.`,
    `- Heap after ${heap.map((h) => `${h.decisions.toLocaleString('en-US')} decisions: ${h.heapMb.toFixed(1)} MB`).join(', ')} (in-process route + release, 8 replicas, ${heap.at(-1)!.usPerDecision.toFixed(1)} µs per decision): growth ${growth.toFixed(1)} MB, ${Math.abs(growth) < 5 ? 'no leak' : '**investigate**'}.`,
    '',
  ];
}

function qualitySection(
  perSeed: QualitySeed[],
  s: Scenario,
  load: number,
  capacity: number,
  workloadNote: string,
): string[] {
  const names = perSeed[0]!.results.map((r) => r.policy);
  const rows = names.map((n) => [
    n,
    ...cells(perSeed, n, ['errors', 'loads', 'hitRate', 'beladyRatio']),
    ...cells(perSeed, n, ['ttftP50', 'ttftP99', 'ttftP99Served', 'e2eP99', 'throughput']),
  ]);
  // Bounds on loads over all requests: what a policy that served every request could reach.
  const boundRow = (label: string, loads: number[]) => [
    label,
    '',
    spread(loads, fmtNum),
    spread(
      loads.map((b, i) => (1 - b / perSeed[i]!.results[0]!.requests) * 100),
      (v) => `${v.toFixed(1)}%`,
    ),
    ...Array<string>(6).fill(''),
  ];
  rows.push(
    boundRow(
      "Belady's optimum, all requests (bound on loads)",
      perSeed.map((x) => x.belady),
    ),
    boundRow(
      'Belady with in-flight pinning, all requests (reference)',
      perSeed.map((x) => x.pinned),
    ),
  );
  const g = qualityGoals(perSeed);
  const goal = (ok: boolean) => (ok ? '**met**' : '**missed**');
  const range = (xs: number[]) => `${fmtRatio(mean(xs))} (seeds ${xs.map(fmtRatio).join(', ')})`;
  return [
    '## Routing quality (discrete-event simulation)',
    '',
    `The real scheduler, adapter manager and store (\`RouterService\`) drive the simulator's engine model in virtual time. This is the same \`ReplicaEngine\` the HTTP simulator wraps. Scenario: ${s.replicas} replicas × ${s.slots} adapter slots (vLLM \`max_loras\` = \`max_cpu_loras\` = ${s.slots}), adapter load ${s.loadMs === undefined ? `from the load model (rank 16: ${ms(scenarioLoadMs(s))}, local NVMe)` : ms(s.loadMs)} (it blocks the replica's engine), ${s.adapters} adapters drawn Zipf(${s.alpha}). Workload: ${workloadNote}. Fleet load ${load * 100}% of the analytic capacity (${capacity.toFixed(1)} req/s; see \`fleetCapacity\`). Baselines route blind to residency and let vLLM's filesystem resolver load adapters on a miss, inside the engine loop. The oracle has unlimited slots and free loads. Each cell is the mean over seeds ${perSeed.map((x) => x.seed).join(', ')} (min–max).`,
    '',
    `${ACCOUNTING}`,
    '',
    table(
      [
        'policy',
        'refused',
        'loads',
        'hit rate (served)',
        'loads ÷ Belady (served)',
        'TTFT p50',
        'TTFT p99',
        'served p99',
        'end-to-end p99',
        'throughput (req/s)',
      ],
      rows,
    ),
    '',
    `- Goal: loads ≤ 1.2× Belady — ${goal(g.met.loads)}: ${range(g.loadsRatio)}.${g.met.loads ? '' : ` Belady may drop any cached adapter at any instant; a replica cannot unload an adapter with requests in flight. Against Belady with that pinning (service intervals taken from the oracle, the shortest any policy gets), over the same served requests: ${range(g.pinnedRatio)}.`}`,
    `- Goal: TTFT p99 ≤ 1.3× the oracle — ${goal(g.met.oracle)}: ${range(g.oracleRatio)}.${g.met.oracle ? '' : ' The oracle never loads. Every policy that must load pays a blocking load on the tail of requests whenever the adapters outnumber the slots.'}`,
    `- Goal: TTFT p99 ≤ 0.5× the best baseline — ${goal(g.met.baseline)}: ${range(g.baselineRatio)}.`,
    `- ${ROUTER_NAME} never unloaded an adapter with requests in flight: ${g.busyUnloads === 0 ? 'confirmed (0 busy unloads)' : `**${g.busyUnloads} busy unloads**`}.`,
    '',
  ];
}

function nodesSection(runs: NodesRun[], cost: RedisCost, load: number): string[] {
  const { ratios, met } = nodesGoal(runs);
  const row = (name: string, pick: (r: NodesRun) => PolicyResult) => [
    name,
    ...(['errors', 'loads', 'hitRate', 'ttftP50', 'ttftP99Served', 'busyUnloads'] as const).map((k) =>
      spread(
        runs.map((r) => METRICS[k][0](pick(r))),
        METRICS[k][1],
      ),
    ),
  ];
  const f = (x: number) => `${x.toFixed(3)} ms`;
  return [
    '## Several Kong nodes sharing fleet state',
    '',
    `Three Kong nodes, each with its own adapter manager, in-process claims and poller, share one store (the FleetStore contract the Redis store passes in \`test/core/fleet-store.test.ts\`, with Redis pub/sub's wake-ups), and requests are dealt round robin over them, as a load balancer in front of Kong does. Same scenario and workload as above at ${load * 100}% load; each cell is the mean over seeds ${runs.map((r) => r.seed).join(', ')} (min–max).`,
    '',
    table(
      ['lora-router', 'refused', 'loads', 'hit rate (served)', 'TTFT p50', 'served p99', 'busy unloads'],
      [row('1 node', (r) => r.one), row('3 nodes, shared store', (r) => r.three)],
    ),
    '',
    `- Goal: loads per served request with three nodes within 5% of one node — ${met ? '**met**' : '**missed**'}: ${ratios.map((r) => `${r.toFixed(3)}×`).join(', ')}.`,
    '',
    `Per-request cost of Redis, measured through the real plugin server against a real redis-server on loopback (1 KB body, adapter resident, ${cost.iterations.toLocaleString('en-US')} requests each, interleaved): access + log median ${f(cost.redis.p50)} with Redis vs ${f(cost.memory.p50)} in process (${f(cost.redis.p50 - cost.memory.p50)} more, ${(cost.redis.p50 / cost.memory.p50).toFixed(2)}×), p99 ${f(cost.redis.p99)} vs ${f(cost.memory.p99)}; the no-op plugin takes ${f(cost.noop.p50)}. The access phase alone, which the client waits for (Kong runs the log phase after the response), takes ${f(cost.redis.accessP50)} vs ${f(cost.memory.accessP50)} (${f(cost.redis.accessP50 - cost.memory.accessP50)} more). A resident adapter's request makes three Redis calls, each one Lua script: two in access (views, lease), one in log (release).`,
    '',
  ];
}

function sweepSection(sweep: SweepPoint[], loads: number[], n: number): string[] {
  const names = sweep[0]!.results.map((r) => r.policy);
  const at = (l: number, name: string, f: (r: PolicyResult) => number) =>
    mean(sweep.filter((x) => x.load === l).map((x) => f(byName(x.results, name))));
  const perLoad = (label: string, f: (r: PolicyResult) => number, fmt: (v: number) => string, skip = '') => [
    `${label}:`,
    '',
    table(
      ['policy', ...loads.map((l) => `${l * 100}%`)],
      names.filter((name) => name !== skip).map((name) => [name, ...loads.map((l) => fmt(at(l, name, f)))]),
    ),
    '',
  ];
  return [
    '## Load sweep',
    '',
    `${n.toLocaleString('en-US')} requests per point, seed${new Set(sweep.map((x) => x.seed)).size > 1 ? 's' : ''} ${[...new Set(sweep.map((x) => x.seed))].join(', ')}; same scenario as above. ${ACCOUNTING}`,
    '',
    '![TTFT p99 vs load](ttft-p99-vs-load.svg)',
    '![loads vs load](loads-vs-load.svg)',
    '',
    ...perLoad('TTFT p99 (refused = never answered)', (r) => r.ttftP99, ms),
    ...perLoad('Served TTFT p99', (r) => r.ttftP99Served, ms),
    ...perLoad('Refused', (r) => r.errors, fmtNum),
    ...perLoad('Adapter loads', (r) => r.loads, fmtNum, P.oracle.name),
    ...perLoad(
      'Loads ÷ Belady over the same served requests',
      (r) => r.loads / r.belady!,
      fmtRatio,
      P.oracle.name,
    ),
  ];
}

function e2eSection(
  des: PolicyResult[],
  e2e: E2eResult[],
  n: number,
  timeScale: number,
  three: { des: PolicyResult; e2e: E2eResult },
): string[] {
  const g = e2eGoal({ des, e2e, threeNodes: three });
  const differ = g.rows.filter((r) => !r.agree).map((r) => r.name);
  const refusals = des.map((d, i) => `${d.policy} ${d.errors} vs ${e2e[i]!.errors}`).join(', ');
  return [
    '## End to end vs simulation',
    '',
    `The same ${n} requests (4 replicas × 4 slots, 40 adapters) through the local stack. That is the real plugin server, the local gateway, and HTTP to the simulator at time scale ${timeScale}, with times reported in modelled ms. Round robin is Kong's upstream balancer with vLLM's resolver on the replicas. Both count a refused request alike: as never answered in "TTFT p50/p99", left out of "served p99".`,
    '',
    table(
      [
        'policy',
        'simulation refused',
        'e2e refused',
        'simulation loads',
        'e2e loads',
        'simulation TTFT p50',
        'e2e TTFT p50',
        'simulation TTFT p99',
        'e2e TTFT p99',
        'simulation served p99',
        'e2e served p99',
      ],
      des.map((d, i) => {
        const x = e2e[i]!;
        return [
          d.policy,
          d.errors,
          x.errors,
          d.loads,
          x.loads,
          ms(d.ttftP50),
          ms(x.ttftP50),
          ms(d.ttftP99),
          ms(x.ttftP99),
          ms(d.ttftP99Served),
          ms(x.ttftP99Served),
        ];
      }),
    ),
    '',
    table(
      ['round robin ÷ lora-router', 'simulation', 'end to end', 'difference'],
      g.rows.map((r) => [r.name, fmtRatio(r.sim), fmtRatio(r.real), `${(r.diff * 100).toFixed(1)}%`]),
    ),
    '',
    `- Goal: ratios agree within 10% — ${g.met ? '**met**' : `**missed** for ${differ.join(', ')}`}. Refused in the simulation vs end to end: ${refusals}.`,
    '',
    `Three Kong nodes end to end: three plugin servers sharing a real redis-server, each behind its own gateway, requests dealt round robin. Adapter loads ${three.e2e.loads} against ${e2e[0]!.loads} for one node (the simulation of the same gives ${three.des.loads} against ${des[0]!.loads}), refused ${three.e2e.errors} against ${e2e[0]!.errors}, TTFT p50 ${ms(three.e2e.ttftP50)} against ${ms(e2e[0]!.ttftP50)}, served p99 ${ms(three.e2e.ttftP99Served)} against ${ms(e2e[0]!.ttftP99Served)}.`,
    '',
  ];
}

function variantsSection(
  rows: Omit<VariantRow, 'load'>[],
  names: string[],
  alphas: number[],
  n: number,
  load: number,
): string[] {
  const out: string[] = [
    '## Eviction and placement variants',
    '',
    `lora-router configurations on the same requests: ${n.toLocaleString('en-US')} requests at ${load * 100}% load, seeds ${[...new Set(rows.map((r) => r.seed))].join(', ')} (mean, min–max). \`lru\` evicts the least recently used idle adapter. \`value\` evicts the idle adapter with the least decayed request frequency per fleet copy. \`victim placement\` (\`scorer_weights.victim\`) sends a cold adapter where the cheapest victim is. \`consolidate\` prefers the holder used last. \`escalate\` (\`room_wait: escalate\`, the default) loads on the chosen replica if it can load now, else waits for room on any replica, 503 only \`queue_timeout_ms\` (29 s) after the request came; \`wait on the chosen replica\` (\`room_wait: replica\`, 10 s, the old default) queues a cold load behind that replica's busy adapters and answers 503 after \`queue_timeout_ms\`; \`wait for room anywhere\` (\`room_wait: anywhere\`, 10 s) adds the \`room\` filter and waits for an idle adapter on any replica. ${ACCOUNTING}`,
    '',
  ];
  for (const alpha of alphas) {
    const at = rows.filter((r) => r.alpha === alpha);
    out.push(
      `**${alpha === 0 ? 'uniform popularity' : `Zipf ${alpha}`}**: over all requests, Belady ${fmtNum(mean(at.map((x) => x.belady)))} loads, Belady with in-flight pinning ${fmtNum(mean(at.map((x) => x.pinned)))}.`,
      '',
      table(
        [
          'variant',
          'refused',
          'loads',
          'hit rate (served)',
          '÷ Belady (served)',
          '÷ pinned Belady (served)',
          'TTFT p50',
          'TTFT p99',
          'served p99',
        ],
        names.map((name) => [
          name,
          ...cells(at, name, [
            'errors',
            'loads',
            'hitRate',
            'beladyRatio',
            'pinnedRatio',
            'ttftP50',
            'ttftP99',
            'ttftP99Served',
          ]),
        ]),
      ),
      '',
    );
  }
  return out;
}

const ROUTER_NAME = P.loraRouter().name;

/** How refusals are counted, said once beside every table that has them. */
const ACCOUNTING =
  'Loads, hit rate and the Belady ratios count served requests only (a refused request never loads), for every policy alike; "refused" stands beside them. "TTFT p50/p99" count a refused request as never answered; "served p99" leaves refusals out.';

main().catch((err: Error) => {
  console.error(`bench: ${err.stack ?? err.message}`);
  process.exit(1);
});
