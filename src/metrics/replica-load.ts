import { forEachSample } from './prometheus';

/** What the router needs from a replica's /metrics. */
export interface ReplicaLoad {
  waiting: number;
  running: number;
  /** KV-cache usage 0..1; absent for llama.cpp (its KV metrics were removed in 2025). */
  kvUsage?: number;
  /** Adapters with requests running or waiting (vLLM `lora_requests_info`): activity, not residency. */
  activeAdapters: string[];
  /**
   * The replica exports `vllm:lora_requests_info`, so `activeAdapters` is its word (an empty list
   * means idle). Absent: it cannot say (llama.cpp; vLLM with `--disable-log-stats`, or without LoRA).
   */
  reportsActivity?: boolean;
  malformedLines: number;
  /**
   * Where the figures came from: `/metrics`; or, for llama.cpp without `--metrics`, `/slots`
   * (busy slots, no queue) or `/health` alone (no figures: in-flight counts decide).
   */
  source?: LoadSource;
  /**
   * vLLM since PR #38435 (v0.20.0): waiting requests held back by the LoRA budget
   * (`waiting_by_reason{reason="deferred"}`), then left out of `waiting`; without it `waiting`
   * includes them.
   */
  waitingDeferred?: number;
  /**
   * Newer vLLM (`vllm:lora_adapter_loaded`, PR vllm#45411): the adapters the engine really
   * holds, by level; absent when the replica does not report it.
   */
  residency?: { gpu: string[]; cpu: string[] };
  /**
   * Prompt tokens prefilled so far (`vllm:prompt_tokens_total`, `llamacpp:prompt_tokens_total`):
   * over an interval with a queue throughout, the rate the replica drains prefill work at.
   */
  promptTokensTotal?: number;
  /**
   * vLLM: requests past their first token (`vllm:time_to_first_token_seconds_count`). vLLM counts
   * a request's prompt tokens in the same iteration as its first token (IterationStats, read by
   * PrometheusStatLogger.record in vllm/v1/metrics/loggers.py, vLLM v0.11.0), so
   * promptTokensTotal / firstTokensTotal is the replica's mean prompt, other gateways' included.
   */
  firstTokensTotal?: number;
  /** vLLM: KV capacity in tokens, `num_gpu_blocks` x `block_size` of `vllm:cache_config_info`. */
  kvCapacityTokens?: number;
  /**
   * vLLM: `vllm:request_prompt_tokens_sum` and `vllm:request_prefill_time_seconds_sum`, both
   * observed when a request finishes (PrometheusStatLogger.record, vllm/v1/metrics/loggers.py,
   * vLLM v0.11.0): their deltas over a poll are the same requests' prompt tokens and prefill
   * time, the replica's prefill rate.
   */
  finishedPromptTokens?: number;
  prefillSeconds?: number;
  /**
   * Newer vLLM (not v0.11.0): the prompt tokens it computed, prefix-cache hits left out.
   * `vllm:request_prefill_kv_computed_tokens_sum` (vLLM PR #30189, in v0.16.0) is
   * observed at finish with the two above, so over a poll it is those requests' computed
   * tokens: the prefill rate without the hits.
   * `vllm:prompt_tokens_by_source_total{source="local_compute"}` (PR #33290, v0.16.0)
   * counts with `promptTokensTotal`, so over `firstTokensTotal` it is the mean computed prompt.
   */
  finishedComputedTokens?: number;
  computedTokensTotal?: number;
  /**
   * vLLM: `vllm:request_generation_tokens_sum` and `_count`, and
   * `vllm:request_decode_time_seconds_sum`, observed with the two above: their deltas over a poll
   * are the decode time per output token after the first, long prefills sharing the steps included.
   */
  generationTokens?: number;
  finishedRequests?: number;
  decodeSeconds?: number;
}

export type LoadSource = 'metrics' | 'slots' | 'health';

/**
 * The vLLM samples the router reads, each with whether its labels are read; every other line of
 * its /metrics is skipped, and the labels of the rest are not copied.
 */
