/**
 * llm-d's scheduling profile as data (llm-d/llm-d-router, pkg/epp/framework/interface/scheduling):
 * filters narrow the endpoints, weighted scorers in [0, 1] add up, a picker chooses. Each unit
 * below is one upstream plugin, named after it, so a baseline is the list its config names.
 */
import type { VirtualClock } from '../../../src/clock';
import type { Random } from '../../../src/random';
import type { DesFleet } from '../fleet';
import { counting, type DesRequest, type Policy } from '../policies';

/** One endpoint as llm-d's datalayer sees it from the last metrics scrape, plus what a producer attached. */
export interface Endpoint {
  i: number;
  /** vllm:num_requests_waiting. */
  waiting: number;
  /** vllm:num_requests_running. */
  running: number;
  /** vllm:kv_cache_usage_perc, in [0, 1]. */
  kv: number;
  /** Adapters in a GPU slot, in the host cache only, and with requests running or waiting. */
  gpu: Set<string>;
  cpu: Set<string>;
  active: Set<string>;
  /** GPU adapter slots (vLLM max_loras). */
  slots: number;
  /** Predicted-latency producer: SLO - predicted TTFT (ms); absent without a prediction. */
  ttftHeadroom?: number;
}

export type Filter = (req: DesRequest, eps: Endpoint[], random: Random) => Endpoint[];
export type Scorer = (req: DesRequest, eps: Endpoint[]) => number[];
export type Picker = (eps: Endpoint[], scores: number[], random: Random) => Endpoint;

export interface Profile {
  filters: Filter[];
  scorers: [Scorer, number][];
  picker: Picker;
}

/** Runs a profile: the filters in turn (none may empty the set), the weighted scores' sum, the picker. */
export function schedule(p: Profile, req: DesRequest, eps: Endpoint[], random: Random): Endpoint {
  let kept = eps;
  for (const f of p.filters) {
    const next = f(req, kept, random);
    if (next.length > 0) kept = next;
  }
  const total = kept.map(() => 0);
  for (const [scorer, weight] of p.scorers) scorer(req, kept).forEach((s, k) => (total[k]! += weight * s));
  return p.picker(kept, total, random);
}

