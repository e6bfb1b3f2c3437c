/**
 * The replicas' `/metrics` text as they write it: vLLM's families from vllm/v1/metrics/loggers.py
 * (main as read in December 2026; the version table in docs/replica-apis.md), llama.cpp's from tools/server/server.cpp
 * `get_metrics` (llama.cpp b7193). docs/replica-apis.md lists each family with its source and version.
 */
import type { EngineStats } from '../engine/engine';

/** Python prometheus_client's number format (vLLM): `6.0`, `+Inf`, Go-style exponents. */
export function goFloat(d: number): string {
  // Most values: a whole number short of the exponent form.
  if (Number.isInteger(d) && d < 1e6 && d > -1e20) return `${d}.0`;
  if (d === Infinity) return '+Inf';
  if (d === -Infinity) return '-Inf';
  if (Number.isNaN(d)) return 'NaN';
  let s = String(d);
  if (Number.isInteger(d) && !s.includes('e')) s += '.0';
  const dot = s.indexOf('.');
  if (d > 0 && dot > 6 && !s.includes('e')) {
    const mantissa = `${s[0]}.${s.slice(1, dot)}${s.slice(dot + 1)}`.replace(/[0.]+$/, '');
    return `${mantissa}e+0${dot - 1}`;
  }
  return s;
}

export const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
];

export interface VllmMetricsInput {
  model: string;
  stats: EngineStats;
  maxLoras: number;
  /** `vllm:lora_requests_info` series: label key -> last unix time it was current. */
  loraInfo: Map<string, number>;
  ttftCounts: number[];
  ttftSum: number;
  ttftCount: number;
  createdUnix: number;
  emitDeprecatedKvMetric: boolean;
  /** The engine's KV capacity in tokens, as `vllm:cache_config_info` says it (blocks x block size). */
  kvCapacityTokens: number;
  /**
   * Mode `residency`: `num_requests_waiting_by_reason{reason="capacity"|"deferred"}` (vLLM PR #38435,
   * v0.20.0, alone in mode `by-reason`; `PrometheusStatLogger.record`, vllm/v1/metrics/loggers.py)
   * and the residency families of PR vllm#45411 (closed; continued in open PR vllm#54830), names from the PR
   * descriptions (adapter -> level and pinned). In every mode `num_requests_waiting` counts the
   * requests deferred by the LoRA budget, as every vLLM release does.
   */
  residency?: { adapter: string; level: 'gpu' | 'cpu'; pinned: boolean }[];
  /** `num_requests_waiting_by_reason` (vLLM PR #38435, v0.20.0); implied by `residency`. */
  waitingByReason?: boolean;
  /** The computed-token families (vLLM PRs #30189 and #33290, both in v0.16.0; read at v0.19.0). */
  computedTokens?: boolean;
}

function family(out: string[], name: string, type: string, help: string): void {
  out.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
}

