import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { burstyWorkload } from '../sim/workload/bursty';
import { longWorkload } from '../sim/workload/long';
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
