import { execFileSync } from 'node:child_process';
import { arrivalBlocks } from '../../sim/workload/body';
import { percentile } from '../../sim/workload/percentile';
import { atRate, type Arrival } from '../../sim/workload/workload';
import { defaultEngineOptions } from '../../sim/engine/engine';
import { loraRouter } from '../des/policies';
import { adapterSequence, fleetCapacity, runPolicy, SLOS_MS, type Scenario } from '../des/run';
import { fmtPct, ms, table } from '../report';
import type { BenchPart } from './context';

/** One workload under one way of learning the prefill rate. */
export interface PrefillRow {
  workload: string;
  /** `prompt`: as vLLM v0.11.0 exports, prompt tokens only, no prefix credit; `computed`: newer vLLM's computed tokens, with the prefix credit. */
  learning: 'prompt' | 'computed';
  served: number;
  /** Of the served requests' prompt tokens, the share the engines' prefix caches served. */
  cachedShare: number;
  /** |predicted - measured TTFT| over served requests, ms: median and p90; `bias`: the median of predicted - measured. */
  errP50Ms: number;
  errP90Ms: number;
  biasMs: number;
  /** The same error relative to the measured TTFT: median. */
  relErrP50: number;
  /** The median absolute error per replica: the lowest and the highest replica's. */
  replicaErrP50Ms: [number, number];
  /** SLO attainment at each SLO (ms), refusals counted as misses. */
  slo: Record<string, number>;
  ttftP50: number;
}

export interface PrefillRun {
  /** The command that measured it, the commit and when (this part may run alone). */
  command: string;
  commit?: string;
  date: string;
  requests: number;
  load: number;
  seed: number;
  rows: PrefillRow[];
}

const WORKLOADS = ['shared-prefix', 'conversation', 'bursty', 'long'];

/**
 * Issue 32: the predicted TTFT against the simulated engine's, with vLLM's prefix caching on in
 * every engine (as in vLLM's V1 engine), on each workload including one of shared system prompts
 * and multi-turn conversations; once with the prefill rate learned from prompt tokens (vLLM
 * v0.11.0 exports nothing else; no prefix credit), once from computed tokens with the prefix the
 * router's index knows credited. `--only prefill`.
 */
export const prefillPart: BenchPart = {
  name: 'prefill',
  async run(c) {
    const { full, seeds, scenario, mainLoad, log, json, md, named, root } = c;
    const n = full ? 6000 : 2000;
    const seed = seeds[0]!;
    // The commit measured: read before the run, which takes minutes.
    const commit = gitHead(root);
    const rows: PrefillRow[] = [];
    log(
      `TTFT prediction error, prompt- against computed-token learning (${n} requests, ${mainLoad * 100}% load):`,
    );
    for (const workload of WORKLOADS) {
      const base = named(workload).arrivals.slice(0, n);
      const capacity = fleetCapacity(scenario, base, defaultEngineOptions);
      const arrivals = atRate(base, capacity * mainLoad);
      const adapters = conversationAdapters(arrivals, { ...scenario, seed });
      for (const learning of ['prompt', 'computed'] as const) {
        const row = await measure(workload, learning, { ...scenario, seed }, arrivals, adapters);
        rows.push(row);
        log(
          `  ${workload}, ${learning} tokens: error p50 ${ms(row.errP50Ms)} p90 ${ms(row.errP90Ms)} (bias ${ms(row.biasMs)}), SLO 5 s ${fmtPct(row.slo['5000']!)}, cached ${fmtPct(row.cachedShare)}`,
        );
      }
    }
    const run: PrefillRun = {
      command: `npm run bench -- --only prefill${full ? ' --full' : ''}`,
      commit,
      date: new Date().toISOString(),
      requests: n,
      load: mainLoad,
      seed,
      rows,
    };
    json.prefill = run;
    md.push(...prefillSection(run));
  },
};

/** A conversation keeps its adapter (an application's), so its turns can share their KV. */
function conversationAdapters(arrivals: Arrival[], s: Scenario): string[] {
  const byRequest = adapterSequence(arrivals.length, s);
  return arrivals.map((a, i) =>
    a.history ? byRequest[a.history.conversation % byRequest.length]! : byRequest[i]!,
  );
}

