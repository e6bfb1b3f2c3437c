import type { Filter } from '../types';

/**
 * Hard constraint, never relaxed: replicas that can serve the request at all. An adapter is
 * served where it is resident, or on a vLLM replica the router may load it onto; llama.cpp
 * replicas serve only the adapters they were started with.
 */
export const eligibility: Filter = {
  name: 'eligibility',
  filter(req, candidates, ctx) {
    if (req.kind === 'base') return { kept: candidates };
    const canLoad = req.kind === 'on-demand' && ctx.policy.maxLoadedAdapters > 0;
    return { kept: candidates.filter((c) => c.holder || (canLoad && c.backend === 'vllm')) };
  },
};
