import { forEachSample } from './prometheus';

/** What the router needs from a replica's /metrics. */
export interface ReplicaLoad {
  waiting: number;
  running: number;
  /** KV-cache usage 0..1; absent for llama.cpp (its KV metrics were removed in 2025). */
  kvUsage?: number;
  /** Adapters with requests running or waiting (vLLM `lora_requests_info`): activity, not residency. */
  activeAdapters: string[];
  malformedLines: number;
}

const VLLM = new Set([
  'vllm:num_requests_running',
  'vllm:num_requests_waiting',
  'vllm:kv_cache_usage_perc',
  'vllm:gpu_cache_usage_perc',
  'vllm:lora_requests_info',
]);

export function readVllmLoad(text: string): ReplicaLoad {
  let running = 0;
  let waiting = 0;
  let kv: number | undefined;
  let kvOld: number | undefined;
  let infoTs = -Infinity;
  let info: Record<string, string> | undefined;
  const stats = forEachSample(
    text,
    (name, labels, value) => {
      if (!Number.isFinite(value)) return;
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
          // The value is a unix timestamp and old label sets never go away: the latest wins.
          if (value > infoTs) {
            infoTs = value;
            info = labels;
          }
      }
    },
    (name) => VLLM.has(name),
  );
  const active = new Set<string>();
  for (const key of ['running_lora_adapters', 'waiting_lora_adapters']) {
    for (const a of (info?.[key] ?? '').split(',')) if (a) active.add(a);
  }
  return {
    running,
    waiting,
    kvUsage: kv ?? kvOld,
    activeAdapters: [...active].sort(),
    malformedLines: stats.malformed,
  };
}

export function readLlamacppLoad(text: string): ReplicaLoad {
  let running = 0;
  let waiting = 0;
  const stats = forEachSample(
    text,
    (name, _labels, value) => {
      if (!Number.isFinite(value)) return;
      if (name === 'llamacpp:requests_processing') running = value;
      else waiting = value;
    },
    (name) => name === 'llamacpp:requests_processing' || name === 'llamacpp:requests_deferred',
  );
  return { running, waiting, activeAdapters: [], malformedLines: stats.malformed };
}