const VLLM_READ: ReadonlyMap<string, boolean> = new Map([
  ['vllm:num_requests_running', false],
  ['vllm:num_requests_waiting', false],
  ['vllm:kv_cache_usage_perc', false],
  ['vllm:gpu_cache_usage_perc', false],
  ['vllm:lora_requests_info', true],
  ['vllm:num_requests_waiting_by_reason', true],
  ['vllm:lora_adapter_loaded', true],
  ['vllm:prompt_tokens_total', false],
  ['vllm:time_to_first_token_seconds_count', false],
  ['vllm:cache_config_info', true],
  ['vllm:request_prompt_tokens_sum', false],
  ['vllm:request_prefill_time_seconds_sum', false],
  ['vllm:request_generation_tokens_sum', false],
  ['vllm:request_generation_tokens_count', false],
  ['vllm:request_decode_time_seconds_sum', false],
  ['vllm:request_prefill_kv_computed_tokens_sum', false],
  ['vllm:prompt_tokens_by_source_total', true],
]);

/** The vLLM samples the router reads; every other line of its /metrics is skipped. */
export const VLLM_SAMPLES: ReadonlySet<string> = new Set(VLLM_READ.keys());

/** The llama.cpp samples the router reads (no labels). */
const LLAMACPP_READ: ReadonlyMap<string, boolean> = new Map([
  ['llamacpp:requests_processing', false],
  ['llamacpp:requests_deferred', false],
  ['llamacpp:prompt_tokens_total', false],
]);

/**
 * Counters, a histogram count and histogram sums of vLLM's PrometheusStatLogger
 * (vllm/v1/metrics/loggers.py, vLLM v0.11.0), by the field each goes to: one series per engine,
 * which add up.
 */
const VLLM_TOTALS = {
  'vllm:prompt_tokens_total': 'promptTokensTotal',
  'vllm:time_to_first_token_seconds_count': 'firstTokensTotal',
  'vllm:request_prompt_tokens_sum': 'finishedPromptTokens',
  'vllm:request_prefill_time_seconds_sum': 'prefillSeconds',
  'vllm:request_generation_tokens_sum': 'generationTokens',
  'vllm:request_generation_tokens_count': 'finishedRequests',
  'vllm:request_decode_time_seconds_sum': 'decodeSeconds',
  'vllm:request_prefill_kv_computed_tokens_sum': 'finishedComputedTokens',
} as const satisfies Record<string, keyof ReplicaLoad>;
type VllmTotal = (typeof VLLM_TOTALS)[keyof typeof VLLM_TOTALS] | 'computedTokensTotal';

/**
 * `names`: adapters the caller asks about (the replica's registry, the adapter about to be
 * unloaded). vLLM writes `running_lora_adapters` and `waiting_lora_adapters` as the names joined
 * with `,` (PrometheusStatLogger.record, vllm/v1/metrics/loggers.py, vLLM v0.11.0, v0.11.2
 * and v0.19.0), so a name with a comma cannot be read back:
 * each such name asked about is active whenever a label may carry it as a run of whole names.
 * The report can then only say "busy" for it, never "idle" by mistake.
 */
export function readVllmLoad(text: string, names: readonly string[] = [], replicaNowS?: number): ReplicaLoad {
  return vllmLoadOf(scanVllmMetrics(text), names, replicaNowS);
}

/**
 * What a vLLM `/metrics` text says, before it is read against the adapters asked about and the
 * replica's time: the part of `readVllmLoad` that walks the text, kept by a caller that may meet
 * the same text again (src/backends/http-replica-api.ts). Never changed after it is made.
 */
export interface VllmScan {
  readonly running: number;
  readonly waiting: number;
  readonly kv: number | undefined;
  readonly kvOld: number | undefined;
  readonly infos: readonly { labels: Record<string, string>; at: number }[];
  readonly deferred: number | undefined;
  readonly residency: { gpu: ReadonlySet<string>; cpu: ReadonlySet<string> } | undefined;
  readonly totals: Readonly<Partial<Record<VllmTotal, number>>>;
  readonly kvCapacity: number | undefined;
  readonly malformed: number;
}

