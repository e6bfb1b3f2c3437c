import { defaultEngineOptions } from '../../sim/engine/engine';
import { atRate } from '../../sim/workload/workload';
import * as P from '../des/policies';
import { adapterSequence, fleetCapacity, type PolicyResult, runPolicy, type Scenario } from '../des/run';
import { type E2eResult, runE2e } from '../e2e';
import { burstyE2e } from '../e2e-render';
import { e2eGoal } from '../goals';
import { fmtRatio, ms, table } from '../report';
import { type BenchPart } from './context';

/** End to end through the local stack vs the simulation of the same requests. */
export const e2ePart: BenchPart = {
  name: 'e2e',
  async run(c) {
    const { full, seeds, scenario, mainLoad, workload, named, log, json, md } = c;
    const e2eScenario: Scenario = { ...scenario, replicas: 4, slots: 4, adapters: 40, seed: seeds[0]! };
    const n = full ? 1200 : 300;
    const timeScale = 2;
    /** lora-router and round robin on one workload, in the simulation and end to end. */
    const both = async (base: typeof workload) => {
      const cap = fleetCapacity(e2eScenario, base, defaultEngineOptions);
      const arrivals = atRate(base, cap * mainLoad);
      const adapters = adapterSequence(arrivals.length, e2eScenario);
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
          `  ${name}: simulation loads ${des.at(-1)!.loads} p50 ${ms(des.at(-1)!.ttftP50)} refused ${des.at(-1)!.errors}; end to end loads ${e2e.at(-1)!.loads} p50 ${ms(e2e.at(-1)!.ttftP50)} refused ${e2e.at(-1)!.errors}`,
        );
      }
      return { arrivals, adapters, des, e2e };
    };
    log(`end to end (${n} requests, 4 replicas x 4 slots, 40 adapters, time scale ${timeScale}):`);
    const { arrivals, adapters, des, e2e } = await both(workload.slice(0, n));
    // Three Kong nodes for real: three plugin servers sharing a redis-server.
    const three = {
      des: await runPolicy(P.loraRouterNodes(3), e2eScenario, arrivals, adapters),
      e2e: await runE2e('lora-router', e2eScenario, arrivals, adapters, timeScale, 3),
    };
    delete three.des.intervals;
    log(
      `  lora-router, 3 nodes + Redis: simulation loads ${three.des.loads}; end to end loads ${three.e2e.loads} p50 ${ms(three.e2e.ttftP50)}`,
    );
    // The new default on the bursty workload too (issue 15), through the same real parts.
    log(`end to end on the bursty workload:`);
    const bursty = await both(named('bursty').arrivals.slice(0, n));
    json.e2e = {
      requests: n,
      timeScale,
      des,
      e2e,
      threeNodes: three,
      bursty: { des: bursty.des, e2e: bursty.e2e },
    };
    md.push(...e2eSection(des, e2e, n, timeScale, three), ...burstyE2e(json.e2e.bursty!));
  },
};

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
