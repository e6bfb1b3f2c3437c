/**
 * `lora-router`'s fields for when a replica counts as saturated and what a request aims at:
 * saturation by count or by predicted time to first token, the objective, the SLO classes, the
 * prefill rate prior. A part of routerSchema (router-schema.ts keeps the fields' order), apart
 * because these are the settings of the prediction and the hold.
 */
import type { SchemaFields } from '../kong-schema';

export const objectiveFields: SchemaFields = [
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
        "`saturation_mode: predicted`: classes of requests, `{name, ttft_ms, priority}` each, as llm-d's InferenceObjectives: a request names its class with the `x-gateway-inference-objective` header (else its consumer's class, else `default_slo_class`) and may set its own objective with `x-slo-ttft-ms`. Under overload a class waits in the gateway while sending it would queue it past a higher class's objective, until its wait and predicted start reach half of its own objective (aging); a sheddable class (priority < 0) is delayed while it can still meet its objective and refused (503 `shed_low_priority`, with `Retry-After`) once it cannot. A header may lower a request's priority, never raise it above its default's. See docs/routing.md. Empty: every request has `ttft_slo_ms`.",
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
          {
            max_in_flight: {
              type: 'integer',
              default: 0,
              between: [0, 100000],
              description:
                "`saturation_mode: predicted` with `room_wait: escalate`: a request of the class joins a replica only while fewer than this many of the router's requests are in flight there (so at most this many with it), else waits in the gateway until its wait and predicted start reach half its objective (aging), then goes as before. Set on a lower class (batch) below each replica's running slots (vLLM's `max_num_seqs`), it leaves slots free for the higher classes' bursts, which the prediction does not see fill a batch. 0: no bound. See docs/routing.md.",
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
    vllm_scheduling_policy: {
      type: 'string',
      default: 'fcfs',
      one_of: ['fcfs', 'priority'],
      description:
        "What the vLLM replicas run with (vLLM's `--scheduling-policy`). `priority`: the router sets each request's `priority` body field from its class (vLLM serves lower first: class priority 0 is vLLM's 0, -1 is 1; a client's own value is replaced), so a replica's waiting batch requests no longer go before interactive ones. Only useful with replicas started with `--scheduling-policy priority`: a vLLM V1 replica without it (v0.11.0 and later) accepts the field and serves first come first served, so a wrong setting is harmless but goes unnoticed (older vLLM answered 400: the V0 engine, and V1 before mid-2025 whatever the flag). `fcfs` (vLLM's default): the body is left as the client sent it. llama.cpp replicas are left alone either way. See docs/routing.md.",
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
];
