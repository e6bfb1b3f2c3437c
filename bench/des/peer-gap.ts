/**
 * Issue 34's "SLO ≥ every baseline's" points, one at a time: lora-router (with a configuration) and
 * the baselines named, on the same requests as the slo part's point (bench/des/slo-point.ts), per
 * seed and their mean, with when the requests served within 5 s came (per tenth of the arrivals):
 * under a sustained overload a router whose queues all pass the objective serves in time only the
 * first requests, a router that leaves some replicas short serves some throughout.
 *
 *   node dist/bench/des/peer-gap.js WORKLOAD LOAD_MS LOAD SEEDS [CONFIG_JSON [BASELINES [TRACE]]]
 *   e.g. node dist/bench/des/peer-gap.js long 3000 0.9 1,2,3 '{}' 'consistent hash,llm-d predicted'
 *
 * BASELINES: comma list of name prefixes of bench/goals.ts BASELINE_POLICIES (none by default).
 */
import { BASELINE_POLICIES } from '../goals';
import { fmtPct } from '../report';
import * as P from './policies';
import { adapterSequence, runPolicy, SLOS_MS, type PolicyResult } from './run';
import { sloPoint } from './slo-point';

/** A TTFT in ms, or "never" for a p99 past the answered requests (over 1% refused). */
const fmtMs = (ms: number) => (Number.isFinite(ms) ? `${Math.round(ms)} ms` : 'never');

const TRACE = '/work/shared/data/azure-llm-inference-2023/conversation.csv';

async function main(): Promise<void> {
  const [workload, loadMs, load, seeds, config, names, trace] = process.argv.slice(2);
  if (!workload || !loadMs || !load || !seeds) {
    console.error(
      'usage: node dist/bench/des/peer-gap.js WORKLOAD LOAD_MS LOAD SEEDS [CONFIG_JSON [BASELINES [TRACE]]]',
    );
    process.exit(2);
  }
  const wanted = (names ?? '').split(',').filter((n) => n !== '');
  const policies = [
    P.loraRouter('lora-router', config ? (JSON.parse(config) as Record<string, unknown>) : {}),
    ...BASELINE_POLICIES.filter((p) => wanted.some((w) => p.name.startsWith(w))),
  ];
  const slo = SLOS_MS[0]!;
  const all = new Map<string, PolicyResult[]>();
  for (const seed of seeds.split(',').map(Number)) {
    const { scenario, arrivals } = sloPoint(workload, Number(load), trace ?? TRACE);
    const s = { ...scenario, seed, loadMs: Number(loadMs) };
    const adapters = adapterSequence(arrivals.length, s);
    for (const p of policies) {
      const inTime = new Array<boolean>(arrivals.length).fill(false);
      const r = await runPolicy(p, s, arrivals, adapters, {
        served: (_url, _predicted, ttftMs, _rec, i) => void (inTime[i] = ttftMs <= slo),
      });
      all.set(p.name, [...(all.get(p.name) ?? []), r]);
      const tenth = Math.ceil(arrivals.length / 10);
      const byTenth = Array.from(
        { length: 10 },
        (_, k) => inTime.slice(k * tenth, (k + 1) * tenth).filter((x) => x).length,
      );
      console.log(
        `seed ${seed} ${p.name}: within ${slo / 1000} s ${fmtPct(r.sloAttainment)}, refused ${r.errors} (over context ${r.overContext ?? 0}), loads ${r.loads}, TTFT p50 ${Math.round(r.ttftP50)} ms, p99 ${fmtMs(r.ttftP99)} (refusals never answered); in time per tenth of the arrivals: ${byTenth.join(' ')}`,
      );
    }
  }
  for (const [name, rs] of all) {
    const mean = (f: (r: PolicyResult) => number) => rs.reduce((n, r) => n + f(r), 0) / rs.length;
    console.log(
      `mean ${name}: within ${slo / 1000} s ${fmtPct(mean((r) => r.sloAttainment))}, refused ${mean((r) => r.errors).toFixed(1)} (over context ${mean((r) => r.overContext ?? 0).toFixed(1)}; most in a seed ${Math.max(...rs.map((r) => r.errors))}), TTFT p99 ${fmtMs(mean((r) => r.ttftP99))} (refusals never answered), loads ${mean((r) => r.loads).toFixed(0)}`,
    );
  }
}

void main();