export function scanVllmMetrics(text: string): VllmScan {
  let running = 0;
  let waiting = 0;
  let kv: number | undefined;
  let kvOld: number | undefined;
  const infos: { labels: Record<string, string>; at: number }[] = [];
  let deferred: number | undefined;
  let residency: { gpu: Set<string>; cpu: Set<string> } | undefined;
  const totals: Partial<Record<VllmTotal, number>> = {};
  let kvCapacity: number | undefined;
  const stats = forEachSample(
    text,
    (name, labels, value) => {
      if (!Number.isFinite(value)) return;
      const total = VLLM_TOTALS[name as keyof typeof VLLM_TOTALS];
      if (total) {
        totals[total] = (totals[total] ?? 0) + value;
        return;
      }
      switch (name) {
        // Data-parallel replicas report one series per engine: queues add up, KV is the worst.
        case 'vllm:num_requests_running':
          running += value;
          break;
        case 'vllm:num_requests_waiting':
          waiting += value;
          break;
        case 'vllm:kv_cache_usage_perc':
          kv = Math.max(kv ?? 0, value);
          break;
        case 'vllm:gpu_cache_usage_perc':
          kvOld = Math.max(kvOld ?? 0, value);
          break;
        case 'vllm:lora_requests_info':
          infos.push({ labels, at: value });
          break;
        case 'vllm:num_requests_waiting_by_reason':
          if (labels.reason === 'deferred') deferred = (deferred ?? 0) + value;
          break;
        case 'vllm:prompt_tokens_by_source_total':
          if (labels.source === 'local_compute')
            totals.computedTokensTotal = (totals.computedTokensTotal ?? 0) + value;
          break;
        case 'vllm:cache_config_info': {
          // An info gauge: CacheConfig.metrics_info() as labels (log_metrics_info, same file).
          const blocks = Number(labels.num_gpu_blocks);
          const size = Number(labels.block_size);
          if (blocks > 0 && size > 0) kvCapacity = (kvCapacity ?? 0) + blocks * size;
          break;
        }
        case 'vllm:lora_adapter_loaded': {
          // 1 while resident; a series at 0 is an adapter that left.
          residency ??= { gpu: new Set(), cpu: new Set() };
          const level = labels.level === 'gpu' ? residency.gpu : residency.cpu;
          if (value > 0 && labels.adapter_name) level.add(labels.adapter_name);
        }
      }
    },
    VLLM_READ,
  );
  return {
    running,
    waiting,
    kv,
    kvOld,
    infos,
    deferred,
    residency,
    totals,
    kvCapacity,
    malformed: stats.malformed,
  };
}

/** `readVllmLoad`'s reading of a scan: the adapters asked about, the replica's time. */
export function vllmLoadOf(scan: VllmScan, names: readonly string[] = [], replicaNowS?: number): ReplicaLoad {
  const { running, waiting, kv, kvOld, infos, deferred, residency, totals, kvCapacity } = scan;
  const reading = loraInfoReading(infos, replicaNowS);
  const active = new Set<string>();
  for (const info of reading ?? [])
    for (const key of ['running_lora_adapters', 'waiting_lora_adapters']) {
      const joined = info[key] ?? '';
      for (const a of joined.split(',')) if (a) active.add(a);
      for (const n of names) if (n.includes(',') && `,${joined},`.includes(`,${n},`)) active.add(n);
    }
  return {
    running,
    // Every vLLM release counts requests deferred for the LoRA budget as waiting (older ones put
    // them back in the queue before the gauge is read). Where the replica splits them out
    // (`_by_reason`, since PR #38435) `waiting` is the capacity queue alone; elsewhere it
    // cannot be told apart and holds both.
    waiting: deferred === undefined ? waiting : Math.max(0, waiting - deferred),
    kvUsage: kv ?? kvOld,
    activeAdapters: [...active].sort(),
    ...(reading ? { reportsActivity: true } : {}),
    malformedLines: scan.malformed,
    source: 'metrics',
    ...(deferred === undefined ? {} : { waitingDeferred: deferred }),
    ...(residency ? { residency: { gpu: [...residency.gpu].sort(), cpu: [...residency.cpu].sort() } } : {}),
    ...totals,
    ...(kvCapacity === undefined ? {} : { kvCapacityTokens: kvCapacity }),
  };
}

