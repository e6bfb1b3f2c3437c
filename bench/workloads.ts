import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { burstyWorkload } from '../sim/workload/bursty';
import { longWorkload } from '../sim/workload/long';
import { seededRandom } from '../src/random';
import { sharedPrefixWorkload } from '../sim/workload/shared-prefix';
import { readTrace, syntheticWorkload, type Arrival } from '../sim/workload/workload';

/**
 * A benchmark workload by name, its first `n` requests: `conversation` is the Azure trace (or
 * `trace`, any CSV in its format; synthetic when neither is there), `bursty` the generator of
 * bursty, prefill-heavy traffic, `long` the long-context generator (issue 25), `shared-prefix` chat with
 * shared system prompts and multi-turn conversations. The note says what it is, for the results.
 */
export function loadWorkload(
  name: string,
  root: string,
  trace: string | undefined,
  n: number,
): { arrivals: Arrival[]; note: string } {
  if (name === 'bursty') {
    const arrivals = burstyWorkload(Number.isFinite(n) ? n : 19366, 1);
    return {
      arrivals,
      note: `bursty, prefill-heavy generator (sim/workload/bursty.ts), ${arrivals.length.toLocaleString('en-US')} requests, arrival times rescaled to the target load`,
    };
  }
  if (name === 'long') {
    const arrivals = longWorkload(Number.isFinite(n) ? n : 19366, 1);
    return {
      arrivals,
      note: `long-context generator (sim/workload/long.ts), ${arrivals.length.toLocaleString('en-US')} requests, arrival times rescaled to the target load`,
    };
  }
  if (name === 'shared-prefix') {
    const arrivals = sharedPrefixWorkload(Number.isFinite(n) ? n : 19366, 1);
    return {
      arrivals,
      note: `shared-prefix chat generator (sim/workload/shared-prefix.ts: system prompts and multi-turn conversations), ${arrivals.length.toLocaleString('en-US')} requests, arrival times rescaled to the target load`,
    };
  }
  if (name !== 'conversation')
    throw new Error(`unknown workload '${name}' (conversation, bursty, long, shared-prefix)`);
  const defaultTrace = join(root, '..', 'shared', 'data', 'azure-llm-inference-2023', 'conversation.csv');
  const path = trace ?? (existsSync(defaultTrace) ? defaultTrace : undefined);
  if (!path) {
    const arrivals = syntheticWorkload(Number.isFinite(n) ? n : 19366, 1);
    return {
      arrivals,
      note: `synthetic workload fitted to the Azure 2023 conversation trace (the trace is not in this clone: ../shared/data is absent), ${arrivals.length} requests`,
    };
  }
  const all = readTrace(path);
  return {
    arrivals: all.slice(0, n),
    note: `${path.endsWith('conversation.csv') ? 'the Azure LLM inference trace 2023 (conversation)' : path}: ${Math.min(n, all.length).toLocaleString('en-US')} of ${all.length.toLocaleString('en-US')} requests, arrival times rescaled to the target load`,
  };
}

/**
 * The two-class workload (issue 34): any workload's requests, each interactive (2 s objective)
 * or batch (30 s, sheddable: priority < 0 as in llm-d), `batchShare` of them batch, drawn per
 * request with the seed. `classes` is lora-router's `slo_classes` for it; a request names its
 * class as llm-d's `x-gateway-inference-objective` header would.
 */
export const TWO_CLASSES = {
  classes: [
    { name: 'interactive', ttft_ms: 2000, priority: 0 },
    // At most 10 of the router's requests in flight on a replica it joins (of the simulator's 16
    // slots, vLLM's max_num_seqs): tuned on seeds 1-3 (docs/routing.md).
    { name: 'batch', ttft_ms: 30000, priority: -1, max_in_flight: 11 },
  ],
  batchShare: 0.3,
};

export function twoClassSequence(n: number, seed: number, batchShare = TWO_CLASSES.batchShare): string[] {
  const r = seededRandom(seed * 104_729 + 34);
  return Array.from({ length: n }, () => (r() < batchShare ? 'batch' : 'interactive'));
}