/** Adapter names in an engine's host cache: the DES registers copies as `name#n`. */
export const nameOf = (weights: string) => weights.replace(/#\d+$/, '');

/**
 * The endpoints from the engines' state now: GPU slots are the `slots` most recently used
 * adapters of the host cache (vLLM's GPU LRU), the rest of the cache is CPU-only.
 */
export function scrape(fleet: DesFleet, slots: number): Endpoint[] {
  return fleet.engines.map((e, i) => {
    const s = e.stats();
    const cached = s.cachedAdapters.map(nameOf);
    return {
      i,
      waiting: s.waiting,
      running: s.running,
      kv: s.kvUsage,
      gpu: new Set(cached.slice(-slots)),
      cpu: new Set(cached.slice(0, -slots)),
      active: new Set([...s.runningAdapters, ...s.waitingAdapters]),
      slots,
    };
  });
}

/** `queue-scorer` (scorer/queuedepth/queue.go, v0.10.0): (max - waiting) / (max - min), 1 when all equal. */
export const queueScorer: Scorer = (_req, eps) => {
  const qs = eps.map((e) => e.waiting);
  const min = Math.min(...qs);
  const max = Math.max(...qs);
  return qs.map((q) => (max > min ? (max - q) / (max - min) : 1));
};

/** The endpoint with the highest FNV-style hash of (adapter, endpoint) (lora_load_state.go `rendezvous`). */
export function rendezvous(adapter: string, urls: string[], hash: (s: string) => number): number {
  let best = 0;
  let bestHash = -1;
  urls.forEach((u, i) => {
    const h = hash(`${adapter}\0${u}`);
    if (h > bestHash) [best, bestHash] = [i, h];
  });
  return best;
}

/**
 * `lora-load-state-scorer` (scorer/loraloadstate/lora_load_state.go, llm-d/llm-d-router 0bcc84e113,
 * PR 2792): adapter in a GPU slot 1.0, only in the host cache 0.7, not resident with a free GPU
 * slot 0.6, every slot taken but one resident idle 0.3, else 0; scaled by 1 - 0.06 so the bonuses
 * reorder within a tier only: +0.03 on the endpoint a rendezvous hash of the adapter picks (its
 * "home", while the adapter is not in a GPU slot there), +0.03 x the share of free GPU slots.
 */
export function loraLoadStateScorer(home: (adapter: string) => number): Scorer {
  const SCALE = 1 - 0.06;
  return (req, eps) => {
    const preferred = home(req.adapter);
    return eps.map((s) => {
      const inGpu = s.gpu.has(req.adapter);
      const idleResident = [...s.gpu].some((a) => !s.active.has(a));
      const free = s.gpu.size < s.slots;
      const tier = inGpu ? 1 : s.cpu.has(req.adapter) ? 0.7 : free ? 0.6 : idleResident ? 0.3 : 0;
      let lora = tier * SCALE;
      if (s.i === preferred && !inGpu) lora += 0.03;
      if (free) lora += (0.03 * (s.slots - s.gpu.size)) / s.slots;
      return lora;
    });
  };
}

/** `max-score-picker` (picker/maxscore, v0.10.0): the highest score, ties broken at random. */
export const maxScorePicker: Picker = (eps, scores, random) => {
  const best = Math.max(...scores);
  const ties = eps.filter((_, k) => scores[k] === best);
  return ties[Math.floor(random() * ties.length)]!;
};

/**
 * `weighted-random-picker` (picker/weightedrandom/picker.go, v0.10.0): A-Res sampling, key U^(1/w),
 * the largest key wins; a zero score is never picked unless every score is zero (then uniform).
 */
export const weightedRandomPicker: Picker = (eps, scores, random) => {
  if (!scores.some((s) => s > 0)) return eps[Math.floor(random() * eps.length)]!;
  let best = -1;
  let pick = eps[0]!;
  eps.forEach((e, k) => {
    const w = scores[k]!;
    if (w <= 0) return;
    const key = Math.pow(random() || 1e-10, 1 / w);
    if (key > best) [best, pick] = [key, e];
  });
  return pick;
};

/**
 * `lora-residency-filter` (filter/loraresidency/plugin.go, llm-d/llm-d-router 5640bafae9; after
 * v0.10.0, in no release yet): homes are the endpoints with the adapter in a GPU slot. With no home
 * every endpoint passes; while a home is unsaturated, only the homes; with every home saturated
 * (waiting > queueThreshold or KV > kvCacheThreshold) one new copy is allowed on the unsaturated
 * host-cache holders, else the unsaturated others, unless `maxReplicas` homes exist or nothing
 * has room, when the homes are kept.
 */
export function loraResidencyFilter(o: {
  maxReplicas: number;
  queueThreshold: number;
  kvCacheThreshold: number;
}): Filter {
  const saturated = (e: Endpoint) =>
    (o.queueThreshold > 0 && e.waiting > o.queueThreshold) ||
    (o.kvCacheThreshold > 0 && e.kv > o.kvCacheThreshold);
  return (req, eps) => {
    const homes = eps.filter((e) => e.gpu.has(req.adapter));
    if (homes.length === 0) return eps;
    if (homes.some((e) => !saturated(e))) return homes;
    if (o.maxReplicas > 0 && homes.length >= o.maxReplicas) return homes;
    const warm = eps.filter((e) => !e.gpu.has(req.adapter) && e.cpu.has(req.adapter) && !saturated(e));
    if (warm.length) return warm;
    const cold = eps.filter((e) => !e.gpu.has(req.adapter) && !e.cpu.has(req.adapter) && !saturated(e));
    return cold.length ? cold : homes;
  };
}

/**
 * `slo-headroom-tier-filter` (filter/sloheadroomtier/plugin.go, v0.10.0): endpoints meeting the
 * SLO (headroom >= 0) against the others (and those without a prediction); with both, the first
 * tier but with probability `epsilon` (0.01) the second; with one, that one.
 */
export function sloHeadroomTierFilter(epsilon = 0.01): Filter {
  return (_req, eps, random) => {
    if (!eps.some((e) => e.ttftHeadroom !== undefined)) return eps;
    const positive = eps.filter((e) => e.ttftHeadroom !== undefined && e.ttftHeadroom >= 0);
    const negative = eps.filter((e) => !(e.ttftHeadroom !== undefined && e.ttftHeadroom >= 0));
    if (positive.length && negative.length) return random() < epsilon ? negative : positive;
    return positive.length ? positive : negative;
  };
}

/**
 * `latency-scorer` (scorer/latency/plugin.go, v0.10.0) with its defaults (strategy "least") and TPOT
 * neutral (no TPOT objective: the producer sets its headroom to 0, prediction.go): with endpoints
 * meeting the SLO, those scored, the one closest to it highest (bin-packing); with none, the idle
 * ones (nothing dispatched) if any, else all, the least deficit highest. A score is
 * (int((1 - n) x 100) + 1) / 100 for n the |headroom| normalized over the bucket (0.5 at zero
 * range); endpoints outside the scored bucket score 0.
 */
export const latencyScorer: Scorer = (_req, eps) => {
  const meets = (e: Endpoint) => e.ttftHeadroom === undefined || e.ttftHeadroom >= 0;
  const positive = eps.filter(meets);
  const idle = eps.filter((e) => !meets(e) && e.running + e.waiting === 0);
  const bucket = positive.length ? positive : idle.length ? idle : eps;
  const h = bucket.map((e) => Math.abs(e.ttftHeadroom ?? 0));
  const min = Math.min(...h);
  const range = Math.max(...h) - min;
  return eps.map((e) => {
    const k = bucket.indexOf(e);
    if (k < 0) return 0;
    const n = range > 1e-9 ? (h[k]! - min) / range : 0.5;
    return (Math.floor((1 - n) * 100) + 1) / 100;
  });
};

/** The endpoints as scraped every `everyMs` (llm-d's metrics refresh, 50 ms), until stopped. */
export function scraper(clock: VirtualClock, fleet: DesFleet, slots: number, everyMs = 50) {
  let eps = scrape(fleet, slots);
  let cancel = clock.after(everyMs, function tick() {
    eps = scrape(fleet, slots);
    cancel = clock.after(everyMs, tick);
  });
  return { get: () => eps, stop: () => cancel() };
}

/** A baseline that runs `profile` on every request over endpoints scraped every 50 ms. */
export function profilePolicy(name: string, profile: (fleet: DesFleet) => Profile): Policy {
  return {
    name,
    mode: 'resolver',
    create(clock, fleet, seed, slots) {
      const scraped = scraper(clock, fleet, slots);
      const p = profile(fleet);
      const router = counting(
        fleet,
        (_a, _in, random, req) => schedule(p, req, scraped.get(), random).i,
        seed,
      );
      return { ...router, stop: () => scraped.stop() };
    },
  };
}