/**
 * How late a current `lora_requests_info` series may be against the replica's `Date` header: the
 * header has whole seconds, and uvicorn refreshes it once a second (`Server.on_tick`,
 * uvicorn/server.py, uvicorn 00c1280cf9; `date_header` on by default).
 */
const DATE_SLACK_S = 2;

/**
 * Which `vllm:lora_requests_info` series say what runs: undefined when the replica cannot say.
 * The value is the time the label set was last set (`set_to_current_time`, PrometheusStatLogger.record,
 * vllm/v1/metrics/loggers.py, vLLM v0.11.0 to v0.19.0) and old label sets never go away, so the latest
 * is the current one, as long as the values read as times on the replica's clock (`replicaNowS`,
 * its `Date` header; unknown: the latest is trusted):
 * - A value past 1.5 x the replica's time is no time at all: several API server processes
 *   (`--api-server-count` > 1) share the gauge in Prometheus' multiprocess mode, which sums each
 *   label set's times over the processes (`multiprocess_mode="sum"`, same file), and each process
 *   reports only its own requests. No series is the current one: the replica cannot say.
 * - A value after the replica's time (beyond the header's resolution) was set before its clock
 *   stepped back, and outranks the set written since until the clock catches up: every series
 *   is read, so nothing they name is idle meanwhile.
 */
/** A `lora_requests_info` value summed over several API server processes: past 1.5 x the time `nowS`. */
export function summedOverProcesses(at: number, nowS: number): boolean {
  return at > nowS * 1.5;
}

function loraInfoReading(
  infos: readonly { labels: Record<string, string>; at: number }[],
  replicaNowS: number | undefined,
): Record<string, string>[] | undefined {
  if (infos.length === 0) return undefined;
  const latest = infos.reduce((a, b) => (b.at > a.at ? b : a));
  if (replicaNowS === undefined || !(replicaNowS > 0)) return [latest.labels];
  if (summedOverProcesses(latest.at, replicaNowS)) return undefined;
  if (latest.at > replicaNowS + DATE_SLACK_S) return infos.map((i) => i.labels);
  return [latest.labels];
}

export function readLlamacppLoad(text: string): ReplicaLoad {
  let running = 0;
  let waiting = 0;
  let promptTokens: number | undefined;
  const stats = forEachSample(
    text,
    (name, _labels, value) => {
      if (!Number.isFinite(value)) return;
      if (name === 'llamacpp:requests_processing') running = value;
      else if (name === 'llamacpp:prompt_tokens_total') promptTokens = value;
      else waiting = value;
    },
    LLAMACPP_READ,
  );
  return {
    running,
    waiting,
    activeAdapters: [],
    malformedLines: stats.malformed,
    source: 'metrics',
    ...(promptTokens === undefined ? {} : { promptTokensTotal: promptTokens }),
  };
}

/**
 * llama.cpp without `--metrics`: busy slots from `/slots` stand in for running requests; there
 * is no queue figure, so the router's own in-flight counts carry the load.
 */
export function readLlamacppSlots(text: string): ReplicaLoad {
  let slots: unknown;
  try {
    slots = JSON.parse(text);
  } catch {
    slots = undefined;
  }
  const list = Array.isArray(slots) ? (slots as { is_processing?: unknown }[]) : [];
  const running = list.filter((s) => s?.is_processing === true).length;
  return { running, waiting: 0, activeAdapters: [], malformedLines: 0, source: 'slots' };
}

/** No load figures at all (llama.cpp with neither `--metrics` nor `/slots`): the replica answered `/health`. */
export function noLoadFigures(): ReplicaLoad {
  return { running: 0, waiting: 0, activeAdapters: [], malformedLines: 0, source: 'health' };
}
