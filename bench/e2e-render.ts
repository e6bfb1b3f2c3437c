import type { PolicyResult } from './des/run';
import { SLOS_MS } from './des/run';
import type { E2eResult } from './e2e';
import { fmtPct, ms, table } from './report';

/** The bursty workload end to end beside its simulation (docs/benchmarks.md and bench/results). */
export function burstyE2e(b: { des: PolicyResult[]; e2e: E2eResult[] }): string[] {
  return [
    `On the bursty workload (the same number of requests, load and fleet), simulation / end to end:`,
    '',
    table(
      ['policy', `SLO ${ms(SLOS_MS[0]!)}`, 'refused', 'loads', 'TTFT p50', 'TTFT p99'],
      b.des.map((d, i) => {
        const x = b.e2e[i]!;
        return [
          d.policy,
          `${fmtPct(d.sloAttainment)} / ${fmtPct(x.sloAttainment)}`,
          `${d.errors} / ${x.errors}`,
          `${d.loads} / ${x.loads}`,
          `${ms(d.ttftP50)} / ${ms(x.ttftP50)}`,
          `${ms(d.ttftP99)} / ${ms(x.ttftP99)}`,
        ];
      }),
    ),
    '',
  ];
}