export function vllmMetricsText(m: VllmMetricsInput): string {
  const l = `engine="0",model_name="${m.model}"`;
  const out: string[] = [];
  family(out, 'vllm:num_requests_running', 'gauge', 'Number of requests in model execution batches.');
  out.push(`vllm:num_requests_running{${l}} ${goFloat(m.stats.running)}`);
  family(out, 'vllm:num_requests_waiting', 'gauge', 'Number of requests waiting to be processed.');
  // The skipped (LoRA-deferred) requests are counted: before PR #38435 the scheduler puts them
  // back in the waiting queue before make_stats reads its length (`schedule`, `make_stats`,
  // vllm/v1/core/sched/scheduler.py); since PR #38435 the gauge is
  // `num_waiting_reqs + num_skipped_waiting_reqs` (vllm/v1/metrics/loggers.py).
  const deferred = m.stats.waitingForLora;
  out.push(`vllm:num_requests_waiting{${l}} ${goFloat(m.stats.waiting)}`);
  if (m.waitingByReason || m.residency) {
    family(out, 'vllm:num_requests_waiting_by_reason', 'gauge', 'Number of requests waiting, by reason.');
    out.push(
      `vllm:num_requests_waiting_by_reason{${l},reason="capacity"} ${goFloat(m.stats.waiting - deferred)}`,
    );
    out.push(`vllm:num_requests_waiting_by_reason{${l},reason="deferred"} ${goFloat(deferred)}`);
  }
  if (m.residency) {
    const count = (level: string) =>
      new Set(m.residency!.filter((r) => r.level === level).map((r) => r.adapter)).size;
    family(out, 'vllm:num_gpu_loaded_lora_adapters', 'gauge', 'LoRA adapters in GPU slots.');
    out.push(`vllm:num_gpu_loaded_lora_adapters{${l}} ${goFloat(count('gpu'))}`);
    family(out, 'vllm:num_cpu_loaded_lora_adapters', 'gauge', 'LoRA adapters in the CPU cache.');
    out.push(`vllm:num_cpu_loaded_lora_adapters{${l}} ${goFloat(count('cpu'))}`);
    family(out, 'vllm:lora_adapter_loaded', 'gauge', 'LoRA adapter residency.');
    for (const r of m.residency)
      out.push(
        `vllm:lora_adapter_loaded{adapter_name="${r.adapter}",${l},level="${r.level}",pinned="${r.pinned}"} 1.0`,
      );
  }
  family(out, 'vllm:kv_cache_usage_perc', 'gauge', 'KV-cache usage. 1 means 100 percent usage.');
  out.push(`vllm:kv_cache_usage_perc{${l}} ${goFloat(m.stats.kvUsage)}`);
  // An info gauge set to 1 at engine start: CacheConfig.metrics_info() as labels, plus `engine`
  // (PrometheusStatLogger.log_metrics_info, vllm/v1/metrics/loggers.py, vLLM v0.11.0); a few
  // of its fields, in blocks of vLLM's default 16 tokens.
  family(out, 'vllm:cache_config_info', 'gauge', 'Information of the LLMEngine CacheConfig');
  out.push(
    `vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",engine="0",gpu_memory_utilization="0.9",num_cpu_blocks="None",num_gpu_blocks="${Math.floor(m.kvCapacityTokens / 16)}"} 1.0`,
  );
  if (m.emitDeprecatedKvMetric) {
    family(out, 'vllm:gpu_cache_usage_perc', 'gauge', 'GPU KV-cache usage. 1 means 100 percent usage.');
    out.push(`vllm:gpu_cache_usage_perc{${l}} ${goFloat(m.stats.kvUsage)}`);
  }
  family(
    out,
    'vllm:prefix_cache_queries_total',
    'counter',
    'Prefix cache queries, in terms of number of queried tokens.',
  );
  out.push(`vllm:prefix_cache_queries_total{${l}} ${goFloat(m.stats.prefixCacheQueries)}`);
  out.push(`vllm:prefix_cache_queries_created{${l}} ${goFloat(m.createdUnix)}`);
  family(
    out,
    'vllm:prefix_cache_hits_total',
    'counter',
    'Prefix cache hits, in terms of number of cached tokens.',
  );
  out.push(`vllm:prefix_cache_hits_total{${l}} ${goFloat(m.stats.prefixCacheHits)}`);
  out.push(`vllm:prefix_cache_hits_created{${l}} ${goFloat(m.createdUnix)}`);
  family(out, 'vllm:prompt_tokens_total', 'counter', 'Number of prefill tokens processed.');
  out.push(`vllm:prompt_tokens_total{${l}} ${goFloat(m.stats.promptTokensTotal)}`);
  family(out, 'vllm:generation_tokens_total', 'counter', 'Number of generation tokens processed.');
  out.push(`vllm:generation_tokens_total{${l}} ${goFloat(m.stats.generationTokensTotal)}`);
  // Observed together at each request's finish (PrometheusStatLogger.record,
  // vllm/v1/metrics/loggers.py, vLLM v0.11.0): the router's prefill rate is the ratio of
  // their sums' growth. Only the +Inf bucket: nothing here reads the others.
  const finishedHistogram = (name: string, help: string, sum: number) => {
    family(out, name, 'histogram', help);
    out.push(
      `${name}_bucket{engine="0",le="+Inf",model_name="${m.model}"} ${goFloat(m.stats.finishedRequests)}`,
    );
    out.push(`${name}_count{${l}} ${goFloat(m.stats.finishedRequests)}`);
    out.push(`${name}_sum{${l}} ${goFloat(sum)}`);
    out.push(`${name}_created{${l}} ${goFloat(m.createdUnix)}`);
  };
  finishedHistogram(
    'vllm:request_prompt_tokens',
    'Number of prefill tokens processed.',
    m.stats.finishedPromptTokens,
  );
  finishedHistogram(
    'vllm:request_prefill_time_seconds',
    'Histogram of time spent in PREFILL phase for request.',
    m.stats.prefillSeconds,
  );
  // And the decode time per output token, from these two.
  finishedHistogram(
    'vllm:request_generation_tokens',
    'Number of generation tokens processed.',
    m.stats.generationTokens,
  );
  finishedHistogram(
    'vllm:request_decode_time_seconds',
    'Histogram of time spent in DECODE phase for request.',
    m.stats.decodeSeconds,
  );
  if (m.computedTokens) computedTokenFamilies(out, m, finishedHistogram);
  family(out, 'vllm:lora_requests_info', 'gauge', 'Running stats on lora requests.');
  for (const [key, ts] of m.loraInfo) out.push(`vllm:lora_requests_info{${key}} ${goFloat(ts)}`);
  family(
    out,
    'vllm:time_to_first_token_seconds',
    'histogram',
    'Histogram of time to first token in seconds.',
  );
  let cum = 0;
  TTFT_BUCKETS.forEach((le, i) => {
    cum += m.ttftCounts[i] ?? 0;
    out.push(
      `vllm:time_to_first_token_seconds_bucket{engine="0",le="${goFloat(le)}",model_name="${m.model}"} ${goFloat(cum)}`,
    );
  });
  out.push(
    `vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="${m.model}"} ${goFloat(m.ttftCount)}`,
  );
  out.push(`vllm:time_to_first_token_seconds_count{${l}} ${goFloat(m.ttftCount)}`);
  out.push(`vllm:time_to_first_token_seconds_sum{${l}} ${goFloat(m.ttftSum)}`);
  out.push(`vllm:time_to_first_token_seconds_created{${l}} ${goFloat(m.createdUnix)}`);
  return out.join('\n') + '\n';
}