async function measure(
  workload: string,
  learning: PrefillRow['learning'],
  scenario: Scenario,
  arrivals: Arrival[],
  adapters: string[],
): Promise<PrefillRow> {
  const errors: number[] = [];
  const signed: number[] = [];
  const relative: number[] = [];
  const perReplica = new Map<string, number[]>();
  let prompt = 0;
  let cached = 0;
  const result = await runPolicy(
    loraRouter(),
    { ...scenario, computedTokens: learning === 'computed' },
    arrivals,
    adapters,
    {
      blocks: (i) => arrivalBlocks(arrivals[i]!, adapters[i]!, `r${i}`),
      served(url, predicted, ttft, rec) {
        prompt += rec.promptTokens;
        cached += rec.cachedTokens ?? 0;
        if (predicted === undefined) return;
        errors.push(Math.abs(predicted - ttft));
        signed.push(predicted - ttft);
        relative.push(Math.abs(predicted - ttft) / Math.max(1, ttft));
        let xs = perReplica.get(url);
        if (!xs) perReplica.set(url, (xs = []));
        xs.push(Math.abs(predicted - ttft));
      },
    },
  );
  const replicaP50 = [...perReplica.values()].map((xs) => percentile(xs, 0.5));
  return {
    workload,
    learning,
    served: result.completed,
    cachedShare: prompt > 0 ? cached / prompt : 0,
    errP50Ms: percentile(errors, 0.5),
    errP90Ms: percentile(errors, 0.9),
    biasMs: percentile(signed, 0.5),
    relErrP50: percentile(relative, 0.5),
    replicaErrP50Ms: [Math.min(...replicaP50), Math.max(...replicaP50)],
    slo: result.slo,
    ttftP50: result.ttftP50,
  };
}

function gitHead(root: string): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', '--short=12', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
  } catch {
    return undefined;
  }
}

export function prefillSection(r: PrefillRun): string[] {
  const label = (l: PrefillRow['learning']) =>
    l === 'prompt' ? 'prompt tokens, no prefix credit' : 'computed tokens + prefix credit';
  return [
    '## TTFT prediction with prefix caching',
    '',
    `The predicted TTFT of the replica each request went to, against the TTFT the simulated engine gave it, with vLLM's automatic prefix caching on in every engine (on by default in vLLM's V1 engine; a cached prefix costs no prefill). lora-router as configured by default, ${r.requests.toLocaleString('en-US')} requests per workload at ${fmtPct(r.load).replace('.0%', '%')} of the fleet's capacity for the workload's token mix, seed ${r.seed}; \`shared-prefix\` is chat traffic with shared system prompts and multi-turn conversations (\`sim/workload/shared-prefix.ts\`). Once with the prefill rate learned from prompt tokens, cache hits included (all vLLM v0.11.0 exports; no prefix credit), once from computed tokens (\`vllm:request_prefill_kv_computed_tokens\`, newer vLLM) with the prefix the router's prefix index says a replica holds credited. Error = |predicted − measured|, median and p90; bias = median of predicted − measured; per replica: the lowest and highest replica's median error. SLO attainment counts a refusal as a miss. Measured by \`${r.command}\`${r.commit ? ` at ${r.commit}` : ''}.`,
    '',
    table(
      [
        'workload',
        'prefill rate from',
        'cached',
        'error p50',
        'error p90',
        'bias',
        'rel. error p50',
        'per replica p50',
        ...SLOS_MS.map((t) => `SLO ${ms(t)}`),
        'TTFT p50',
      ],
      r.rows.map((x) => [
        x.workload,
        label(x.learning),
        fmtPct(x.cachedShare),
        ms(x.errP50Ms),
        ms(x.errP90Ms),
        ms(x.biasMs),
        fmtPct(x.relErrP50),
        `${ms(x.replicaErrP50Ms[0])} – ${ms(x.replicaErrP50Ms[1])}`,
        ...SLOS_MS.map((t) => fmtPct(x.slo[String(t)] ?? NaN)),
        ms(x.ttftP50),
      ]),
    ),
    '',
  ];
}
