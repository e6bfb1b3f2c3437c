import {
  charsPerTokenByKind,
  estimateError,
  REFERENCES,
  workloadPrompts,
  type EstimateError,
} from '../token-estimate';
import { table } from '../report';
import type { BenchPart } from './context';

export interface TokenEstimateRun {
  /** Prompts per workload. */
  prompts: number;
  rows: ({ workload: string } & EstimateError)[];
  /** Characters per o200k_base token of each kind of generated text. */
  charsPerToken: { prose: number; code: number; json: number };
  /** Wall seconds the real tokenizers took. */
  wallS: number;
}

/**
 * Issue 25: the router's prompt-token estimate (characters / 4 plus 4 a message, from the body
 * it already reads) against the simulator's count and two real tokenizers, on the generated
 * prompts of the long-context and bursty workloads. `--only tokens`.
 */
export const tokensPart: BenchPart = {
  name: 'tokens',
  async run(c) {
    const { full, log, json, md, seeds } = c;
    const n = full ? 1000 : 200;
    const started = Date.now();
    const rows: TokenEstimateRun['rows'] = [];
    log(`prompt-token estimate against the simulator and real tokenizers (${n} prompts per workload):`);
    for (const workload of ['long', 'bursty'] as const) {
      const prompts = workloadPrompts(workload, n, seeds[0]!);
      for (const ref of REFERENCES) {
        const e = estimateError(prompts, ref);
        rows.push({ workload, ...e });
        log(
          `  ${workload}, ${e.reference}: bias ${pct(e.bias)}, abs. error mean ${pct(e.meanAbs)} p50 ${pct(e.p50Abs)} p95 ${pct(e.p95Abs)}; ${e.charsPerToken.toFixed(2)} characters a token`,
        );
      }
    }
    const run: TokenEstimateRun = {
      prompts: n,
      rows,
      charsPerToken: charsPerTokenByKind(),
      wallS: (Date.now() - started) / 1000,
    };
    json.tokenEstimate = run;
    md.push(...tokensSection(run));
  },
};

function pct(x: number): string {
  return `${x >= 0 ? '' : '−'}${(Math.abs(x) * 100).toFixed(1)}%`;
}

export function tokensSection(r: TokenEstimateRun): string[] {
  const k = r.charsPerToken;
  return [
    '## Prompt-token estimate',
    '',
    `The router estimates a request's prompt tokens from the body it already reads, without a tokenizer: characters of message text / 4, plus 4 tokens a message (\`src/work/estimate.ts\`). Measured on ${r.prompts} generated prompts per workload (English prose, code and JSON, \`sim/workload/text.ts\`) against the simulator's count and two real BPE tokenizers with their chat framing (gpt-tokenizer; bias > 0: the estimate counts more). The generated text has ${k.prose.toFixed(2)} characters per o200k_base token in its prose, ${k.code.toFixed(2)} in its code and ${k.json.toFixed(2)} in its JSON; characters / 4 overcounts prose and undercounts code and JSON, so the error moves with a deployment's mix.`,
    '',
    table(
      ['workload', 'reference', 'bias', 'mean abs. error', 'p50', 'p95', 'max', 'chars / token'],
      r.rows.map((x) => [
        x.workload,
        x.reference,
        pct(x.bias),
        pct(x.meanAbs),
        pct(x.p50Abs),
        pct(x.p95Abs),
        pct(x.maxAbs),
        x.charsPerToken.toFixed(2),
      ]),
    ),
    '',
  ];
}
