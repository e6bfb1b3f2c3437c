import type { Candidate, Filter, RequestKind } from '../types';
import { keep } from './keep';

/**
 * Hard constraint, never relaxed: replicas that can serve the request at all. An adapter is
 * served where it is resident, or on a vLLM replica the router may load it onto; llama.cpp
 * replicas serve only the adapters they were started with. A replica whose reported context
 * is shorter than the request (estimated; of a batch of prompts, the longest, as vLLM checks
 * each on its own) would answer 400: it is not eligible either. Nor is a llama.cpp replica whose
 * adapter list was never read: a body must name every adapter it holds at scale 0, and builds
 * apply their global scales to the adapters a request leaves out (src/router/proxied-request.ts `llamaBody`).
 */
export const eligibility: Filter = {
  name: 'eligibility',
  filter(req, candidates, ctx) {
    const fit = fits(req.contextTokens, ctx.contextOf);
    const known = keep(candidates, listed);
    const kept = fit ? keep(known, fit) : known;
    if (req.kind === 'base') return { kept };
    return { kept: keep(kept, (c) => canServe(req.kind, c, ctx.policy.maxLoadedAdapters)) };
  },
};

/** Not a llama.cpp replica whose adapter list was never read. */
const listed = (c: Candidate) => c.backend !== 'llamacpp' || c.snapshotAt !== null;

/** Whether a replica can serve a request of this kind at all, its context apart. */
export function canServe(
  kind: RequestKind,
  r: Pick<Candidate, 'holder' | 'backend'>,
  maxLoadedAdapters: number,
): boolean {
  if (kind === 'base') return true;
  return r.holder || (kind === 'on-demand' && maxLoadedAdapters > 0 && r.backend === 'vllm');
}

/** Unknown context (no report) fits: only a known shorter one excludes a replica. */
function fits(
  need: number | undefined,
  contextOf: ((url: string) => number | undefined) | undefined,
): ((c: Candidate) => boolean) | undefined {
  if (need === undefined || !contextOf) return undefined;
  return (c) => {
    const len = contextOf(c.url);
    return len === undefined || need <= len;
  };
}
