import type { Resolved } from '../adapters/catalog';
import type { RouterConfig } from '../config/router-schema';
import type { FleetRuntime } from '../runtime';
import type { PrefixIndex } from '../scheduler/prefix-index';
import type { SchedulingContext } from '../scheduler/types';
import { loadCost } from '../scheduler/victims';
import { CHARS_PER_TOKEN, type TokenEstimate } from '../work/estimate';
import { predictTtft, scratchPrediction } from '../work/predict';
import { DEFAULT_MAX_TOKENS } from '../work/work-model';

/**
 * `saturation_mode: predicted`: sets `ctx.predict`, each candidate's predicted TTFT for this
 * request (src/work/predict.ts), its prefix credit from the router's prefix index.
 */
export function predictFor(
  rt: FleetRuntime,
  ctx: SchedulingContext,
  t: TokenEstimate,
  resolved: Resolved,
  prompt: string | undefined,
  adapterName: string | undefined,
  prefixIndex: PrefixIndex,
  config: Pick<RouterConfig, 'max_loaded_adapters' | 'queue_timeout_ms'>,
): void {
  const adapter = resolved.kind === 'on-demand' ? resolved.adapter.name : undefined;
  // The prompt's blocks in the prefix index (hashed once: the scorer reads the same).
  const blocks = prompt === undefined ? undefined : prefixIndex.blocks(prompt, adapterName);
  const tokensPerBlock = prefixIndex.o.blockChars / CHARS_PER_TOKEN;
  const base = {
    promptTokens: t.promptTokens,
    maxTokens: t.maxTokens ?? DEFAULT_MAX_TOKENS,
    adapter,
    maxLoadedAdapters: config.max_loaded_adapters,
    queueTimeoutMs: config.queue_timeout_ms,
  };
  const out = scratchPrediction();
  ctx.predict = (c) => {
    c.prefixTokens = blocks ? prefixIndex.held(blocks, c.url) * tokensPerBlock : 0;
    const p = predictTtft(
      c,
      base,
      ctx.now,
      rt.work,
      rt.loadTimes,
      // Residents are read once a cold decision weighs victims: then it is known whether a load can start now.
      c.holder || c.residents === undefined ? undefined : loadCost(c, ctx) !== undefined,
      out,
    );
    c.ttftMs = p.totalMs;
    c.loadMs = p.loadMs;
    c.fixedMs = p.fixedMs;
    c.ownMs = p.ownMs;
    c.cachedTokens = p.cachedTokens;
  };
}
