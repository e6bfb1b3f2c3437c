/**
 * llm-d's strongest setups for many LoRA adapters (issue 34), each its upstream profile built from
 * the units of ./profile.ts. Like the other baselines they route blind to load APIs: replicas
 * resolve adapters themselves (the DES fleet's `resolver` mode).
 */
import { seededRandom } from '../../../src/random';
import { counting, fnv, type DesRequest, type DesRouter, type Policy } from '../policies';
import { SLOS_MS } from '../run';
import { engineTtft, withError } from './predictor';
import {
  latencyScorer,
  loraLoadStateScorer,
  loraResidencyFilter,
  maxScorePicker,
  profilePolicy,
  queueScorer,
  rendezvous,
  schedule,
  scraper,
  sloHeadroomTierFilter,
  weightedRandomPicker,
  type Endpoint,
  type Profile,
} from './profile';

/**
 * llm-d's LoRA profile: `lora-residency-filter` with the README's example cap (`maxReplicas: 2`)
 * and default thresholds (queue > 8, KV > 0.8), `lora-load-state-scorer` at weight 1 (the README's
 * example), `queue-scorer` at weight 2 (the weight of the default profile,
 * config/charts/routerlib/templates/_config.yaml, v0.10.0), the default max-score picker; metrics
 * scraped every 50 ms. Sources: filter/loraresidency/{plugin.go,README.md} at llm-d/llm-d-router
 * 5640bafae9 (after v0.10.0: no release has it yet), scorer/loraloadstate at 0bcc84e113.
 */
export const llmdResidency = profilePolicy('llm-d residency filter + load-state + queue', (fleet) => ({
  filters: [loraResidencyFilter({ maxReplicas: 2, queueThreshold: 8, kvCacheThreshold: 0.8 })],
  scorers: [
    [loraLoadStateScorer((a) => rendezvous(a, fleet.urls, fnv)), 1],
    [queueScorer, 2],
  ],
  picker: maxScorePicker,
}));

/** Status of a request the admitter sheds (llm-d answers resource exhaustion with 429). */
const SHED = 429;

/**
 * llm-d's predicted-latency scheduling as its chart deploys it (config/charts/routerlib/templates/
 * _config.yaml, v0.10.0): the predicted-latency producer, `slo-headroom-tier-filter`,
 * `latency-scorer` and `weighted-random-picker`, with `latency-slo-admitter`
 * (requestcontrol/admitter/latencyslo/plugin.go) shedding a sheddable request (priority < 0) when no
 * endpoint is predicted within its SLO, none is idle (nothing running) and none cold (KV < 2%).
 * The request's TTFT objective (`x-slo-ttft-ms`) is the benchmark's SLO, 5 s; no TPOT objective,
 * so TPOT is neutral (prediction.go). Every request is sheddable: the admitter's strongest use for
 * a single-class workload. Not modelled: the two prefix-cache-affinity filters (the simulator
 * has no prefix cache). The predictor is ./predictor.ts: the engine's own TTFT with a 5% error,
 * no adapter input, as theirs has none.
 */
export const llmdPredictedLatency: Policy = {
  name: 'llm-d predicted latency (SLO filter, headroom, shedding)',
  mode: 'resolver',
  create(clock, fleet, seed, slots) {
    const sloMs = SLOS_MS[0]!;
    const scraped = scraper(clock, fleet, slots);
    const errors = seededRandom(seed * 17 + 3);
    const profile: Profile = {
      filters: [sloHeadroomTierFilter()],
      scorers: [[latencyScorer, 1]],
      picker: weightedRandomPicker,
    };
    let predicted: Endpoint[] = [];
    const router = counting(
      fleet,
      (_a, _in, random, req) => schedule(profile, req, predicted, random).i,
      seed,
    );
    const predict = (req: DesRequest): Endpoint[] =>
      scraped.get().map((e) => {
        const ttft = engineTtft(
          fleet.engines[e.i]!,
          clock.now(),
          req.arrival.promptTokens,
          req.arrival.outputTokens,
        );
        return { ...e, ttftHeadroom: sloMs - withError(ttft, errors) };
      });
    return {
      ...router,
      async route(req) {
        predicted = predict(req);
        if (latencySloAdmitterSheds(predicted)) return { error: SHED };
        return router.route(req);
      },
      stop: () => scraped.stop(),
    } satisfies DesRouter;
  },
};

/**
 * `latency-slo-admitter`'s rule for a sheddable request with an SLO: shed only when no endpoint is
 * predicted within it, none is idle and none is cold (predictions there are unreliable).
 */
export function latencySloAdmitterSheds(eps: Endpoint[]): boolean {
  const valid = eps.some((e) => e.ttftHeadroom !== undefined && e.ttftHeadroom >= 0);
  const idle = eps.some((e) => e.running === 0);
  const cold = eps.some((e) => e.kv < 0.02);
  return !valid && !idle && !cold;
}
