import { atRate } from '../../sim/workload/workload';
import { runPoint } from '../des/point';
import type { Scenario } from '../des/run';
import { mean, qualityGoals, type QualitySeed, ROUTER, scenarioLoadMs } from '../goals';
import { cells, fmtNum, fmtRatio, ms, spread, table } from '../report';
import { ACCOUNTING, type BenchPart, POLICIES } from './context';

/** Routing quality in the discrete-event simulation: every policy on the same requests, per seed. */
export const qualityPart: BenchPart = {
  name: 'quality',
  async run(c) {
    const { seeds, scenario, mainLoad, capacity, workload, workloadNote, log, json, md } = c;
    log(
      `routing quality at ${mainLoad * 100}% load (${seeds.length} seeds, ${workload.length} requests, capacity ${capacity.toFixed(1)} req/s):`,
    );
    const perSeed: QualitySeed[] = [];
    for (const seed of seeds) {
      const arrivals = atRate(workload, capacity * mainLoad);
      const { belady, pinned, results } = await runPoint(POLICIES, { ...scenario, seed }, arrivals, {
        log: (r) =>
          log(
            `  seed ${seed} ${r.policy.padEnd(26)} loads ${String(r.loads).padStart(6)}  TTFT p50 ${ms(r.ttftP50).padStart(8)} p99 ${ms(r.ttftP99).padStart(8)}  refused ${r.errors}  (${r.wallS.toFixed(1)} s)`,
          ),
      });
      perSeed.push({ seed, belady, pinned, results });
    }
    json.quality = perSeed;
    md.push(...qualitySection(perSeed, scenario, mainLoad, capacity, workloadNote));
  },
};

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
    `- ${ROUTER} never unloaded an adapter with requests in flight: ${g.busyUnloads === 0 ? 'confirmed (0 busy unloads)' : `**${g.busyUnloads} busy unloads**`}.`,
    '',
  ];
}
