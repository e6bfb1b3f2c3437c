import { DEFAULT_NAME_PATTERN } from '../adapters/catalog';
import { SCORERS, type ScorerWeights } from '../scheduler/scorers';
import type { ScorerDescriptor } from '../scheduler/types';
import type { FieldDef, SchemaFields } from './kong-schema';
import { redisField, type RedisConfig } from './redis-schema';

/** `lora-router`'s configuration: the single source for Kong's validation, the typed config and docs/configuration.md. */
export const routerSchema: SchemaFields = [
  {
    replicas: {
      type: 'array',
      required: true,
      len_min: 1,
      description: 'The GPU replicas serving the base model: `{url, backend, priority}` each.',
      elements: {
        type: 'record',
        fields: [
          {
            url: {
              type: 'string',
              required: true,
              match: '^https?://[^/%s]+:%d+/?$',
              description: '`http(s)://host:port` of the replica.',
            },
          },
          {
            backend: {
              type: 'string',
              default: 'vllm',
              one_of: ['vllm', 'llamacpp'],
              description: 'Server kind.',
            },
          },
          {
            priority: {
              type: 'integer',
              default: 0,
              description: 'Pool priority: higher pools take requests first while not saturated.',
            },
          },
        ],
      },
    },
  },
  {
    base_model: {
      type: 'string',
      description:
        "The model id the replicas serve as their base (vLLM's `--served-model-name`, else `--model`). A request naming it, or naming no `model`, is a base-model request: any replica may serve it (llama.cpp ones with every adapter's scale at 0), no adapter is loaded and adapter affinity does not apply. `/v1/models` lists it first and as each adapter's `parent`; no adapter may take its name. Unset: only a request with no `model` is one; a request naming the base model is taken for an adapter name (400 `invalid_model` when it contains `/`, else served or loaded as an adapter).",
    },
  },
  {
    adapters: {
      type: 'array',
      default: [],
      description:
        'Known adapters: `{name, path, static}`. `static` ones are registered at replica start and never loaded or unloaded by the router.',
      elements: {
        type: 'record',
        fields: [
          {
            name: {
              type: 'string',
              required: true,
              len_min: 1,
              len_max: 256,
              description:
                'The `model` clients send. No `,` unless `static`: vLLM reports the adapters it runs as names joined with `,`, so the router could not tell such an adapter idle.',
            },
          },
          {
            path: {
              type: 'string',
              description:
                'vLLM: the `lora_path` to load. llama.cpp: the file the replica was started with (matched by path or file name).',
            },
          },
          {
            static: {
              type: 'boolean',
              default: false,
              description: 'Registered at replica start: served only by holders, never loaded or unloaded.',
            },
          },
        ],
      },
    },
  },
  {
    adapter_path_template: {
      type: 'string',
      description:
        'Path of adapters not listed, with `{name}` (e.g. `/adapters/{name}`): any name matching `adapter_name_pattern` may then be loaded. Unset: an unlisted name is served only where a replica registered it at start, else 404.',
    },
  },
  {
    adapter_name_pattern: {
      type: 'string',
      default: DEFAULT_NAME_PATTERN,
      description:
        'JS regular expression a templated adapter name must match. A name it lets through with a `,` is never unloaded while the replica reports a running or waiting adapter list that could hold it (vLLM joins the names with `,`).',
    },
  },
  {
    max_loaded_adapters: {
      type: 'integer',
      default: 0,
      between: [0, 4096],
      description:
        'Runtime-loaded adapters per vLLM replica (keep below `--max-cpu-loras`: released vLLM keeps unloaded weights cached). 0: the router never loads or unloads.',
    },
  },
  {
    target_waiting_per_replica: {
      type: 'number',
      // 2 beats 4 on the routing goals: a hot adapter spreads before its holder's queue grows.
      default: 2,
      gt: 0,
      description: 'Waiting requests at which a replica counts as saturated.',
    },
  },
  {
    kv_ceiling: {
      type: 'number',
      default: 0.8,
      between: [0.05, 1],
      description: 'KV-cache usage at which a replica counts as saturated.',
    },
  },
  {
    saturation_mode: {
      type: 'string',
      default: 'predicted',
      one_of: ['count', 'predicted'],
      description:
        "`count`: a holder is saturated at `target_waiting_per_replica` waiting or `kv_ceiling`. `predicted` (the default): when its predicted time to first token (prefill queued ahead at its learned rate, KV room or a running slot, loads) exceeds the best non-holder's, load included, by `saturation_margin_ms`; placement then minimises the prediction.",
    },
  },
  {
    saturation_margin_ms: {
      type: 'integer',
      default: 250,
      between: [0, 60000],
      description:
        '`saturation_mode: predicted`: how much longer a holder may take than loading elsewhere before the adapter spreads.',
    },
  },
  {
    ttft_tolerance_ms: {
      type: 'integer',
      default: 100,
      between: [0, 60000],
      description:
        '`saturation_mode: predicted`: replicas within this of the best predicted TTFT count as equal (the scorers and picker spread among them).',
    },
  },
  {
    ttft_slo_ms: {
      type: 'integer',
      default: 5000,
      between: [0, 600000],
      description:
        '`saturation_mode: predicted` with `room_wait: escalate`: the time to first token aimed at. When even the fastest replica the rule allows is predicted past it (every queue is longer than the objective), the request waits in the gateway and is decided again as requests finish, until a replica is predicted to make it or until `ttft_slo_ms` before `queue_timeout_ms`, then goes to the fastest: an overload then costs the held requests their objective instead of every request. A request whose load and prefill take the objective waits only while queues alone are past it. 0: never wait.',
    },
  },
  {
    slo_classes: {
      type: 'array',
      default: [],
      description:
        "`saturation_mode: predicted`: classes of requests, `{name, ttft_ms, priority}` each, as llm-d's InferenceObjectives: a request names its class with the `x-gateway-inference-objective` header (else its consumer's class, else `default_slo_class`) and may set its own objective with `x-slo-ttft-ms`. Under overload a class waits in the gateway while sending it would queue it past the objective of a class of higher priority, and a sheddable class (priority < 0) is refused (503 `shed_low_priority`, with `Retry-After`) once it cannot meet its own objective. A header may lower a request's priority, never raise it above its default's. See docs/routing.md. Empty: every request has `ttft_slo_ms`.",
      elements: {
        type: 'record',
        fields: [
          {
            name: {
              type: 'string',
              required: true,
              len_min: 1,
              description:
                'What `x-gateway-inference-objective`, `default_slo_class` and `consumer_slo_class` name.',
            },
          },
          {
            ttft_ms: {
              type: 'integer',
              required: true,
              between: [1, 600000],
              description: 'The time to first token aimed at for the class (ms), in place of `ttft_slo_ms`.',
            },
          },
          {
            priority: {
              type: 'integer',
              default: 0,
              between: [-1000, 1000],
              description: 'Higher goes first; below 0 the class is sheddable (llm-d: priority < 0).',
            },
          },
        ],
      },
    },
  },
  {
    default_slo_class: {
      type: 'string',
      description:
        'The class (of `slo_classes`) of a request whose consumer has none. Unset: priority 0 and `ttft_slo_ms`.',
    },
  },
  {
    consumer_slo_class: {
      type: 'map',
      default: {},
      keys: { type: 'string' },
      values: { type: 'string' },
      description:
        'Kong consumer (username or id) -> its default class (of `slo_classes`), read when an authentication plugin identified one. The consumer is then read on every request (one more PDK call).',
    },
  },
  {
    prefill_tokens_per_second: {
      type: 'number',
      default: 10000,
      gt: 0,
      description:
        "A replica's prefill rate until it is measured (from vLLM's prefill-time and prompt-token histograms), tokens per second.",
    },
  },
  {
    load_timeout_ms: {
      type: 'integer',
      // Loads take 0.1-3 s (docs/replica-apis.md); 10 s leaves room for the queue's 29 s.
      default: 10000,
      between: [1, 27000],
      description:
        "Bound on one adapter load or unload call. `refresh_timeout_ms + queue_timeout_ms + 2 x load_timeout_ms` must stay within 55 s: Kong's RPC to the plugin server times out at 60 s.",
    },
  },
  {
    queue_timeout_ms: {
      type: 'integer',
      default: 29000,
      between: [0, 55000],
      description:
        'How long a cold request may wait for an adapter slot before 503. With `room_wait: escalate`, counted from its arrival; with `replica` or `anywhere`, per wait. See `load_timeout_ms` for the bound on the sum.',
    },
  },
  {
    stale_after_ms: {
      type: 'integer',
      default: 2000,
      between: [1, 3600000],
      description: 'A replica snapshot older than this is unknown, not idle.',
    },
  },
  {
    refresh_timeout_ms: {
      type: 'integer',
      default: 1000,
      between: [1, 60000],
      description: 'Bound on the router refreshing a replica itself when no fresh snapshot exists.',
    },
  },
  {
    lease_max_age_ms: {
      type: 'integer',
      default: 600000,
      between: [1000, 86400000],
      description:
        "An in-flight count whose log phase never came is reclaimed once not renewed for this long (counted in `lora_router_leases_expired_total`). Kong skips a log phase when its timers are exhausted, or a node dies. A poll that finds the lease's adapter running or waiting on the replica renews it; for replicas that do not report that (llama.cpp, vLLM with `--disable-log-stats`), keep it above the longest request Kong may proxy: the default is twice kong.yml's `read_timeout` (300 s).",
    },
  },
  {
    backoff_base_ms: {
      type: 'integer',
      default: 1000,
      between: [0, 3600000],
      description: 'Wait after a failed load of an adapter on a replica; doubles per failure.',
    },
  },
  {
    backoff_max_ms: {
      type: 'integer',
      default: 60000,
      between: [0, 3600000],
      description: 'Upper bound of that wait.',
    },
  },
  {
    cold_loads_per_minute: {
      type: 'integer',
      default: 6000,
      between: [0, 1000000],
      description:
        'Adapter loads the fleet may start per minute (counted in Redis when configured, else per Kong node). A request that would start one past it gets 429 with `Retry-After`; requests for resident adapters are never counted nor refused. 0: no bound.',
    },
  },
  {
    cold_loads_per_consumer_per_minute: {
      type: 'integer',
      default: 600,
      between: [0, 1000000],
      description:
        'The same per Kong consumer, when an authentication plugin identified one (read only for a request that would start a load). 0: no bound.',
    },
  },
  {
    max_body_bytes: {
      type: 'integer',
      default: 10485760,
      between: [1024, 1073741824],
      description:
        'Larger request bodies get 413. Kong >= 3.8.0 reads a body nginx spooled past `nginx_http_client_body_buffer_size` back from its file up to this size; set `nginx_http_client_max_body_size` to it, since a spooled body past it cannot be handed over (500). Kong < 3.8.0 reads no spooled body: keep it <= the buffer there.',
    },
  },
  { scorer_weights: scorerWeightsField(SCORERS) },
  {
    room_wait: {
      type: 'string',
      default: 'escalate',
      one_of: ['escalate', 'replica', 'anywhere'],
      description:
        'A cold request whose chosen replica has no idle adapter to unload: `escalate` waits for room on any replica (after `replica_wait_ms` on the chosen one) and answers 503 only `queue_timeout_ms` after it came; `replica` waits on the chosen replica, 503 after `queue_timeout_ms`; `anywhere` (experimental) waits for room on any replica, `queue_timeout_ms` per wait. The benchmark section measures the trade.',
    },
  },
  {
    replica_wait_ms: {
      type: 'integer',
      default: 0,
      between: [0, 600000],
      description:
        'With `room_wait: escalate`: how long a cold request waits for an idle adapter on the replica it chose before it waits for room on any replica (0: it goes there only if that replica can load now).',
    },
  },
  {
    eviction: {
      type: 'string',
      default: 'lru',
      one_of: ['lru', 'value'],
      description:
        'Which idle adapter makes room: `lru` (least recently used) or `value` (experimental: least decayed request frequency per copy in the fleet, recency breaking ties).',
    },
  },
  {
    picker: {
      type: 'string',
      default: 'p2c',
      one_of: ['p2c', 'max-score'],
      description: 'Power of two choices, or the highest score.',
    },
  },
  {
    prefetch: {
      type: 'boolean',
      default: false,
      description:
        'Placement ahead of demand: every `prefetch_interval_ms` one Kong node of the fleet loads the adapters requests ask for most into free slots of idle replicas (nothing waiting), copies in proportion to demand, through the usual load path and the cold-load budget. See docs/routing.md.',
    },
  },
  {
    prefetch_half_life_ms: {
      type: 'integer',
      default: 60000,
      between: [1000, 3600000],
      description:
        "Half-life of the decayed request counts that measure each adapter's demand (a fixed number of adapters is tracked per node).",
    },
  },
  {
    prefetch_interval_ms: {
      type: 'integer',
      default: 5000,
      between: [500, 600000],
      description:
        "How often prefetching plans, on the poller's timer (fleet-wide: one node plans a window).",
    },
  },
  {
    prefetch_hysteresis: {
      type: 'number',
      default: 1,
      between: [0, 10],
      description:
        "A copy is made only when an adapter's target (its share of demand times the fleet's slots) exceeds its copies by this many, and a copy is displaced only when its adapter stays within this many of its own target: no copy is made and dropped in turn.",
    },
  },
  {
    prefetch_evict_factor: {
      type: 'number',
      default: 8,
      between: [1, 1000],
      description:
        "A prefetch may unload an idle adapter (the usual unload path, with its guards) only when that adapter's demand times this is below the newcomer's.",
    },
  },
  {
    prefetch_loads_per_minute: {
      type: 'integer',
      default: 30,
      between: [0, 1000000],
      description:
        'Prefetch loads the fleet may start per minute; never more than a quarter of `cold_loads_per_minute` when that is set, so requests keep at least half of every minute of that budget. Each also counts against `cold_loads_per_minute`.',
    },
  },
  {
    decision_headers: {
      type: 'boolean',
      default: false,
      description:
        'Add `X-Lora-Replica` and `X-Lora-Stage` to the response (2 more PDK calls; the decision is always in `kong.ctx.shared.lora_router`).',
    },
  },
  { redis: redisField },
];

/** `scorer_weights`: one field per scorer descriptor, so a new scorer needs no schema edit. */
export function scorerWeightsField(scorers: readonly ScorerDescriptor[]): FieldDef {
  return {
    type: 'record',
    description:
      'Weights of the load-aware scorers after the filters (`src/scheduler/scorers/`); 0 turns one off.',
    fields: scorers.map((d) => ({
      [d.configKey]: {
        type: 'number',
        default: d.defaultWeight,
        between: [0, 100],
        description: `${d.experimental ? 'Experimental. ' : ''}\`${d.name}\` (${d.tendency}): higher for ${d.scoresHigher}.`,
      },
    })),
  };
}

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
  slo_classes: { name: string; ttft_ms: number; priority: number }[];
  default_slo_class?: string;
  consumer_slo_class: Record<string, string>;
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
