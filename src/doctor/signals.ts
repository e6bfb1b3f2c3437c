/**
 * The replica signals the router reads, and what it does without each: the same table serves
 * `kong-lora-router doctor` and lora-poller's start-up summary. Each `without` states the
 * fallback the code takes (file named beside it), not a wish.
 */
export interface SignalSpec {
  id: SignalId;
  /** Where the router reads it: metric families, or a route. */
  source: string;
  /** What the router will do when the replica does not export it. */
  without: string;
}

export type SignalId =
  | 'queue'
  | 'kv_usage'
  | 'lora_requests_info'
  | 'cache_config_info'
  | 'prefill_histograms'
  | 'decode_histograms'
  | 'mean_prompt'
  | 'computed_tokens'
  | 'max_model_len';

export const VLLM_SIGNALS: readonly SignalSpec[] = [
  {
    id: 'queue',
    source: 'vllm:num_requests_running, vllm:num_requests_waiting',
    // readVllmLoad reads 0 for both (src/metrics/replica-load.ts): the queue scorer and the
    // count-mode saturation (src/fleet/saturation.ts) see nothing; the in-flight scorer remains.
    without:
      "the queue reads 0: never saturated by its queue, spread by this router's in-flight leases alone; another gateway's requests are unseen",
  },
  {
    id: 'kv_usage',
    source: 'vllm:kv_cache_usage_perc (or the deleted vllm:gpu_cache_usage_perc)',
    // saturation.ts: kvUsage undefined counts 0 against kv_ceiling; the kv-cache scorer has no figure.
    without: 'kv_ceiling never saturates the replica and KV use does not steer placement',
  },
  {
    id: 'lora_requests_info',
    source: 'vllm:lora_requests_info',
    // replica-word.ts: busy undefined leaves the unload to the lease rules.
    without:
      "an unload is guarded by the router's leases alone: an adapter busy with another gateway's requests can be unloaded",
  },
  {
    id: 'cache_config_info',
    source: 'vllm:cache_config_info (num_gpu_blocks x block_size; enable_prefix_caching)',
    // waits.ts kvWait: kvCapacity undefined implies no KV held by other gateways' requests.
    without: "the predicted KV room counts only this router's requests; prefix caching cannot be told",
  },
  {
    id: 'prefill_histograms',
    source: 'vllm:request_prompt_tokens_sum, vllm:request_prefill_time_seconds_sum',
    // scrape-learning.ts learnFromScrape: no sample, the rate stays at its prior.
    without: 'the prefill rate stays at prefill_tokens_per_second (the configured default), never learned',
  },
  {
    id: 'decode_histograms',
    source: 'vllm:request_generation_tokens_sum/_count, vllm:request_decode_time_seconds_sum',
    without: 'decode time per token stays at its default (25 ms), never learned',
  },
  {
    id: 'mean_prompt',
    source: 'vllm:prompt_tokens_total, vllm:time_to_first_token_seconds_count',
    without: "another gateway's waiting requests are priced at this router's own mean prompt",
  },
  {
    id: 'computed_tokens',
    source: 'vllm:request_prefill_kv_computed_tokens',
    without:
      'the prefill rate is learned from prompt tokens, prefix-cache hits included: too fast where prompts share prefixes',
  },
  {
    id: 'max_model_len',
    source: 'GET /v1/models (the base card)',
    // direct-answers.ts checkContext: one holder without it and no request is refused up front.
    without: 'over-long prompts are not refused by the router; the replica answers for itself',
  },
];

export const LLAMACPP_SIGNALS: readonly SignalSpec[] = [
  {
    id: 'queue',
    source: 'llamacpp:requests_processing, llamacpp:requests_deferred (--metrics)',
    // http-replica-api.ts llamaLoad: /slots (busy slots, no queue), then /health alone.
    without:
      "busy slots from /slots, or none; no queue: never saturated by its queue, spread by this router's in-flight leases alone",
  },
  {
    id: 'mean_prompt',
    source: 'llamacpp:prompt_tokens_total (--metrics)',
    without: "another gateway's requests are priced at this router's own mean prompt",
  },
  {
    id: 'max_model_len',
    source: 'GET /v1/models (not reported by llama.cpp)',
    without: 'over-long prompts are not refused by the router; the replica answers for itself',
  },
];

/** The vLLM families each signal needs, all of them present. */
export const VLLM_FAMILIES: Record<Exclude<SignalId, 'max_model_len'>, readonly (readonly string[])[]> = {
  queue: [['vllm:num_requests_running'], ['vllm:num_requests_waiting']],
  kv_usage: [['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc']],
  lora_requests_info: [['vllm:lora_requests_info']],
  cache_config_info: [['vllm:cache_config_info']],
  prefill_histograms: [['vllm:request_prompt_tokens_sum'], ['vllm:request_prefill_time_seconds_sum']],
  decode_histograms: [
    ['vllm:request_generation_tokens_sum'],
    ['vllm:request_generation_tokens_count'],
    ['vllm:request_decode_time_seconds_sum'],
  ],
  mean_prompt: [['vllm:prompt_tokens_total'], ['vllm:time_to_first_token_seconds_count']],
  computed_tokens: [['vllm:request_prefill_kv_computed_tokens_sum', 'vllm:prompt_tokens_by_source_total']],
};
