/**
 * A held request's decision, seen by the work model from the moment it is taken until its
 * admission (src/router/admission.ts) puts it there under its lease. Taking the lease awaits the
 * store, and meanwhile other decisions run: requests held in the gateway go on one room signal,
 * are decided in the same tick, each sees the replicas as the others left them, and all go to
 * the one that looked emptiest. Long workload, 100 ms loads, 70% load, seed 1: eight long
 * prompts (160,000 tokens) sent to one replica in the same virtual millisecond, each predicted
 * to start within 3.4 s, the slowest waiting 35 s in the queue they made
 * (bench/des/tail-anatomy.ts). Only held requests: for every decision it lowered SLO attainment
 * on the bursty workload at 300 ms loads and 90% load (seed 1: 42.0% to 27.4%).
 */
import type { WorkModel } from './work-model';

let next = 0;

/**
 * Admits `a` to `work` under an id of its own; the function returned takes it out again (a
 * failed admission's release: its prefill and KV only), once, before the admission proper.
 */
export function holdDecidedWork(
  work: Pick<WorkModel, 'admit' | 'release'>,
  a: {
    url: string;
    promptTokens: number;
    maxTokens: number;
    at: number;
    startMs: number;
    cachedTokens?: number;
  },
  now: () => number,
): () => void {
  const id = `decided:${(next = (next + 1) % Number.MAX_SAFE_INTEGER)}`;
  work.admit({ id, ...a });
  let held = true;
  return () => {
    if (held) work.release(id, now());
    held = false;
  };
}
