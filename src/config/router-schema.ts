import type { ScorerWeights } from '../scheduler/scorers';
import type { SchemaFields } from './kong-schema';
import { redisField, type RedisConfig } from './redis-schema';
import { boundFields } from './router-fields/bounds';
import { fleetFields } from './router-fields/fleet';
import { objectiveFields } from './router-fields/objectives';
import { placementFields } from './router-fields/placement';

export { scorerWeightsField } from './router-fields/placement';

/**
 * `lora-router`'s configuration: the single source for Kong's validation, the typed config and
 * docs/configuration.md. Its fields are defined by concern in router-fields/; their order here is
 * the order Kong shows and the docs list.
 */
export const routerSchema: SchemaFields = [
  ...fleetFields,
  ...objectiveFields,
  ...boundFields,
  ...placementFields,
  { redis: redisField },
];

export interface RouterConfig {
  replicas: { url: string; backend: 'vllm' | 'llamacpp'; priority: number }[];
  base_model?: string;
  adapters: { name: string; path?: string; static: boolean }[];
  adapter_path_template?: string;
  adapter_name_pattern: string;
  max_loaded_adapters: number;
  target_waiting_per_replica: number;
  kv_ceiling: number;
  saturation_mode: 'count' | 'predicted';
  saturation_margin_ms: number;
  ttft_tolerance_ms: number;
  ttft_slo_ms: number;
  slo_classes: { name: string; ttft_ms: number; priority: number; max_in_flight: number }[];
  default_slo_class?: string;
  consumer_slo_class: Record<string, string>;
  vllm_scheduling_policy: 'fcfs' | 'priority';
  prefill_tokens_per_second: number;
  load_timeout_ms: number;
  queue_timeout_ms: number;
  stale_after_ms: number;
  refresh_timeout_ms: number;
  lease_max_age_ms: number;
  backoff_base_ms: number;
  backoff_max_ms: number;
  cold_loads_per_minute: number;
  cold_loads_per_consumer_per_minute: number;
  max_body_bytes: number;
  scorer_weights: ScorerWeights;
  eviction: 'lru' | 'value';
  room_wait: 'anywhere' | 'replica' | 'escalate';
  replica_wait_ms: number;
  picker: 'p2c' | 'max-score';
  prefetch: boolean;
  prefetch_half_life_ms: number;
  prefetch_interval_ms: number;
  prefetch_hysteresis: number;
  prefetch_evict_factor: number;
  prefetch_loads_per_minute: number;
  decision_headers: boolean;
  redis: RedisConfig;
}
