/**
 * The baselines a 2026 user would pick instead of lora-router (issue 25), each modelled from the
 * upstream source it cites. Like the other baselines they route blind to load APIs: replicas
 * resolve adapters themselves (vLLM's filesystem resolver, `resolver` mode of the DES fleet).
 */
import { seededRandom } from '../../src/random';
import { percentile } from '../../sim/workload/percentile';
import { counting, fnv, leastIndex, type DesRequest, type Policy } from './policies';
import {
  DYNAMO_TICK_MS,
  dynamoDemand,
  dynamoRouter,
  hrwRanked,
  hysteresis,
  loadedOn,
  tokensOf,
} from './peers/dynamo-demand';
import { loraLoadStateScorer, maxScorePicker, profilePolicy, queueScorer, rendezvous } from './peers/profile';

/**
 * Least outstanding tokens: the replica with the fewest prompt + answer tokens routed there and
 * not finished, as a KV-aware gateway balances (no residency, no adapter awareness).
 */
export const leastOutstandingTokens: Policy = {
  name: 'least outstanding tokens',
  mode: 'resolver',
  create(_clock, fleet, seed) {
    const outstanding = fleet.urls.map(() => 0);
    return counting(fleet, (_a, _in, r) => leastIndex(outstanding, r), seed, {
      routed: (i, req) => void (outstanding[i]! += tokensOf(req)),
      done: (i, req) => void (outstanding[i]! -= tokensOf(req)),
    });
  },
};

/**
 * NVIDIA Dynamo's LoRA allocation (ai-dynamo/dynamo lib/llm/src/lora/controller.rs 0a8cd5a4b8,
 * routing/hrw.rs 9323daba3c, load_estimator.rs 20c307dd86, config.rs 32381ac605): every 3 s
 * (`timestep_secs`) a controller sizes each adapter's replica set from its arrivals in a 90 s
 * window (3 s x `rate_window_multiplier` 30, EMA alpha 0.3): an active adapter gets
 * ceil(its share of the load x total slots) replicas, at least 1 and at most the worker count,
 * scaled down to the slot budget when over it; a shrink waits `scale_down_cooldown_ticks` (3)
 * ticks, a growth applies at once. The set is rendezvous-hash (HRW) top-k, sticky to the prior
 * set and skipping full workers; an adapter with no arrivals keeps one HRW-pinned replica.
 * Within the set the request goes to the worker with the least outstanding tokens: Dynamo's KV
 * router costs new prefill blocks plus active decode blocks, which without prefix overlap is
 * that. Not modelled: the MCF allocator (not the default), the overlap credit of the KV router.
 * An adapter not yet in the table goes to its HRW top-1, which the next tick would pin it to.
 */
export const dynamoDemandSized: Policy = {
  name: 'Dynamo demand-sized set',
  mode: 'resolver',
  create(clock, fleet, seed, slots) {
    const demand = dynamoDemand(clock, fleet.urls.length, slots);
    const table = new Map<string, { set: number[]; lastScaleDown?: number }>();
    let tick = 0;
    const recompute = () => {
      tick++;
      const desired = demand.desired();
      const loaded = fleet.urls.map((_, i) => loadedOn(fleet, i));
      const usage = loaded.map((l) => Math.min(slots, l.size));
      for (const [a, want] of [...desired].sort((x, y) => (x[0] < y[0] ? -1 : 1))) {
        const cur = table.get(a);
        const { replicas: k, lastScaleDown } = hysteresis(
          want,
          cur?.set.length ?? 0,
          cur?.lastScaleDown,
          tick,
        );
        const own = loaded.map((l) => l.has(a));
        const full = (i: number) => usage[i]! - (own[i] ? 1 : 0) >= slots;
        const order = hrwRanked(a, fleet.urls);
        const prior = new Set(cur?.set ?? []);
        const set: number[] = [];
        for (const i of order) if (set.length < k && prior.has(i) && !full(i)) set.push(i);
        for (const i of order) if (set.length < k && !set.includes(i) && !full(i)) set.push(i);
        if (set.length === 0) set.push(...order.slice(0, k));
        for (const i of set) if (!own[i]) usage[i]!++;
        table.set(a, { set, lastScaleDown });
      }
      // Known adapters with no load: one HRW-pinned cold-start replica, no cooldown.
      for (const a of table.keys())
        if (!desired.has(a)) table.set(a, { set: [hrwRanked(a, fleet.urls)[0]!] });
    };
    let cancel = clock.after(DYNAMO_TICK_MS, function loop() {
      recompute();
      cancel = clock.after(DYNAMO_TICK_MS, loop);
    });
    const router = dynamoRouter(fleet, seed, (a) => table.get(a)?.set, demand);
    return { ...router, stop: () => cancel() };
  },
};