/**
 * The prompt tokens vLLM computed, apart from those its prefix cache served (newer than v0.11.0,
 * which has neither; the router learns its prefill rate from them where they are exported):
 * - `vllm:prompt_tokens_by_source` (counter; labels `model_name`, `engine`, `source` =
 *   `local_compute` | `local_cache_hit` | `external_kv_transfer`, PR #33290, v0.16.0), counted with
 *   `vllm:prompt_tokens`, at a request's first token (PromptTokenStats.update_from_output,
 *   vllm/v1/metrics/stats.py, v0.19.0); no KV connector here, so `external_kv_transfer` stays 0;
 * - `vllm:request_prefill_kv_computed_tokens` (histogram, same two labels as the others, vLLM PR
 *   #30189, in v0.16.0 by ancestry), observed at a request's finish with the prefill-time
 *   histogram: its prompt tokens less those cached.
 */
function computedTokenFamilies(
  out: string[],
  m: VllmMetricsInput,
  finishedHistogram: (name: string, help: string, sum: number) => void,
): void {
  family(out, 'vllm:prompt_tokens_by_source', 'counter', 'Number of prompt tokens by source.');
  const bySource: [string, number][] = [
    ['local_compute', m.stats.computedPromptTokensTotal],
    ['local_cache_hit', m.stats.cachedPromptTokensTotal],
    ['external_kv_transfer', 0],
  ];
  for (const [source, n] of bySource)
    out.push(
      `vllm:prompt_tokens_by_source_total{engine="0",model_name="${m.model}",source="${source}"} ${goFloat(n)}`,
    );
  for (const [source] of bySource)
    out.push(
      `vllm:prompt_tokens_by_source_created{engine="0",model_name="${m.model}",source="${source}"} ${goFloat(m.createdUnix)}`,
    );
  finishedHistogram(
    'vllm:request_prefill_kv_computed_tokens',
    'Histogram of new KV tokens computed during prefill (excluding cached tokens).',
    m.stats.finishedComputedTokens,
  );
}

/**
 * vLLM's /metrics with `--disable-log-stats`: no `vllm:` family (no StatLoggerManager,
 * vllm/v1/engine/async_llm.py, vLLM v0.11.0), only prometheus_client's own process
 * collectors; one stands for them here (modelled, not read at a pinned version).
 */
export function processMetricsText(): string {
  const out: string[] = [];
  family(out, 'python_info', 'gauge', 'Python platform information');
  out.push(
    'python_info{implementation="CPython",major="3",minor="12",patchlevel="11",version="3.12.11"} 1.0',
  );
  return out.join('\n') + '\n';
}

/** The key of a `vllm:lora_requests_info` series (labels sorted, as prometheus_client writes them). */
export function loraInfoKey(maxLoras: number, running: string[], waiting: string[]): string {
  return `max_lora="${maxLoras}",running_lora_adapters="${running.join(',')}",waiting_lora_adapters="${waiting.join(',')}"`;
}

/**
 * llama.cpp's families and help texts (get_metrics, tools/server/server.cpp, llama.cpp b7193), less its
 * `*_seconds*` and `n_tokens_max` ones. That build lists `n_busy_slots_per_decode` among its counters; since PR
 * #26920 (b10424) it is a gauge, as here, and `prompt_tokens_total` leaves out the tokens taken from the prompt
 * cache (`prompt_tokens_cached_total` counts those; server-task.cpp `to_metrics`, b10573), which the simulator
 * does not model for llama.cpp.
 */
export function llamacppMetricsText(stats: EngineStats): string {
  const out: string[] = [];
  const add = (name: string, type: string, help: string, v: number) => {
    family(out, `llamacpp:${name}`, type, help);
    out.push(`llamacpp:${name} ${v}`);
  };
  add('prompt_tokens_total', 'counter', 'Number of prompt tokens processed.', stats.promptTokensTotal);
  add(
    'tokens_predicted_total',
    'counter',
    'Number of generation tokens processed.',
    stats.generationTokensTotal,
  );
  add('n_decode_total', 'counter', 'Total number of llama_decode() calls', stats.stepsTotal);
  add(
    'n_busy_slots_per_decode',
    'gauge',
    'Average number of busy slots per llama_decode() call',
    stats.stepsTotal ? stats.busySlotsTotal / stats.stepsTotal : 0,
  );
  add('requests_processing', 'gauge', 'Number of requests processing.', stats.running);
  add('requests_deferred', 'gauge', 'Number of requests deferred.', stats.waiting);
  return out.join('\n') + '\n';
}
