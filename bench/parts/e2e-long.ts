import { defaultEngineOptions } from '../../sim/engine/engine';
import { atRate } from '../../sim/workload/workload';
import * as P from '../des/policies';
import { adapterSequence, fleetCapacity, runPolicy, type PolicyResult, type Scenario } from '../des/run';
import { runE2e, type E2eResult } from '../e2e';
import { fmtPct, ms, table } from '../report';
import type { BenchPart } from './context';

/** Issue 25's bound: SLO attainment end to end within this many points of the simulation's. */
export const E2E_LONG_POINTS = 0.05;

export interface E2eLongRun {
  requests: number;
  load: number;
  timeScale: number;
  des: PolicyResult[];
  e2e: E2eResult[];
}

/** Per policy: simulation and end-to-end SLO attainment, their difference, and whether it is within bound. */
export function e2eLongGoal(r: E2eLongRun) {
  const rows = r.des.map((d, i) => {
    const diff = r.e2e[i]!.sloAttainment - d.sloAttainment;
    return {
      policy: d.policy,
      sim: d.sloAttainment,
      real: r.e2e[i]!.sloAttainment,
      diff,
      agree: Math.abs(diff) <= E2E_LONG_POINTS,
    };
  });
  return { rows, met: rows.every((x) => x.agree) };
}

/**
 * The long-context workload end to end (issue 25): lora-router in the real plugin server and
 * Kong's round robin with vLLM's resolver, over HTTP to the simulator, beside the simulation of
 * the same requests at the same point; SLO attainment should agree within 5 points.
 * `--only e2e-long`; `--load` sets the point (default 50%).
 */
export const e2eLongPart: BenchPart = {
  name: 'e2e-long',
  async run(c) {
    const { full, seeds, scenario, named, log, json, md, v } = c;
    const s: Scenario = { ...scenario, replicas: 4, slots: 4, adapters: 40, seed: seeds[0]! };
    const n = v.requests ? Number(v.requests) : full ? 600 : 200;
    const load = v.load ? Number(v.load) : 0.5;
    const timeScale = 2;
    const base = named('long').arrivals;
    const cap = fleetCapacity(s, base, defaultEngineOptions);
    const arrivals = atRate(base.slice(0, n), cap * load);
    const adapters = adapterSequence(arrivals.length, s);
    log(
      `end to end, long-context workload (${n} requests at ${load * 100}% load, 4 replicas x 4 slots, 40 adapters, time scale ${timeScale}):`,
    );
    const run: E2eLongRun = { requests: n, load, timeScale, des: [], e2e: [] };
    for (const [policy, name] of [
      [P.loraRouter(), 'lora-router'],
      [P.roundRobin, 'round robin'],
    ] as const) {
      const d = await runPolicy(policy, s, arrivals, adapters);
      delete d.intervals;
      const e = await runE2e(name, s, arrivals, adapters, timeScale);
      run.des.push(d);
      run.e2e.push(e);
      log(
        `  ${name}: SLO simulation ${fmtPct(d.sloAttainment)} end to end ${fmtPct(e.sloAttainment)}; refused ${d.errors} / ${e.errors}`,
      );
    }
    json.e2eLong = run;
    md.push(...e2eLongSection(run));
  },
};

export function e2eLongSection(r: E2eLongRun): string[] {
  const g = e2eLongGoal(r);
  return [
    '## End to end vs simulation: long-context workload',
    '',
    `${r.requests} requests of the long-context workload at ${r.load * 100}% load (4 replicas × 4 slots, 40 adapters) through the real plugin server and HTTP to the simulator at time scale ${r.timeScale}, and in the simulation (simulation / end to end). Goal (issue 25): SLO attainment within ${E2E_LONG_POINTS * 100} points — ${g.met ? '**met**' : '**missed**'}.`,
    '',
    table(
      ['policy', 'SLO 5 s', 'difference', 'refused', 'loads', 'TTFT p50', 'served p99'],
      r.des.map((d, i) => {
        const x = r.e2e[i]!;
        const row = g.rows[i]!;
        return [
          d.policy,
          `${fmtPct(d.sloAttainment)} / ${fmtPct(x.sloAttainment)}`,
          `${row.diff >= 0 ? '+' : ''}${(row.diff * 100).toFixed(1)} points`,
          `${d.errors} / ${x.errors}`,
          `${d.loads} / ${x.loads}`,
          `${ms(d.ttftP50)} / ${ms(x.ttftP50)}`,
          `${ms(d.ttftP99Served)} / ${ms(x.ttftP99Served)}`,
        ];
      }),
    ),
    '',
  ];
}