/**
 * llm-d's prefer-resident routing: the lora-load-state-scorer (llm-d/llm-d-router
 * pkg/epp/framework/plugins/scheduling/scorer/loraloadstate/lora_load_state.go 0bcc84e113, PR
 * 2792) beside the queue-depth scorer, equal weights, max-score picker, metrics scraped every
 * 50 ms. Tiers: adapter in a GPU slot 1.0, only in the host cache 0.7, not resident with a free
 * GPU slot 0.6, every slot taken but one resident idle 0.3, else 0; scaled by 1 - 0.06 so the
 * bonuses reorder within a tier only: +0.03 on the endpoint a rendezvous hash of the adapter
 * picks (while the adapter is not in a GPU slot there), +0.03 x the share of free GPU slots. GPU
 * slots here are the `max_loras` most recently used adapters of the engine's host cache (vLLM's
 * GPU LRU); `loadHorizonSeconds` is off, its default. Queue: (max - waiting) / (max - min).
 */
export const llmdLoraLoadState = profilePolicy('llm-d lora-load-state + queue', (fleet) => ({
  filters: [],
  scorers: [
    [loraLoadStateScorer((a) => rendezvous(a, fleet.urls, fnv)), 1],
    [queueScorer, 1],
  ],
  picker: maxScorePicker,
}));

/**
 * llm-d's latency-observation scorer, alone in its profile with a max-score picker (llm-d/llm-d-router
 * pkg/epp/framework/plugins/scheduling/scorer/latencyobservation/README.md and
 * requestcontrol/dataproducer/latencyobserver/README.md, a415a8aa1c, PR 2371; the Go sources of the
 * scorer were not in the index, so this follows the READMEs). Per endpoint, each served request's
 * TTFT is kept with the in-flight count when it was dispatched (short window: the last 100 within 3
 * minutes); every second the anchors are recomputed: the floor (P10 of per-minute P10s, or of the
 * window until a minute has passed), P25 and P50 TTFT with the mean in-flight count of the
 * [p - 10, p + 10] percentile band. A request's predicted TTFT is read off the curve floor -> P25 -> P50
 * (extended past P50) at the endpoint's live in-flight count; score = (max - predicted) / (max - min).
 * An endpoint with fewer than 10 observations is cold (seeded at the best prediction); with a floor
 * but under 10 recent ones it predicts at the floor. Exploration 0.1: an under-observed endpoint
 * scores 1 with that probability, else 0 when a calibrated one exists.
 */
export const llmdLatencyObservation: Policy = {
  name: 'llm-d latency observation',
  mode: 'resolver',
  create(clock, fleet, seed) {
    const random = seededRandom(seed * 13 + 5);
    const MAX_REQUESTS = 100;
    const MAX_AGE_MS = 180_000;
    const MIN_REQUESTS = 10;
    const BUCKET_MS = 60_000;
    type Obs = { at: number; ttft: number; inflight: number };
    type Anchors = {
      floor: number;
      low?: { ttft: number; inflight: number };
      typical?: { ttft: number; inflight: number };
      recent: number;
    };
    const windows = fleet.urls.map((): Obs[] => []);
    const bucket = fleet.urls.map((): number[] => []);
    const history = fleet.urls.map((): number[] => []);
    const observations = fleet.urls.map(() => 0);
    let bucketEnds = BUCKET_MS;
    let anchors: Anchors[] = fleet.urls.map(() => ({ floor: 0, recent: 0 }));
    const band = (sorted: Obs[], p: number) => {
      const lo = Math.floor(((p - 10) / 100) * sorted.length);
      const hi = Math.max(lo + 1, Math.ceil(((p + 10) / 100) * sorted.length));
      const part = sorted.slice(lo, hi);
      return {
        ttft: percentile(
          sorted.map((o) => o.ttft),
          p / 100,
        ),
        inflight: part.reduce((n, o) => n + o.inflight, 0) / part.length,
      };
    };
    const recompute = () => {
      const now = clock.now();
      if (now >= bucketEnds) {
        bucketEnds += BUCKET_MS;
        bucket.forEach((b, i) => {
          if (b.length) history[i]!.push(percentile(b, 0.1));
          b.length = 0;
        });
      }
      anchors = windows.map((w, i) => {
        while (w.length && (w[0]!.at < now - MAX_AGE_MS || w.length > MAX_REQUESTS)) w.shift();
        const sorted = [...w].sort((a, b) => a.ttft - b.ttft);
        const floorOf = history[i]!.length
          ? percentile(history[i]!, 0.1)
          : percentile(
              sorted.map((o) => o.ttft),
              0.1,
            );
        const floor = observations[i]! >= MIN_REQUESTS ? floorOf : 0;
        if (w.length < MIN_REQUESTS) return { floor, recent: w.length };
        return { floor, low: band(sorted, 25), typical: band(sorted, 50), recent: w.length };
      });
    };
    let cancel = clock.after(1000, function tick() {
      recompute();
      cancel = clock.after(1000, tick);
    });
    const dispatchedAt = new Map<DesRequest, number>();
    const predict = (a: Anchors, inflight: number): number | undefined => {
      if (a.floor === 0) return undefined; // cold
      const t = a.typical;
      if (a.recent < MIN_REQUESTS || !t || t.inflight <= 0 || t.ttft <= a.floor) return a.floor;
      const b = a.low;
      const admissible =
        b && t.inflight - b.inflight >= 2 && t.ttft > b.ttft && b.ttft > a.floor && b.inflight > 0;
      const y =
        admissible && inflight < b.inflight
          ? a.floor + (inflight * (b.ttft - a.floor)) / b.inflight
          : admissible
            ? b.ttft + ((inflight - b.inflight) * (t.ttft - b.ttft)) / (t.inflight - b.inflight)
            : a.floor + (inflight * (t.ttft - a.floor)) / t.inflight;
      return Math.max(a.floor, y);
    };
    const router = counting(
      fleet,
      (_adapter, inFlight) => {
        const predicted = anchors.map((a, i) => predict(a, inFlight[i]!));
        const known = predicted.filter((x): x is number => x !== undefined);
        const min = known.length ? Math.min(...known) : 0;
        const max = known.length ? Math.max(...known) : 0;
        const trusted = anchors.map((a) => a.recent >= MIN_REQUESTS && a.floor > 0);
        const anyTrusted = trusted.some(Boolean);
        const scores = predicted.map((p, i) => {
          const score = max > min ? (max - (p ?? min)) / (max - min) : 1;
          if (trusted[i]) return score;
          if (random() < 0.1) return 1;
          return anyTrusted ? 0 : score;
        });
        const best = Math.max(...scores);
        const ties = scores.flatMap((x, i) => (x === best ? [i] : []));
        return ties[Math.floor(random() * ties.length)]!;
      },
      seed,
      {
        routed: (_i, req, inFlight) => void dispatchedAt.set(req, inFlight),
        done: (i, req, o) => {
          const inflight = dispatchedAt.get(req) ?? 0;
          dispatchedAt.delete(req);
          // Only streamed first tokens are observed; a refusal has none.
          if (o.ttftMs === undefined) return;
          windows[i]!.push({ at: clock.now(), ttft: o.ttftMs, inflight });
          bucket[i]!.push(o.ttftMs);
          observations[i]!++;
        },
      },
    );
    return { ...router, stop: () => cancel() };
  },
};
